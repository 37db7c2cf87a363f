"""``/costs``: what the runs of a period cost, grouped, from the receipts the runs recorded, a
page of groups at a time.

It reads the campaign database, so that a deployed stack's costs (its database in private
subnets) are read through the API; SQLAlchemy and pydantic come with the first request.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.router import Router

from traingrid.api.http import query
from traingrid.aws.secrets import connection_url
from traingrid.errors import RequestInvalid
from traingrid.settings import ApiSettings


def router(settings: ApiSettings) -> Router:
    routes = Router()

    @routes.get("/costs")
    def period_costs() -> dict[str, Any]:
        from traingrid.api.queries import CostsQuery
        from traingrid.costs.period import period_page

        asked = query(CostsQuery, routes.current_event.query_string_parameters)
        if asked.since and asked.until and asked.since >= asked.until:
            raise RequestInvalid([{"pointer": "/since",
                                   "message": "since must be before until"}], source="query")
        return period_page(connection_url(settings.database), asked.since, asked.until,
                           asked.by, asked.limit, asked.next_token)

    return routes
