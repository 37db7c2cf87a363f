"""TrainGrid's trainer: data-parallel ResNet-50 on ImageNet (seed 000's workload).

One process per GPU (one per node slot on a CPU), started by ``mpirun`` on the main node (or
``torchrun`` on every node); gradients are averaged over all ranks by ring all-reduce
(``torch.distributed``: NCCL on GPUs, Gloo on CPUs), with the same code on both. Run as
``python3 -m traingrid_trainer``; ``--help`` lists the options, each defaulting to the job's
environment (``JOB_DIR``, ``EPOCHS``, ``BATCH_SIZE``, ``WARMUP_EPOCHS``, ``LR_DECAY_MODE``,
``OUTPUT_DIR``).
"""
