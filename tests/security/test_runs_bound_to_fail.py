"""Requests that would start runs bound to fail are refused before anything starts, over real
HTTP against `traingrid serve` (a stack deployed with AllowRunCommands=true, so that the
command route runs too):

- a fan-out's hyperparameter values the trainer's parser refuses (it exits 2, in every
  region's job): each is a problem of the 400, with the request's others;
- a run whose execution would not fit Step Functions' 256 KiB (the input StartExecution takes,
  and every state after it, which the workflow grows): a 413 saying so and the limit, on every
  route that starts an execution. A run just under it starts, and no state of it is over.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.integration.conftest import SPEED
from tests.security.test_request_bounds import SMALL, post
from traingrid.aws.stepfunctions import MAX_PAYLOAD_BYTES
from traingrid.campaigns.fanout_request import TRAINER_HYPERPARAMETERS
from traingrid.runs.submit import STATE_GROWTH
from traingrid.runs.view import TRAINING_RUN
from traingrid_local.api.client import ApiClient
from traingrid_local.api.server import API_FUNCTION, ApiServer, lambda_invoker
from traingrid_local.demo.served import seed
from traingrid_local.emulator.session import Emulator
from traingrid_local.stack.environment import Deployment, deploy_traingrid
from traingrid_local.stack.sample_campaign import CAMPAIGN, REGION_PRICES

pytestmark = pytest.mark.e2e

DATASET = "s3://{bucket}/imagenet2012/resized/"
FANOUT = f"/campaigns/{CAMPAIGN}/runs"
MACHINES = ("TrainingRunStateMachineArn", "CampaignFanoutStateMachineArn")


@dataclass
class Served:
    url: str
    emulator: Emulator
    deployment: Deployment

    @property
    def dataset(self) -> str:
        return DATASET.format(bucket=self.deployment.stack.outputs["DataBucketName"])

    def executions(self) -> int:
        sfn = self.emulator.client("stepfunctions")
        return sum(len(sfn.list_executions(stateMachineArn=self.deployment.stack.outputs[m])[
            "executions"]) for m in MACHINES)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`traingrid serve` (seeded as it is), its stack taking commands, unthrottled."""
    database = tmp_path_factory.mktemp("bound-to-fail") / "campaigns.sqlite"
    with Emulator(speed=SPEED, training_seconds={"batch": 600, "sagemaker": 600}) as emulator:
        deployment = deploy_traingrid(emulator, database_url=f"sqlite:///{database}",
                                      parameters={"AllowRunCommands": "true"})
        try:
            seed(emulator, deployment)
            invoke = lambda_invoker(emulator, deployment.stack.resources[API_FUNCTION])
            with ApiServer(invoke, port=0) as server:
                yield Served(server.url, emulator, deployment)
        finally:
            deployment.close()


def refused(served: Served, target: str, body: object, status: int = 400) -> dict:
    """The answer to ``body``: ``status``, small, and no execution started."""
    before = served.executions()
    answer, data = post(served.url, target, body)
    assert answer == status, (answer, data[:500])
    assert len(data) < SMALL, len(data)
    assert served.executions() == before
    return json.loads(data)


# --- hyperparameters: only what the trainer's parser takes -------------------------------------

def test_values_the_trainer_refuses_are_each_a_problem(served):
    answer = refused(served, FANOUT, {"hyperparameters": {
        "num_epochs": "abc", "batch_size": -5, "lr_decay_mode": "zigzag", "lr": 0.2}})
    problems = {p["pointer"]: p["message"] for p in answer["problems"]}
    assert set(problems) == {"/hyperparameters/num_epochs", "/hyperparameters/batch_size",
                             "/hyperparameters/lr_decay_mode"}, problems
    assert problems["/hyperparameters/num_epochs"].startswith(
        "num_epochs must be an integer of at least 1")
    assert "the trainer's --batch_size), not -5" in problems["/hyperparameters/batch_size"]
    assert "one of poly, cosine, step, linear" in problems["/hyperparameters/lr_decay_mode"]


def test_a_warmup_as_long_as_the_run_is_refused_with_the_others(served):
    """The sample campaign warms up 10 epochs of 90, and shrinks its jobs to 5 instances."""
    answer = refused(served, FANOUT, {
        "instance_count": 4, "hyperparameters": {"num_epochs": 10},
        "regions": {"eu-west-1": {"hyperparameters": {"warmup_epochs": 3, "num_epochs": 3}}}})
    problems = {p["pointer"]: p["message"] for p in answer["problems"]}
    assert set(problems) == {"/instance_count", "/hyperparameters/num_epochs",
                             "/regions/eu-west-1/hyperparameters/warmup_epochs"}, problems
    assert problems["/hyperparameters/num_epochs"].startswith(
        "warmup_epochs (10, the campaign's) must be fewer than num_epochs (10)")


def longest_values(regions: list[str]) -> dict:
    """Every flag with SageMaker's longest value (2,500 characters), at the top and in each
    region: what the red team sent."""
    values = {name: "9" * 2500 for name in TRAINER_HYPERPARAMETERS}
    return {"hyperparameters": values,
            "regions": {region: {"hyperparameters": values} for region in regions}}


@pytest.mark.parametrize(("regions", "megabytes"), [
    (list(REGION_PRICES), 0.2), ([f"{a}{b}-west-1" for a in "abcdefg" for b in "abcdefg"], 2.1),
], ids=["214 KB", "2.2 MB"])
def test_the_red_teams_bodies_are_refused(served, regions, megabytes):
    body = longest_values(regions)
    assert len(json.dumps(body)) > megabytes * 10**6
    answer = refused(served, FANOUT, body)
    flags = len(TRAINER_HYPERPARAMETERS)
    assert answer["problem_count"] == flags * (1 + len(regions)), answer["message"][:500]
    assert answer["problems"][0]["pointer"] == "/hyperparameters/num_epochs"


# --- what fits Step Functions ------------------------------------------------------------------

def input_bytes(message: str) -> int:
    """The input's size a 413's message gives."""
    found = re.search(r"whose input is ([0-9,]+) bytes", message)
    assert found, message
    return int(found.group(1).replace(",", ""))


def test_a_fanout_whose_input_would_not_fit_is_a_413(served):
    instance_type = "ml.p" + "3" * 200_000 + ".16xlarge"  # of the pattern, and of no limit
    message = refused(served, FANOUT, {"instance_type": instance_type}, 413)["message"]
    assert message.startswith("This request would start a CampaignFanout"), message
    assert 200_000 < input_bytes(message) < 201_000, message
    assert f"at most {MAX_PAYLOAD_BYTES:,} bytes (Step Functions' 256 KiB)" in message
    assert "A CampaignFanout's input may be at most 98,304 bytes" in message, message


def command(arguments: int) -> list[str]:
    return ["python3", "/fsx/code/train.py", *(f"--a{i}=" + "x" * 1000 for i in range(arguments))]


def test_a_command_run_whose_plan_would_not_fit_is_a_413(served):
    """120 KB of command: StartExecution would take it, but the plan repeats it."""
    body = {"dataset": served.dataset, "nodes": 2, "command": command(120)}
    message = refused(served, "/command-runs", body, 413)["message"]
    assert 120_000 < input_bytes(message) < 130_000, message
    assert "its plan repeats the request" in message, message
    assert "A TrainingRun's input may be at most 114,688 bytes" in message, message


def largest_state(served: Served, arn: str) -> int:
    """The largest input, output or task parameters of any state of the execution."""
    events = served.emulator.client("stepfunctions").get_execution_history(
        executionArn=arn, maxResults=1000)["events"]
    return max(len(details[field].encode()) for event in events for key, details in event.items()
               if key.endswith("EventDetails") and isinstance(details, dict)
               for field in ("input", "output", "parameters") if field in details)


def test_a_run_just_under_the_limit_starts_and_every_state_fits(served):
    times, kept = STATE_GROWTH[TRAINING_RUN]
    body = {"dataset": served.dataset, "nodes": 2, "name": "just-under", "command": command(100)}
    answer, data = post(served.url, "/command-runs", body)
    assert answer == 202, data[:500]
    client = ApiClient(served.url, timeout=60)
    deadline = time.monotonic() + 300
    while (run := client.get("/runs/just-under"))["status"] == "RUNNING":
        assert time.monotonic() < deadline, run
        time.sleep(0.2)
    assert run["status"] == "SUCCEEDED", run.get("cause")
    sfn = served.emulator.client("stepfunctions")
    size = len(sfn.describe_execution(executionArn=run["execution_arn"])["input"].encode())
    largest = largest_state(served, run["execution_arn"])
    assert times * size + kept <= MAX_PAYLOAD_BYTES
    assert size < largest <= times * size + kept, (size, largest)
