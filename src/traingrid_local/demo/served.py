"""``traingrid serve``: the TrainGrid API on 127.0.0.1 over the embedded emulator.

The emulator is deployed and seeded as the demo is: the sample ImageNet stand-in in the data
bucket, the regions and their prices, and the sample campaign with its data in four regions,
registered but not yet trained (so a requested fan-out or ``traingrid tick`` has new data to
train). Runs execute in the emulator on the simulated clock while the server answers. Besides
the API (throttled as the template's stage is: :mod:`traingrid_local.api.throttle`), the
server has routes of its own: ``POST /_emulator/tick`` fires scheduled jobs (``traingrid
tick``: EventBridge schedules never fire in the emulator), ``POST /_emulator/code`` takes a code
package into the data bucket (``traingrid package``: :mod:`traingrid_local.api.code_uploads`);
and the web console under ``/console`` (:mod:`traingrid_local.console`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from traingrid.clock import parse_iso
from traingrid_local.api.code_uploads import CODE_PATH, ServedCode
from traingrid_local.api.server import (
    API_FUNCTION,
    ApiServer,
    LocalRoute,
    RequestLog,
    lambda_invoker,
)
from traingrid_local.api.throttle import stage_bucket
from traingrid_local.console.app import Console
from traingrid_local.demo.runner import upload_sample_dataset
from traingrid_local.emulator.clock import DEFAULT_SPEED
from traingrid_local.emulator.session import Emulator
from traingrid_local.stack import sample_campaign, schedules
from traingrid_local.stack.environment import Deployment, deploy_traingrid, state_machines
from traingrid_local.stack.schedules import TICK_PATH


@dataclass
class Served:
    emulator: Emulator
    deployment: Deployment
    server: ApiServer

    @property
    def url(self) -> str:
        return self.server.url

    def tick(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Fire the scheduled jobs ``request["jobs"]`` (default: all) for the time
        ``request["at"]`` (default: when each schedule last came due)."""
        jobs = request.get("jobs") or list(schedules.SCHEDULED_JOBS)
        unknown = [j for j in jobs if j not in schedules.SCHEDULED_JOBS]
        if unknown:
            return 400, {"message": f"no scheduled job {', '.join(unknown)}; there are "
                                    f"{', '.join(schedules.SCHEDULED_JOBS)}"}
        try:
            at = parse_iso(request["at"], assume_utc=True) if request.get("at") else None
        except (ValueError, AttributeError, TypeError):
            return 400, {"message": f"at: {request.get('at')!r} is not an ISO 8601 time"}
        fired = {}
        for job in jobs:
            try:
                fired[job] = schedules.fire(self.emulator, self.deployment.stack, job, at)
            except schedules.JobFailed as error:
                return 500, {"message": str(error), "fired": fired}
        return 200, {"fired": fired}


def seed(emulator: Emulator, deployment: Deployment) -> None:
    upload_sample_dataset(emulator)
    sample_campaign.seed(deployment)
    sample_campaign.register_without_markers(emulator, deployment)


def console(emulator: Emulator, deployment: Deployment) -> Console:
    """The web console, its graphs drawn from the state machines as deployed."""
    arns = state_machines(deployment.stack.outputs)
    client = emulator.client("stepfunctions")

    def definition(pipeline: str) -> dict[str, Any]:
        found = client.describe_state_machine(stateMachineArn=arns[pipeline])
        return json.loads(found["definition"])

    return Console(definition, {"emulated": True})


@contextmanager
def served(port: int = 8000, speed: float = DEFAULT_SPEED, database_url: str | None = None,
           request_log: RequestLog | None = None,
           faults: frozenset[str] = frozenset(),
           training_seconds: Mapping[str, float] | None = None,
           throttled: bool = True) -> Iterator[Served]:
    """The deployed, seeded emulator (with the named ``faults``, as the demo's scenarios; its
    jobs training ``training_seconds``, as :class:`Emulator` takes them) and the API server
    over it, throttled as the stage is unless ``throttled`` is false, until the block ends."""
    with Emulator(speed=speed, fault_names=faults,
                  training_seconds=training_seconds) as emulator:
        deployment = deploy_traingrid(emulator, database_url=database_url)
        try:
            seed(emulator, deployment)
            invoke = lambda_invoker(emulator, deployment.stack.resources[API_FUNCTION])
            holder: dict[str, Served] = {}
            code = ServedCode(emulator.client("s3"), deployment.stack.outputs["DataBucketName"])
            local: dict[tuple[str, str], LocalRoute] = {
                ("POST", TICK_PATH): lambda body: holder["served"].tick(body or {}),
                ("POST", CODE_PATH): code}
            pages = console(emulator, deployment).answer
            with ApiServer(invoke, port, request_log, local_routes=local, pages=pages,
                           throttle=stage_bucket() if throttled else None) as server:
                holder["served"] = Served(emulator, deployment, server)
                yield holder["served"]
        finally:
            deployment.close()
