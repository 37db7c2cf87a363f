"""The API over real HTTP on loopback (the server `traingrid serve` runs), with the deployed API
function behind it in the emulator: submit, follow, list, logs; every class of invalid
request; unknown runs; idempotency."""

from __future__ import annotations

import json
import time

import pytest

from tests.integration.iam import missing_permissions
from traingrid_local.emulator import lambda_inprocess
from traingrid_local.emulator.account import ACCOUNT
from traingrid_local.stack import sample_campaign
from traingrid_local.stack.environment import DEMO_BUCKET

# The module's runs overlap, and on a busy machine a run's file system is deleted after the
# next run has asked for its own: in an account on FSx's default storage quota the later one
# would be refused (test_fsx_quota). Here the increase was granted, as for the load test.
FSX_QUOTA_GIB = 1_000_000


@pytest.fixture(scope="module", autouse=True)
def granted_fsx_quota(served_api):
    ACCOUNT.raise_fsx_storage(FSX_QUOTA_GIB)

pytestmark = pytest.mark.e2e

DATASET = f"s3://{DEMO_BUCKET}/imagenet2012/resized/"
TERMINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"}


def follow(client, name: str, timeout: float = 300) -> dict:
    """The run once it has ended (a generous deadline: a busy machine runs it late)."""
    deadline = time.monotonic() + timeout
    while True:
        run = client.get(f"/runs/{name}")
        if run["status"] in TERMINAL or time.monotonic() > deadline:
            return run
        time.sleep(0.1)


def pointers(answer) -> list[str]:
    return [p["pointer"] for p in answer.body["problems"]]


def test_a_submitted_run_is_followed_to_its_end_with_states_artifacts_and_logs(client,
                                                                               served_api):
    answer = client.request("POST", "/runs", {"dataset": DATASET, "nodes": 2})
    assert answer.status == 202, answer.body
    submitted = answer.body
    name = submitted["name"]
    assert name.startswith("imagenet2012-resized-")
    assert answer.headers["Location"] == f"/runs/{name}"
    assert submitted["status"] == "RUNNING" and submitted["started"] is True
    assert submitted["execution_arn"].endswith(f":{name}")
    assert submitted["console_url"].endswith(submitted["execution_arn"])

    run = follow(client, name)
    assert run["status"] == "SUCCEEDED", run["cause"]
    assert run["pipeline"] == "TrainingRun" and run["current_state"] == "Succeeded"
    assert run["input"]["request"]["nodes"] == 2
    (archive,) = run["artifacts"]
    assert archive["location"] == f"s3://{DEMO_BUCKET}/runs/{name}/"
    assert archive["manifest"] == archive["location"] + "manifest.json"
    states = [s["state"] for s in run["states"]]
    assert states[0] == "Plan" and states[-1] == "Succeeded"
    assert {"CreateFileSystem", "SubmitTrainingJob", "CheckArchive",
            "DeleteFileSystem"} <= set(states)
    # The training wait may time out and start again (a fallback check); nothing else fails.
    assert all(s["outcome"] == "succeeded" or (
        s["state"] == "AwaitTrainingJob" and s["errors"] == ["States.Timeout"])
        for s in run["states"])
    offsets = [s["offset_s"] for s in run["states"]]
    assert offsets == sorted(offsets) and run["duration_s"] >= offsets[-1]

    # Its receipt says its goodput, and it is the receipt the run recorded, line for line.
    good = run["cost"]["goodput"]
    assert 0 < good["productive_node_hours"] < good["paid_node_hours"]
    assert good["goodput"] == round(good["productive_node_hours"] / good["paid_node_hours"], 4)
    assert good["lost_node_hours"]["queue"] > 0 and good["lost_node_hours"]["lost_work"] == 0
    from traingrid.db.engine import transaction
    from traingrid.db.repositories import TrainingRunRepository

    with transaction(served_api.deployment.database_url) as session:
        recorded = TrainingRunRepository(session).get(run["execution_arn"]).cost
    assert recorded == run["cost"]

    listed = client.get("/runs", pipeline="training")["runs"]
    assert name in [r["name"] for r in listed]

    logs = client.get(f"/runs/{name}/logs")
    assert logs["log"]["source"].endswith(f"/runs/{name}/outputs/logs/main-node.log")
    assert any(line.startswith("mpirun -np 16") for line in logs["log"]["lines"])


def test_a_failing_run_says_why_and_which_state_caught_it(client):
    answer = client.request("POST", "/runs",
                            {"dataset": f"s3://{DEMO_BUCKET}/nothing-here/", "name": "empty"})
    assert answer.status == 202
    run = follow(client, "empty")
    assert (run["status"], run["error"]) == ("FAILED", "DatasetNotFound")
    assert "upload the dataset there first" in run["cause"]
    plan = run["states"][0]
    assert (plan["state"], plan["outcome"]) == ("Plan", "caught")
    assert plan["errors"] == ["DatasetNotFound"]
    assert run["states"][-1]["state"] == "Failed"
    logs = client.get("/runs/empty/logs")
    assert (logs["error"], logs["log"]) == ("DatasetNotFound", None)


@pytest.mark.parametrize(("body", "expected"), [
    pytest.param(b"{", [""], id="not-json"),
    pytest.param(b"", [""], id="empty"),
    pytest.param(b"[1, 2]", [""], id="not-an-object"),
    pytest.param({}, ["/dataset"], id="missing-field"),
    pytest.param({"dataset": DATASET, "nodes": "many"}, ["/nodes"], id="wrong-type"),
    pytest.param({"dataset": DATASET, "nodes": 0}, ["/nodes"], id="out-of-range"),
    pytest.param({"dataset": DATASET, "colour": "red"}, ["/colour"], id="unknown-field"),
    pytest.param({"dataset": DATASET, "instance_type": "t2.micro"}, ["/instance_type"],
                 id="not-one-of"),
    pytest.param({"dataset": DATASET, "name": "no spaces allowed"}, ["/name"], id="pattern"),
    pytest.param({"dataset": DATASET, "fsx": {"deployment_type": "FAST"}},
                 ["/fsx/deployment_type"], id="nested"),
    pytest.param({"dataset": DATASET, "epochs": 5, "warmup_epochs": 5}, [""],
                 id="across-fields"),
    pytest.param({"nodes": -1, "instance_type": "x", "colour": 1, "fsx": {"size": 1}},
                 ["/dataset", "/nodes", "/instance_type", "/fsx/size", "/colour"],
                 id="every-problem-at-once"),
])
def test_invalid_runs_get_400_listing_every_problem(client, body, expected):
    answer = client.request("POST", "/runs", body)
    assert answer.status == 400, answer.body
    assert sorted(pointers(answer)) == sorted(expected)
    assert all(p["message"] for p in answer.body["problems"])
    assert f"{len(expected)} problem(s)" in answer.body["message"]


def test_a_dataset_outside_the_data_bucket_is_forbidden_and_says_which_bucket(client):
    answer = client.request("POST", "/runs", {"dataset": "s3://someone-elses-bucket/data/"})
    assert answer.status == 403, answer.body
    assert pointers(answer) == ["/dataset"]
    assert f"s3://{DEMO_BUCKET}/" in answer.body["problems"][0]["message"]


def test_an_instance_type_the_compute_environment_does_not_launch_is_400_listing_those_it_does(
        client):
    answer = client.request("POST", "/runs", {"dataset": DATASET, "instance_type": "g5.48xlarge"})
    assert answer.status == 400, answer.body
    assert pointers(answer) == ["/instance_type"]
    assert ("launches only p4d.24xlarge, p5.48xlarge; g5.48xlarge"
            in answer.body["problems"][0]["message"])


def test_a_p3_type_is_400_saying_batchs_ami_cannot_launch_it_with_every_other_reason(client):
    """The stack names no AMI (ImageIdOverride): Batch's ECS_AL2023_NVIDIA "doesn't support p3
    and g3 instance types" (Batch API Reference, Ec2Configuration.imageType)."""
    answer = client.request("POST", "/runs", {"dataset": DATASET, "instance_type": "p3.8xlarge"})
    assert answer.status == 400, answer.body
    messages = [p["message"] for p in answer.body["problems"]]
    assert pointers(answer) == ["/instance_type", "/instance_type"]
    assert "launches only p4d.24xlarge, p5.48xlarge; p3.8xlarge" in messages[0]
    assert ("AWS Batch starts its GPU nodes on the ECS_AL2023_NVIDIA AMI, which does not "
            "support p3 and g3 instance types" in messages[1])
    assert "ImageIdOverride=<an AMI that supports p3.8xlarge>" in messages[1]


def test_post_runs_refuses_a_command_naming_the_route_that_takes_one(client):
    answer = client.request("POST", "/runs", {"dataset": DATASET,
                                              "command": ["python3", "", "bad\narg", 3]})
    assert answer.status == 400
    assert sorted(pointers(answer)) == ["/command", "/command/1", "/command/2", "/command/3"]
    answer = client.request("POST", "/runs", {
        "dataset": DATASET, "name": "own-command",
        "command": ["python3", "/fsx/code/train.py", "--epochs=2; rm -rf /"]})
    assert answer.status == 403 and pointers(answer) == ["/command"], answer.body
    assert "POST /command-runs" in answer.body["problems"][0]["message"]


def test_an_integral_number_is_an_integer_as_in_json_schema(client):
    answer = client.request("POST", "/runs", {"dataset": DATASET, "nodes": 2.0,
                                              "epochs": 3.0, "warmup_epochs": 0,
                                              "name": "integral-floats"})
    assert answer.status == 202, answer.body
    answer = client.request("POST", "/runs", {"dataset": DATASET, "nodes": 2.5})
    assert answer.status == 400 and pointers(answer) == ["/nodes"]


def test_a_next_token_is_refused_with_other_filters(client):
    for index in range(2):
        client.request("POST", "/runs", {"dataset": DATASET, "name": f"filtered-{index}"})
    token = client.get("/runs", limit=1)["next_token"]
    assert token is not None
    answer = client.request("GET", "/runs", query={"limit": 1, "next_token": token,
                                                   "pipeline": "campaign",
                                                   "status": "TIMED_OUT"})
    assert answer.status == 400, answer.body
    assert pointers(answer) == ["/next_token"]
    assert client.get("/runs", limit=1, next_token=token)["runs"]


def test_an_undeclared_method_is_405_in_json_with_allow(served_api):
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{served_api.url}/runs", method="TRACE")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 405
    assert refused.value.headers["Allow"] == "GET, HEAD, POST"
    assert refused.value.headers["Content-Type"] == "application/json"
    assert "TRACE" in json.loads(refused.value.read())["message"]
    head = urllib.request.Request(f"{served_api.url}/runs?limit=1", method="HEAD")
    with urllib.request.urlopen(head, timeout=30) as response:
        assert response.status == 200 and response.read() == b""
        assert response.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(("path", "query", "expected"), [
    ("/runs", {"limit": 0}, ["/limit"]),
    ("/runs", {"limit": "ten"}, ["/limit"]),
    ("/runs", {"pipeline": "nightly"}, ["/pipeline"]),
    ("/runs", {"bogus": 1}, ["/bogus"]),
    ("/runs", {"next_token": "not-a-token"}, ["/next_token"]),
])
def test_invalid_queries_get_400(client, path, query, expected):
    answer = client.request("GET", path, query=query)
    assert answer.status == 400, answer.body
    assert pointers(answer) == expected


def test_invalid_fanout_requests_and_headers_get_400(client):
    answer = client.request("POST", f"/campaigns/{sample_campaign.CAMPAIGN}/runs",
                            {"datasets": "some", "instance_count": 0,
                             "instance_type": "p3.16xlarge"})
    assert answer.status == 400
    assert sorted(pointers(answer)) == ["/datasets", "/instance_count", "/instance_type"]
    answer = client.request("POST", "/runs", {"dataset": DATASET},
                            headers={"Idempotency-Key": "k" * 256})
    assert answer.status == 400 and "Idempotency-Key" in answer.body["problems"][0]["message"]


@pytest.mark.parametrize(("method", "path", "body"), [
    ("GET", "/runs/no-such-run", None),
    ("GET", "/runs/no-such-run/logs", None),
    ("GET", "/runs/not%20a%20name", None),
    ("POST", "/campaigns/no-such-campaign/runs", {}),
    ("GET", "/nothing-here", None),
])
def test_unknown_things_are_404(client, method, path, body):
    answer = client.request(method, path, body)
    assert answer.status == 404, answer.body
    assert answer.body["message"]


def test_the_same_idempotency_key_returns_the_same_run_and_never_starts_a_second(
        client, served_api):
    body = {"dataset": DATASET, "nodes": 3}
    key = {"Idempotency-Key": "submit-3-nodes"}
    first = client.request("POST", "/runs", body, headers=key)
    again = client.request("POST", "/runs", body, headers=key)
    assert first.status == again.status == 202
    assert again.body == first.body
    other_key = client.request("POST", "/runs", body, headers={"Idempotency-Key": "another"})
    assert other_key.status == 202 and other_key.body["name"] != first.body["name"]
    reused = client.request("POST", "/runs", {"dataset": DATASET, "nodes": 4}, headers=key)
    assert reused.status == 422 and "different request" in reused.body["message"]

    sfn = served_api.emulator.client("stepfunctions")
    machine = served_api.deployment.stack.outputs["TrainingRunStateMachineArn"]
    names = [e["name"] for e in sfn.list_executions(stateMachineArn=machine)["executions"]]
    assert names.count(first.body["name"]) == 1


def test_a_name_or_the_same_request_is_idempotent_without_a_key(client):
    named = {"dataset": DATASET, "name": "nightly-resnet", "epochs": 30}
    first = client.request("POST", "/runs", named)
    again = client.request("POST", "/runs", named)
    assert (first.status, again.status) == (202, 200)
    assert again.body["name"] == "nightly-resnet" and again.body["started"] is False
    assert again.body["execution_arn"] == first.body["execution_arn"]
    conflict = client.request("POST", "/runs", named | {"epochs": 31})
    assert conflict.status == 409 and "different request" in conflict.body["message"]

    unnamed = {"dataset": DATASET, "batch_size": 64}
    first = client.request("POST", "/runs", unnamed)
    again = client.request("POST", "/runs", unnamed)
    assert (first.status, again.status) == (202, 200)
    assert again.body["name"] == first.body["name"]


def test_recent_runs_page_by_page_newest_first(client):
    for index in range(3):
        assert client.request("POST", "/runs", {"dataset": DATASET,
                                                "name": f"paged-{index}"}).status == 202
    everything = client.get("/runs", limit=100)
    assert everything["next_token"] is None
    paged, token = [], None
    while True:
        page = client.get("/runs", limit=2, next_token=token)
        assert len(page["runs"]) <= 2
        paged += page["runs"]
        token = page["next_token"]
        if token is None:
            break
    assert [r["name"] for r in paged] == [r["name"] for r in everything["runs"]]
    starts = [r["started_at"] for r in paged]
    assert starts == sorted(starts, reverse=True)
    assert len({r["name"] for r in paged}) == len(paged) >= 3


def test_a_requested_fanout_trains_every_region_and_is_listed(client, served_api):
    answer = client.request("POST", f"/campaigns/{sample_campaign.CAMPAIGN}/runs",
                            {"instance_count": 8, "hyperparameters": {"num_epochs": 30},
                             "regions": {"eu-west-1": {"hyperparameters": {"lr": 0.2},
                                                       "image_tag": "resnet-v2"}}},
                            headers={"Idempotency-Key": "fanout-1"})
    assert answer.status == 202, answer.body
    name = answer.body["name"]
    assert name.startswith(f"{sample_campaign.CAMPAIGN}-")
    run = follow(client, name)
    assert run["status"] == "SUCCEEDED", run["cause"]
    assert run["pipeline"] == "CampaignFanout"
    assert {a["region"] for a in run["artifacts"]} == set(sample_campaign.REGION_PRICES)
    (campaign,) = client.get("/campaigns")["campaigns"]
    assert campaign["last_run"]["name"] == name
    assert campaign["last_run"]["status"] == "SUCCEEDED"
    assert client.get("/runs", pipeline="campaign")["runs"][0]["name"] == name
    # One region's job ran its own hyper-parameters and image tag; the others the run's.
    jobs = {job["requested_region"]: job for job in sample_campaign.region_jobs(
        served_api.deployment.database_url, run["execution_arn"])}
    def described(region):
        return served_api.emulator.client("sagemaker", region).describe_training_job(
            TrainingJobName=jobs[region]["job_name"])
    west, east = described("eu-west-1"), described("us-east-1")
    assert west["AlgorithmSpecification"]["TrainingImage"].endswith("traingrid-sagemaker:resnet-v2")
    assert (west["HyperParameters"]["lr"], west["HyperParameters"]["num_epochs"]) == ("0.2", "30")
    assert east["AlgorithmSpecification"]["TrainingImage"].endswith("traingrid-sagemaker:0.1.0")
    assert "lr" not in east["HyperParameters"] and east["ResourceConfig"]["InstanceCount"] == 8


def test_a_raw_request_gets_json_back(served_api):
    import urllib.request

    with urllib.request.urlopen(f"{served_api.url}/runs?limit=1", timeout=30) as response:
        assert response.headers["Content-Type"] == "application/json"
        assert "runs" in json.loads(response.read())


def test_every_state_of_both_pipelines_stays_small(client, served_api):
    """What the console shows of each state, far under Step Functions' 256 KB."""
    client.call("POST", "/runs", {"dataset": DATASET, "name": "small-states"})
    client.call("POST", f"/campaigns/{sample_campaign.CAMPAIGN}/runs",
                {"name": "small-states-fanout", "datasets": "all"})
    sfn = served_api.emulator.client("stepfunctions")
    largest = {}
    for name in ("small-states", "small-states-fanout"):
        run = follow(client, name)
        assert run["status"] == "SUCCEEDED", run["cause"]
        events = sfn.get_execution_history(executionArn=run["execution_arn"],
                                           maxResults=1000)["events"]
        largest[name] = max(len(e["stateExitedEventDetails"].get("output", ""))
                            for e in events if "stateExitedEventDetails" in e)
    assert all(size < 16 * 1024 for size in largest.values()), largest


def test_logs_come_from_the_main_nodes_stream_while_it_has_one(client, served_api):
    """As the awslogs driver writes them on AWS (the emulated job writes none itself)."""
    client.call("POST", "/runs", {"dataset": DATASET, "name": "streamed", "nodes": 2})
    run = follow(client, "streamed")
    emulator, stack = served_api.emulator, served_api.deployment.stack
    (job,) = emulator.client("batch").list_jobs(
        jobQueue=stack.outputs["TrainingJobQueueArn"],
        filters=[{"name": "JOB_NAME", "values": ["streamed"]}])["jobSummaryList"]
    main = emulator.client("batch").describe_jobs(jobs=[f"{job['jobId']}#0"])["jobs"][0]
    stream = main["container"]["logStreamName"]
    group = stack.resources["TrainingJobLogGroup"]
    logs, now_ms = emulator.client("logs"), int(time.time() * 1000)
    logs.create_log_stream(logGroupName=group, logStreamName=stream)
    logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[
        {"timestamp": now_ms + i, "message": f"epoch {i}: loss {2.0 / (i + 1):.3f}"}
        for i in range(250)])

    found = client.get("/runs/streamed/logs")
    assert run["status"] == "SUCCEEDED"
    assert found["log"]["source"] == f"cloudwatch-logs:{group}:{stream}"
    lines = found["log"]["lines"]
    assert len(lines) == 200 and lines[-1].startswith("epoch 249")


def test_the_api_function_calls_only_what_its_role_allows(client, served_api):
    # Everything the function does: submit (with a key), follow, list, logs, campaigns.
    answer = client.request("POST", "/runs", {"dataset": DATASET, "name": "every-call"},
                            headers={"Idempotency-Key": "every-call"})
    assert answer.status == 202, answer.body
    assert follow(client, "every-call")["status"] == "SUCCEEDED"
    client.get("/runs")
    client.get("/runs/every-call/logs")
    client.get("/campaigns")
    function = served_api.deployment.stack.resources["ApiFunction"]
    calls = {function: lambda_inprocess.CALLS[function]}
    assert {"states:DescribeExecution", "states:StartExecution", "states:ListExecutions",
            "states:GetExecutionHistory", "dynamodb:PutItem", "batch:ListJobs",
            "batch:DescribeJobs", "logs:GetLogEvents", "s3:GetObject",
            "secretsmanager:GetSecretValue"} <= calls[function]
    assert missing_permissions(served_api.deployment.stack, calls) == []
