"""SageMaker's entry point (``sagemaker_program``) for a region's campaign job: the Batch nodes'
trainer, unchanged. SageMaker's mpirun starts it once per GPU with the job's hyperparameters
as flags (``--num_epochs 90 --batch_size 256 ...``); the trainer reads the train channel, the
model folder and the checkpoint folder from SageMaker's variables."""

import sys

from traingrid_trainer.train import main

if __name__ == "__main__":
    sys.exit(main())
