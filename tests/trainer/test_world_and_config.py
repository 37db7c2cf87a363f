from pathlib import Path

import pytest

from traingrid_trainer.config import parse_args
from traingrid_trainer.world import DEFAULT_PORT, detect_world


def test_mpirun_ranks_meet_at_the_main_node() -> None:
    world = detect_world({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "16",
                          "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                          "TRAINGRID_MAIN_ADDRESS": "10.0.0.7"})
    assert (world.rank, world.size, world.local_rank) == (5, 16, 1)
    assert world.init_method == f"tcp://10.0.0.7:{DEFAULT_PORT}"
    assert not world.is_main


def test_torchrun_variables_are_read_too() -> None:
    world = detect_world({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
                          "MASTER_ADDR": "main", "MASTER_PORT": "29500"})
    assert world.is_main and world.size == 2 and world.init_method == "tcp://main:29500"


def test_alone_is_a_world_of_one() -> None:
    assert detect_world({}).size == 1


def test_a_rank_outside_its_world_is_refused() -> None:
    with pytest.raises(ValueError, match="rank 4 is outside a world of 4"):
        detect_world({"RANK": "4", "WORLD_SIZE": "4"})


def test_the_job_environment_gives_the_defaults_and_flags_win() -> None:
    env = {"JOB_DIR": "/fsx/imagenet", "OUTPUT_DIR": "/fsx/runs/r1", "EPOCHS": "30",
           "BATCH_SIZE": "128", "WARMUP_EPOCHS": "2", "LR_DECAY_MODE": "cosine"}
    cfg = parse_args([], env)
    assert (cfg.data_dir, cfg.output_dir) == (Path("/fsx/imagenet"), Path("/fsx/runs/r1"))
    assert (cfg.epochs, cfg.batch_size, cfg.warmup_epochs, cfg.lr_decay_mode) == (
        30, 128, 2, "cosine")
    assert cfg.checkpoint_dir == Path("/fsx/runs/r1/checkpoints")
    cfg = parse_args(["--num_epochs", "5", "-b", "64", "--lr_decay_mode", "step",
                      "--clear_log"], env)
    assert (cfg.epochs, cfg.batch_size, cfg.lr_decay_mode) == (5, 64, "step")


def test_bad_options_are_refused(capsys) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--num_epochs", "3", "--warmup_epochs", "3"], {})
    assert "--warmup_epochs (3) must be fewer than --num_epochs (3)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--lr_decay_mode", "exponential"], {})
    assert "invalid choice" in capsys.readouterr().err
