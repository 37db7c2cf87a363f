"""``/campaigns``: list campaigns, start a campaign's fan-out.

These routes read the campaign database; SQLAlchemy is imported by the first of them to run,
not at cold start, so the run routes never pay for it.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import Router

from traingrid import clock
from traingrid.api.http import json_body, submitted
from traingrid.api.idempotency import Submissions, key_of
from traingrid.runs.submit import start
from traingrid.settings import ApiSettings


def router(settings: ApiSettings, submissions: Submissions) -> Router:
    routes = Router()

    @routes.post("/campaigns/<campaign_id>/runs")
    def submit_fanout(campaign_id: str) -> Response:
        from traingrid.campaigns.starts import fanout_submission

        event = routes.current_event
        key = key_of(event.headers)
        body = json_body(event.body)
        result = submissions.once(
            f"POST /campaigns/{campaign_id}/runs", key, body,
            lambda: start(fanout_submission(campaign_id, body, settings, clock.service_now(),
                                            key)),
            routes.lambda_context,
        )
        return submitted(result)

    @routes.get("/campaigns")
    def list_campaigns() -> dict[str, Any]:
        from traingrid.campaigns.database_steps import campaigns_overview

        return {"campaigns": campaigns_overview(settings.database)}

    return routes
