"""What the runs of a period cost, grouped, read from the campaign database: the one answer
``GET /costs`` (a page of groups at a time) and ``traingrid costs --database-url`` (every
group) give.

A period has a group for each value of ``by``: each failed run of its own dataset is a group, so
thousands of runs are thousands of groups, more than one Lambda answer holds (6 MB). The API
answers at most MAX_PAGE_GROUPS a page, most expensive first, with the period's total and a
``next_token`` (``traingrid.opaque``) that goes on after the page's last group.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from traingrid import db, opaque
from traingrid.costs import prices
from traingrid.costs.summary import summarize
from traingrid.errors import RequestInvalid

# A group is at most about 4 KB of the function's answer: a dataset's key of 1,024 bytes in
# 4-byte characters, escaped as JSON and again in Lambda's envelope, and its sums. 500 of them
# are about 2 MB, a third of Lambda's 6 MB.
MAX_PAGE_GROUPS = 500
DEFAULT_PAGE_GROUPS = 100
# The most a costs token inflates to: its filters and a group's name (a dataset's URI).
TOKEN_BYTES = 8 * 1024


def period_costs(database_url: str, since: datetime | None, until: datetime | None,
                 by: str) -> dict[str, Any]:
    """``{since, until, by, currency, groups, total}``: TrainingRuns' and fan-outs' recorded
    receipts of the runs started in [since, until), summed per ``by`` value."""
    with db.transaction(database_url) as session:
        runs = (db.TrainingRunRepository(session).costs(since, until)
                + db.RunRepository(session).costs(since, until))
    rows = summarize(runs, by)
    return {"since": since.isoformat() if since else None,
            "until": until.isoformat() if until else None, "by": by,
            "currency": prices.CURRENCY, "groups": rows,
            "total": round(sum(row["total"] for row in rows), 6)}


def period_page(database_url: str, since: datetime | None, until: datetime | None, by: str,
                limit: int = DEFAULT_PAGE_GROUPS, next_token: str | None = None
                ) -> dict[str, Any]:
    """``period_costs`` a page at a time: up to ``limit`` groups after the one ``next_token``
    names (from the first without one), the period's total, and the ``next_token`` of the
    page after (None on the last)."""
    found = period_costs(database_url, since, until, by)
    filters = {"since": found["since"], "until": found["until"], "by": by}
    groups = found["groups"]
    if next_token is not None:
        after = _position(next_token, filters)
        groups = [g for g in groups if (-g["total"], g[by]) > after]
    page, rest = groups[:limit], groups[limit:]
    last = page[-1] if page and rest else None
    following = opaque.encode({**filters, "after": [last["total"], last[by]]}) if last else None
    return {**found, "groups": page, "next_token": following}


def _invalid(why: str) -> RequestInvalid:
    return RequestInvalid([{"pointer": "/next_token", "message": why}], "query")


def _position(token: str, filters: dict[str, Any]) -> tuple[float, str]:
    """The (negated total, name) a page ended at, for a token issued with ``filters``. The
    token is unsigned: it holds only a place in the list and the filters a caller sends
    anyway, and both are checked."""
    try:
        document = opaque.decode(token, TOKEN_BYTES)
    except ValueError as error:
        raise _invalid(f"is not a token this API returned ({error})") from None
    after = document.get("after") if isinstance(document, dict) else None
    if not (isinstance(after, list) and len(after) == 2
            and type(after[0]) in (int, float) and math.isfinite(after[0])
            and isinstance(after[1], str)):
        raise _invalid("is not a token this API returned (it names no group to go on after)")
    issued_for = {name: document.get(name) for name in filters}
    if issued_for != filters:
        shown = ", ".join(f"{k}={v}" for k, v in issued_for.items() if v is not None)
        raise _invalid(f"was returned for another period or grouping ({shown[:300]}): send "
                       "the same since, until and by with it, or leave it out to start again")
    return -after[0], after[1]
