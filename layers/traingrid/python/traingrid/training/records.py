"""The TrainingRun step that writes the run's outcome to the campaign database. Only the
function that runs it loads SQLAlchemy."""

from __future__ import annotations

from typing import Any

from traingrid import clock
from traingrid.aws.secrets import connection_url
from traingrid.db.engine import transaction
from traingrid.db.repositories import TrainingRunRepository
from traingrid.observability import logger, metrics
from traingrid.settings import DatabaseSettings
from traingrid.training.outcome import as_dict, from_state


def record_run(event: dict[str, Any], settings: DatabaseSettings) -> dict[str, Any]:
    """Write the outcome ``event["status"]`` of the run whose state is ``event["state"]``."""
    now = clock.now()
    outcome = from_state(event["state"], event["status"], event["execution_arn"],
                         clock.parse(event.get("started_at")) or now, now)
    with transaction(connection_url(settings)) as session:
        recorded = as_dict(TrainingRunRepository(session).record(outcome))
    logger.info(f"run {recorded['name']} recorded {recorded['status']}",
                extra={"training_run": recorded})
    metrics.add_metric(name=f"TrainingRuns{outcome['status'].title()}", unit="Count", value=1)
    return recorded
