"""Lambda functions run in-process from their Handler: results, errors the way Lambda reports
them, logs in CloudWatch Logs, one cold start per code version and per session, the AWS calls
each function makes, and a simulated clock that stands still while a handler runs."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from traingrid_local.emulator import lambda_inprocess
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.session import Emulator

from .conftest import StartEmulator, TestEmulator
from .helpers import create_role, create_state_machine, history_types, run_execution, zip_files

CODE = '''
import os
import sys
import uuid

GREETING_AT_COLD_START = os.environ["GREETING"]
INSTANCE = uuid.uuid4().hex
CALLS = 0


class DatasetMissing(Exception):
    pass


def handler(event, context):
    global CALLS
    CALLS += 1
    print(f"greeting {event.get('who')} from {context.function_name}")
    return {
        "echo": event,
        "env": os.environ["GREETING"],
        "cold_start_env": GREETING_AT_COLD_START,
        "function": context.function_name,
        "remaining_ms": context.get_remaining_time_in_millis(),
        "instance": INSTANCE,
        "calls": CALLS,
    }


def missing(event, context):
    print("looking for", event["dataset"])
    raise DatasetMissing(f"dataset {event['dataset']} is not in the bucket")
'''


def _create(emulator: Emulator, name: str, handler: str, code: str,
            greeting: str = "bonjour") -> str:
    return emulator.client("lambda").create_function(
        FunctionName=name, Runtime="python3.11", Handler=handler,
        Role=create_role(emulator, f"{name}-role"),
        Code={"ZipFile": zip_files({"app.py": code})},
        Environment={"Variables": {"GREETING": greeting}},
        Timeout=30,
    )["FunctionArn"]


def _invoke(emulator: Emulator, name: str, event: Any) -> tuple[dict[str, Any], Any]:
    response = emulator.client("lambda").invoke(FunctionName=name, Payload=json.dumps(event))
    return response, json.loads(response["Payload"].read())


@pytest.fixture
def functions(emulator: Emulator) -> Emulator:
    _create(emulator, "echo", "app.handler", CODE)
    _create(emulator, "find-dataset", "app.missing", CODE)
    return emulator


def test_invoke_returns_the_handlers_result_with_its_environment(functions: Emulator) -> None:
    response, payload = _invoke(functions, "echo", {"who": "ada", "n": [1, 2]})

    assert "FunctionError" not in response
    assert payload["echo"] == {"who": "ada", "n": [1, 2]}
    assert payload["env"] == "bonjour"
    assert payload["cold_start_env"] == "bonjour"
    assert payload["function"] == "echo"
    assert 0 < payload["remaining_ms"] <= 30_000
    # The function's environment is its own, not the caller's.
    assert "GREETING" not in os.environ


def test_an_exception_is_reported_as_an_unhandled_function_error(functions: Emulator) -> None:
    response, payload = _invoke(functions, "find-dataset", {"dataset": "imagenet"})

    assert response["FunctionError"] == "Unhandled"
    assert payload["errorType"] == "DatasetMissing"
    assert payload["errorMessage"] == "dataset imagenet is not in the bucket"
    assert isinstance(payload["stackTrace"], list)


def test_step_functions_retries_and_catches_the_functions_error(functions: Emulator) -> None:
    arn = functions.client("lambda").get_function(
        FunctionName="find-dataset")["Configuration"]["FunctionArn"]
    machine = create_state_machine(functions, "find", {
        "StartAt": "Find",
        "States": {
            "Find": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": arn, "Payload.$": "$"},
                "Retry": [{"ErrorEquals": ["DatasetMissing"], "MaxAttempts": 1,
                           "IntervalSeconds": 1}],
                "Catch": [{"ErrorEquals": ["DatasetMissing"], "ResultPath": "$.error",
                           "Next": "Missing"}],
                "End": True,
            },
            "Missing": {"Type": "Pass", "End": True},
        },
    }, create_role(functions, "find-machine", "states.amazonaws.com"))

    execution = run_execution(functions, machine, {"dataset": "imagenet"}, name="find-1")

    assert execution["status"] == "SUCCEEDED", execution.get("cause")
    output = json.loads(execution["output"])
    assert output["dataset"] == "imagenet"
    assert output["error"]["Error"] == "DatasetMissing"
    cause = json.loads(output["error"]["Cause"])
    assert cause["errorType"] == "DatasetMissing"
    assert cause["errorMessage"] == "dataset imagenet is not in the bucket"
    # One attempt and one retry, then the Catch.
    events = history_types(functions, execution["executionArn"])
    assert events.count("TaskFailed") == 2
    assert "PassStateEntered" in events


def test_what_the_function_prints_goes_to_its_log_group(functions: Emulator) -> None:
    _invoke(functions, "echo", {"who": "ada"})
    _invoke(functions, "find-dataset", {"dataset": "coco"})
    logs = functions.client("logs")

    groups = {g["logGroupName"] for g in logs.describe_log_groups()["logGroups"]}
    echo = [e["message"] for e in logs.filter_log_events(logGroupName="/aws/lambda/echo")["events"]]
    failed = [e["message"]
              for e in logs.filter_log_events(logGroupName="/aws/lambda/find-dataset")["events"]]

    assert {"/aws/lambda/echo", "/aws/lambda/find-dataset"} <= groups
    assert echo == ["greeting ada from echo"]
    assert failed[0] == "looking for coco"
    assert any('"errorType": "DatasetMissing"' in message for message in failed[1:])


def test_module_code_runs_once_per_code_version(functions: Emulator) -> None:
    _, first = _invoke(functions, "echo", {})
    _, second = _invoke(functions, "echo", {})

    assert second["instance"] == first["instance"]
    assert (first["calls"], second["calls"]) == (1, 2)

    functions.client("lambda").update_function_code(
        FunctionName="echo", ZipFile=zip_files({"app.py": CODE + "\n# version 2\n"})
    )
    _, updated = _invoke(functions, "echo", {})

    assert updated["instance"] != first["instance"]
    assert updated["calls"] == 1


def test_functions_with_the_same_code_do_not_share_module_state(functions: Emulator) -> None:
    _create(functions, "echo-twin", "app.handler", CODE)

    _, echo = _invoke(functions, "echo", {})
    _, twin = _invoke(functions, "echo-twin", {})

    assert twin["instance"] != echo["instance"]
    assert (echo["calls"], twin["calls"]) == (1, 1)


def test_each_session_starts_its_functions_cold() -> None:
    results = []
    for greeting in ("bonjour", "hola"):
        with TestEmulator() as emulator:
            _create(emulator, "echo", "app.handler", CODE, greeting=greeting)
            results.append(_invoke(emulator, "echo", {})[1])

    assert results[1]["env"] == "hola"
    assert results[1]["cold_start_env"] == "hola"
    assert results[1]["calls"] == 1


CALLER = """
import boto3


def handler(event, context):
    s3 = boto3.client("s3")
    s3.put_object(Bucket=event["bucket"], Key="seen", Body=b"1")
    return [b["Name"] for b in s3.list_buckets()["Buckets"]]
"""


def test_the_aws_calls_each_function_makes_are_recorded(emulator: Emulator) -> None:
    emulator.client("s3").create_bucket(Bucket="scratch")
    _create(emulator, "caller", "app.handler", CALLER)
    _create(emulator, "quiet", "app.handler", CODE)

    _, buckets = _invoke(emulator, "caller", {"bucket": "scratch"})
    _invoke(emulator, "quiet", {})
    emulator.client("s3").list_objects_v2(Bucket="scratch")  # not from a function

    assert buckets == ["scratch"]
    assert lambda_inprocess.CALLS["caller"] == {"s3:PutObject", "s3:ListBuckets"}
    assert "quiet" not in lambda_inprocess.CALLS


POWERTOOLS = """
from traingrid.observability import logger


def handler(event, context):
    logger.debug("debugging")
    logger.info("hello", extra={"step": event["step"]})
    return "ok"
"""


def _powertools_function(emulator: Emulator, name: str, service: str, level: str) -> None:
    emulator.client("lambda").create_function(
        FunctionName=name, Runtime="python3.11", Handler="app.handler",
        Role=create_role(emulator, f"{name}-role"),
        Code={"ZipFile": zip_files({"app.py": POWERTOOLS})},
        Environment={"Variables": {"POWERTOOLS_SERVICE_NAME": service,
                                   "POWERTOOLS_LOG_LEVEL": level}},
    )


def test_the_shared_powertools_logger_takes_each_functions_settings(emulator: Emulator) -> None:
    _powertools_function(emulator, "planner", "traingrid-plan", "INFO")
    _powertools_function(emulator, "checker", "traingrid-check", "DEBUG")
    logs = emulator.client("logs")

    for name in ("planner", "checker", "planner"):
        _invoke(emulator, name, {"step": name})

    def records(name: str) -> list[dict[str, Any]]:
        events = logs.filter_log_events(logGroupName=f"/aws/lambda/{name}")["events"]
        return [json.loads(e["message"]) for e in events]

    planner, checker = records("planner"), records("checker")
    assert [r["message"] for r in planner] == ["hello", "hello"]
    assert {r["service"] for r in planner} == {"traingrid-plan"}
    assert [r["message"] for r in checker] == ["debugging", "hello"]
    assert {r["service"] for r in checker} == {"traingrid-check"}
    assert checker[1]["step"] == "checker"


SLOW = """
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def handler(event, context):
    time.sleep(event["seconds"])
    return "done"
"""


def test_simulated_time_stands_still_while_a_handler_runs(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(speed=1000)
    _create(emulator, "slow", "app.handler", SLOW)
    lam = emulator.client("lambda")
    real_start, start = time.monotonic(), CLOCK.now()

    lam.invoke(FunctionName="slow", Payload=json.dumps({"seconds": 0.2}))

    real = time.monotonic() - real_start
    simulated = (CLOCK.now() - start).total_seconds()
    # Only the time spent outside the handler counts: without the pause, at least 200 s.
    assert real >= 0.2
    assert simulated <= (real - 0.2) * 1000 + 1


def test_an_error_during_the_cold_start_is_a_function_error(emulator: Emulator) -> None:
    broken = "import os\n\nBUCKET = os.environ['DATA_BUCKET']\n\n\ndef handler(e, c):\n    pass\n"
    _create(emulator, "broken", "app.handler", broken)

    response, payload = _invoke(emulator, "broken", {})

    assert response["FunctionError"] == "Unhandled"
    assert payload["errorType"] == "KeyError"
    assert "DATA_BUCKET" in payload["errorMessage"]


def test_a_missing_handler_is_a_function_error(emulator: Emulator) -> None:
    _create(emulator, "no-handler", "app.lambda_handler", CODE)

    response, payload = _invoke(emulator, "no-handler", {})

    assert response["FunctionError"] == "Unhandled"
    assert payload["errorType"] == "Runtime.HandlerNotFound"


WAITING = '''
import os
import sys
import threading

STARTED = threading.Event()
RELEASE = threading.Event()


def handler(event, context):
    os.environ["SET_BY_THE_FUNCTION"] = "yes"
    del os.environ["GREETING_TO_DROP"]
    STARTED.set()
    RELEASE.wait(10)
    return {"greeting": os.environ["GREETING"], "set": os.environ["SET_BY_THE_FUNCTION"],
            "dropped": "GREETING_TO_DROP" in os.environ,
            "listed": sorted(k for k in os.environ if k.startswith("GREETING"))}
'''


def test_a_running_function_never_changes_the_environment_other_threads_see(
        emulator: Emulator) -> None:
    """Other threads (the caller, state machines) read the process environment while a
    function runs; they never see its variables, nor a half-restored environment."""
    emulator.client("lambda").create_function(
        FunctionName="waiting", Runtime="python3.11", Handler="app.handler",
        Role=create_role(emulator, "waiting-role"),
        Code={"ZipFile": zip_files({"app.py": WAITING})},
        Environment={"Variables": {"GREETING": "hallo", "GREETING_TO_DROP": "x"}},
    )
    os.environ["GREETING_TO_DROP"] = "the process's own"
    before = dict(os.environ)
    result: dict[str, Any] = {}
    invoking = threading.Thread(target=lambda: result.update(
        payload=_invoke(emulator, "waiting", {})[1]))
    try:
        invoking.start()
        module = _loaded_module("waiting")
        assert module.STARTED.wait(10)
        seen = [dict(os.environ) for _ in range(200)]  # while the function is inside
        module.RELEASE.set()
        invoking.join(10)
    finally:
        os.environ.pop("GREETING_TO_DROP", None)

    assert result["payload"] == {"greeting": "hallo", "set": "yes", "dropped": False,
                                 "listed": ["GREETING"]}
    assert all(snapshot == before for snapshot in seen)
    assert "SET_BY_THE_FUNCTION" not in os.environ and "GREETING" not in os.environ


def _loaded_module(function_name: str) -> Any:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for module in list(lambda_inprocess._MODULES.values()):
            if module.__name__.startswith(f"traingrid_lambda_{function_name}_"):
                return module
        time.sleep(0.01)
    raise AssertionError(f"{function_name} was never loaded")


def test_concurrent_invocations_each_see_their_own_function_environment(
        emulator: Emulator) -> None:
    for name, greeting in (("english", "hello"), ("german", "hallo"), ("french", "bonjour")):
        _create(emulator, name, "app.handler", CODE, greeting=greeting)
    expected = {"english": "hello", "german": "hallo", "french": "bonjour"}
    names = list(expected) * 10
    with ThreadPoolExecutor(max_workers=6) as pool:
        payloads = list(pool.map(lambda name: _invoke(emulator, name, {})[1], names))

    assert [p["env"] for p in payloads] == [expected[n] for n in names]
    assert "GREETING" not in os.environ


def test_each_log_record_is_one_event_whatever_line_separators_it_quotes(
        emulator: Emulator) -> None:
    """Lambda cuts a function's output at newlines only: a JSON log record quoting a U+2028
    or U+0085 (an S3 key may hold them) stays one event that parses."""
    code = ('import json\n\ndef handler(event, context):\n'
            '    print(json.dumps({"key": event["key"]}, ensure_ascii=False))\n'
            '    print("second\\r")\n')
    emulator.client("lambda").create_function(
        FunctionName="quoting", Runtime="python3.11", Handler="app.handler",
        Role=create_role(emulator, "quoting-role"), Code={"ZipFile": zip_files({"app.py": code})})
    key = "data\u2028set\x85/\x1cmanifest.json"
    _invoke(emulator, "quoting", {"key": key})

    events = emulator.client("logs").filter_log_events(logGroupName="/aws/lambda/quoting")
    messages = [e["message"] for e in events["events"]]
    assert messages == [json.dumps({"key": key}, ensure_ascii=False), "second"]
    assert json.loads(messages[0]) == {"key": key}


def test_what_other_threads_print_while_a_function_runs_stays_theirs(
        emulator: Emulator) -> None:
    """stdout is process-wide: a function's log gets only what the function prints, and the
    stream another thread installs meanwhile (as a CLI test runner does) is left in place."""
    code = WAITING.replace("    STARTED.set()", '    print("from the function")\n    STARTED.set()')
    emulator.client("lambda").create_function(
        FunctionName="printing", Runtime="python3.11", Handler="app.handler",
        Role=create_role(emulator, "printing-role"),
        Code={"ZipFile": zip_files({"app.py": code})},
        Environment={"Variables": {"GREETING": "hallo", "GREETING_TO_DROP": "x"}},
    )
    mine = io.StringIO()
    invoking = threading.Thread(target=lambda: _invoke(emulator, "printing", {}))
    invoking.start()
    module = _loaded_module("printing")
    assert module.STARTED.wait(10)
    saved = sys.stdout
    try:
        sys.stdout = mine
        print("from the test")
        module.RELEASE.set()
        invoking.join(10)
        assert sys.stdout is mine  # not put back to what it was when the function started
    finally:
        sys.stdout = saved

    assert mine.getvalue() == "from the test\n"
    events = emulator.client("logs").filter_log_events(logGroupName="/aws/lambda/printing")
    assert [e["message"] for e in events["events"]] == ["from the function"]


SECRET_READER = """
from traingrid.aws.secrets import database_url


def handler(event, context):
    return database_url(event["secret"])
"""


def test_each_function_makes_its_own_cached_lookups(emulator: Emulator) -> None:
    secret = emulator.client("secretsmanager").create_secret(
        Name="db", SecretString=json.dumps({"url": "sqlite:///x.db"}))["ARN"]
    _create(emulator, "first-reader", "app.handler", SECRET_READER)
    _create(emulator, "second-reader", "app.handler", SECRET_READER)

    answers = [_invoke(emulator, name, {"secret": secret})[1]
               for name in ("first-reader", "second-reader", "first-reader")]

    assert answers == ["sqlite:///x.db"] * 3
    # As in two processes: the second function reads the secret itself, whatever the first
    # one cached in the runtime package they share here.
    for name in ("first-reader", "second-reader"):
        assert lambda_inprocess.CALLS[name] == {"secretsmanager:GetSecretValue"}


def test_a_function_starts_while_another_thread_writes_the_process_environment() -> None:
    import os
    import threading
    from collections import UserDict

    # Iterated in Python, as os.environ is: another thread can change it mid-copy.
    view = lambda_inprocess.FunctionEnvironment(UserDict(os.environ))
    stop = threading.Event()

    def churn() -> None:  # a thread outside any function adding and removing variables
        i = 0
        while not stop.is_set():
            view.process[f"CHURN_{i % 50}"] = "1"
            view.process.pop(f"CHURN_{(i + 25) % 50}", None)
            i += 1

    writer = threading.Thread(target=churn)
    writer.start()
    try:
        for _ in range(2000):
            with view.function({"POWERTOOLS_SERVICE_NAME": "svc"}):
                assert view["POWERTOOLS_SERVICE_NAME"] == "svc"
                assert "POWERTOOLS_SERVICE_NAME" in view.copy() and len(list(view)) > 0
    finally:
        stop.set()
        writer.join()
