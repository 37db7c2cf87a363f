"""What the runs of a period cost, grouped, read from the campaign database: the one answer
``GET /costs`` and ``traingrid costs --database-url`` give."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from traingrid import db
from traingrid.costs import prices
from traingrid.costs.summary import summarize


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
