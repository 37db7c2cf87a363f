"""The deployed MigrateDatabase function brings the campaign database to the latest revision:
invoked by hand, and as CloudFormation's custom resource (answering over HTTP)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from traingrid.db.migrate import current, downgrade

pytestmark = pytest.mark.e2e


def invoke(emulator, deployment, event: dict) -> dict:
    response = emulator.client("lambda").invoke(
        FunctionName=deployment.stack.outputs["MigrateDatabaseFunctionName"],
        Payload=json.dumps(event).encode())
    payload = json.loads(response["Payload"].read())
    assert "FunctionError" not in response, payload
    return payload


def test_invoked_by_hand_it_migrates_an_empty_database(emulated):
    emulator, deployment = emulated("happy")
    head = current(deployment.database_url)
    downgrade(deployment.database_url, "base")
    assert current(deployment.database_url) is None

    result = invoke(emulator, deployment, {})

    # SQLite has no roles: the functions share the file.
    assert result == {"from": "", "revision": head, "role": ""}
    assert current(deployment.database_url) == head


class CloudFormation(BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_PUT(self) -> None:  # noqa: N802 - the http.server API
        length = int(self.headers["Content-Length"])
        CloudFormation.received.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def response_url():
    CloudFormation.received = []
    server = HTTPServer(("127.0.0.1", 0), CloudFormation)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/response"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_as_a_custom_resource_it_migrates_and_answers_cloudformation(emulated, response_url):
    emulator, deployment = emulated("happy")
    downgrade(deployment.database_url, "base")
    event = {"RequestType": "Create", "ResponseURL": response_url, "StackId": "stack",
             "RequestId": "request-1", "LogicalResourceId": "DatabaseSchema",
             "ResourceProperties": {"SchemaRevision": "0002"}}

    invoke(emulator, deployment, event)

    (answer,) = CloudFormation.received
    assert answer["Status"] == "SUCCESS"
    assert answer["Data"]["revision"] == current(deployment.database_url)
    assert (answer["RequestId"], answer["LogicalResourceId"]) == ("request-1", "DatabaseSchema")


def test_deleting_the_custom_resource_keeps_the_data(emulated, response_url):
    emulator, deployment = emulated("happy")
    head = current(deployment.database_url)
    invoke(emulator, deployment, {"RequestType": "Delete", "ResponseURL": response_url,
                                  "StackId": "s", "RequestId": "r",
                                  "LogicalResourceId": "DatabaseSchema"})
    assert CloudFormation.received[0]["Status"] == "SUCCESS"
    assert current(deployment.database_url) == head


def test_a_secret_it_cannot_read_is_answered_not_left_waiting(emulated, response_url):
    emulator, deployment = emulated("happy")
    emulator.client("secretsmanager").delete_secret(
        SecretId=deployment.stack.outputs["DatabaseSecretArn"], ForceDeleteWithoutRecovery=True)
    response = emulator.client("lambda").invoke(
        FunctionName=deployment.stack.outputs["MigrateDatabaseFunctionName"],
        Payload=json.dumps({"RequestType": "Update", "ResponseURL": response_url,
                            "StackId": "s", "RequestId": "r",
                            "LogicalResourceId": "DatabaseSchema"}).encode())

    assert "FunctionError" in response
    (answer,) = CloudFormation.received
    assert answer["Status"] == "FAILED"
    assert "migration failed" in answer["Reason"] and "GetSecretValue" in answer["Reason"]
