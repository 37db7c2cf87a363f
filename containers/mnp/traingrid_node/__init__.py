"""TrainGrid node entrypoint for AWS Batch multi-node parallel (MNP) jobs.

Every node of an MNP job runs this package (``python3 -m traingrid_node [training command...]``).
It turns the N nodes into one MPI (mpirun) or torchrun job:

1. validate the AWS Batch environment and detect this node's GPUs;
2. mount FSx for Lustre when ``FSX_DNS_NAME``/``FSX_MOUNT_NAME`` are set;
3. find its address and the interface that holds it (never ECS's link-local ``ecs-eth0``);
4. rendezvous over TCP: workers start sshd with a host key of their own and register (address,
   interface, slots, host key) with the main node, which waits for all of them (with a
   timeout), writes the MPI host file, main node first, makes the job's ssh key and sends it
   to the workers, which let it in from the main node's address only;
5. launch: ``mpirun`` on the main node only (the workers stay connected until it finishes and
   then exit with its status) or ``torchrun`` on every node;
6. forward SIGTERM/SIGINT to the launcher's process group and exit with its status.

Standard library only. README.md next to this package lists the environment variables and the
exit codes.
"""
