"""For notebooks on the AWS Step Functions Data Science SDK (``pip install 'traingrid[notebook]'``).

- :func:`local_stack`: the embedded emulator, deployed and seeded as ``traingrid serve`` has it
  (its API and console too), to attach the SDK's ``Workflow`` to when there is no AWS account.
- :func:`training_input`: a TrainingRun request validated as the API validates it (every problem
  at once), and the execution name and input that start it.
- :class:`Graph`: a run's graph, drawn and coloured here from its execution history (what the
  console shows), displayed by Jupyter without any script or network.

Nothing here imports the SDK: a notebook brings it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from traingrid.naming import dataset_subject, execution_name
from traingrid.runs.submit import canonical
from traingrid.runs.timeline import by_state, visits
from traingrid.training.run_request import TrainingRunRequest
from traingrid.validation import parse
from traingrid_local.console.app import STATIC
from traingrid_local.console.graph import svg
from traingrid_local.demo.served import Served, served
from traingrid_local.stack.environment import state_machines

TRIGGER = {"source": "notebook"}


@dataclass
class LocalStack:
    """The emulated account: ``state_machines`` by pipeline, boto3 ``client``s of it, the API
    and console at ``url``."""

    served: Served

    @property
    def state_machines(self) -> dict[str, str]:
        return state_machines(self.served.deployment.stack.outputs)

    @property
    def url(self) -> str:
        return self.served.url

    def client(self, service: str) -> Any:
        return self.served.emulator.client(service)


@contextmanager
def local_stack(training_hours: float = 6.0, speed: float = 4000.0) -> Iterator[LocalStack]:
    """The emulator for the block; jobs train ``training_hours`` simulated hours, at ``speed``
    simulated seconds per second."""
    seconds = training_hours * 3600
    with served(port=0, speed=speed,
                training_seconds={"batch": seconds, "sagemaker": seconds}) as found:
        yield LocalStack(found)


def open_local_stack(**options: Any) -> tuple[LocalStack, ExitStack]:
    """:func:`local_stack` held open across cells; ``close()`` the second to stop it."""
    holder = ExitStack()
    return holder.enter_context(local_stack(**options)), holder


def training_input(body: Any, now: datetime | None = None) -> tuple[str, dict[str, Any]]:
    """(execution name, execution input) of a TrainingRun request; RequestInvalid, listing
    every problem, if it is not one."""
    request = parse(TrainingRunRequest, body)
    fields = request.model_dump(mode="json", exclude_none=True)
    name = request.name or execution_name(dataset_subject(request.bucket, request.prefix),
                                          now or datetime.now(UTC), TRIGGER["source"],
                                          canonical(fields))
    return name, {"request": fields, "trigger": TRIGGER}


class Graph:
    """A state machine's graph, coloured by what an execution did (from its history events,
    as ``Execution.list_events()`` gives them); Jupyter shows it as SVG."""

    def __init__(self, definition: dict[str, Any], events: list[dict[str, Any]] | None = None,
                 status: str = "RUNNING", title: str = "graph") -> None:
        seen = by_state(visits(events), status) if events is not None else None
        style = (STATIC / "console.css").read_text()
        self.svg = svg(definition, title, style, seen)
        self.by_state = seen or {}

    def _repr_svg_(self) -> str:
        return self.svg
