"""The trainer on the CPU writes its CloudWatch metrics (embedded metric format) to stdout as
it trains: each line a document CloudWatch extracts, with the run and the node."""

from __future__ import annotations

from tests.node.emf_spec import lines
from tests.trainer.conftest import run_trainer

TINY = ["--image_size", "32", "-b", "2", "--log_every", "1", "--loader_workers", "0",
        "--warmup_epochs", "0"]


def test_a_run_writes_each_window_and_a_last_heartbeat(tmp_path) -> None:
    finished = run_trainer(["--synthetic", "--num_epochs", "1", "--steps_per_epoch", "3", *TINY,
                            "--output_dir", str(tmp_path / "run")], TRAINGRID_RUN="emf-run")
    assert finished.returncode == 0, finished.stderr
    documents = lines(finished.stdout)
    windows = [d for d in documents if "ImagesPerSecond" in d]
    beats = [d for d in documents if "StepsCompleted" in d]
    assert len(windows) == 3 and all(d["ImagesPerSecond"] > 0 and d["Loss"] > 0
                                     for d in windows)
    assert sum(d["StepsCompleted"] for d in beats) == 3
    assert {d["run"] for d in documents} == {"emf-run"}
    assert all(d["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "TrainGrid" for d in documents)
