"""The console in front of a deployed stack (``traingrid console --stack``): its pages served
here on 127.0.0.1, every API request sent on to the stack's own API signed with SigV4 (the
CLI's client), and the graphs drawn from the stack's state machines as deployed. Each run's
page then links to the Step Functions console.

Since what it sends on is signed with the user's credentials, the server wants a token made at
start (the printed URL carries it; the browser trades it for a cookie) and sends on only the
API's declared routes (``schema/openapi.yaml``), each path checked for ``..`` and the like.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

from traingrid_local.api.bodies import json_answer
from traingrid_local.api.client import ApiClient, Signer, Unreachable, Unsendable, stack_outputs
from traingrid_local.api.server import ApiServer, Invoke, RequestLog, openapi_routes
from traingrid_local.console.app import Console
from traingrid_local.stack.environment import STATE_MACHINES, state_machines

# The request headers the API reads; the rest (cookies, the browser's own) stay here.
FORWARDED = ("content-type", "idempotency-key")


def forwarding(client: ApiClient) -> Invoke:
    """In the API function's place: each request, as its proxy event, sent on by ``client``."""

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        body = event.get("body")
        data = None if body is None else (
            base64.b64decode(body) if event.get("isBase64Encoded") else body.encode())
        headers = {name: value for name, value in (event.get("headers") or {}).items()
                   if name.lower() in FORWARDED}
        path = "/".join(quote(part, safe="") for part in event["path"].split("/"))
        try:
            answer = client.request(event["httpMethod"], path, data,
                                    event.get("queryStringParameters"), headers)
        except (Unreachable, Unsendable) as error:
            return json_answer(502, {"message": f"the stack's API did not answer: {error}"})
        return json_answer(answer.status, answer.body)

    return invoke


def stack_console(outputs: dict[str, str], stepfunctions: Any,
                  settings: dict[str, Any]) -> Console:
    """The console's pages, its graphs from ``DescribeStateMachine`` of the stack's machines."""
    arns = state_machines(outputs)

    def definition(pipeline: str) -> dict[str, Any]:
        found = stepfunctions.describe_state_machine(stateMachineArn=arns[pipeline])
        return json.loads(found["definition"])

    return Console(definition, {"emulated": False, **settings})


def stack_server(client: ApiClient, console: Console, port: int = 8000,
                 request_log: RequestLog | None = None) -> ApiServer:
    """The console's server: its pages, and the API's declared routes sent on by ``client``,
    for requests that carry its token."""
    return ApiServer(forwarding(client), port, request_log, routes=openapi_routes(),
                     pages=console.answer, token=True, declared_only=True)


@contextmanager
def remote(stack: str, region: str, port: int = 8000,
           request_log: RequestLog | None = None) -> Iterator[ApiServer]:
    """The console of a deployed stack on 127.0.0.1:``port``, until the block ends."""
    session, outputs = stack_outputs(stack, region, "ApiUrl", *STATE_MACHINES.values())
    client = ApiClient(outputs["ApiUrl"], Signer(region, session))
    console = stack_console(outputs, session.client("stepfunctions"),
                            {"api": outputs["ApiUrl"], "stack": stack, "region": region})
    with stack_server(client, console, port, request_log) as server:
        yield server
