"""CloudWatch's Metrics Insights queries and its alarms' evaluation of them, as its User
Guide states them (pure: ``emulator/metric_alarms.py`` runs them on moto's metrics).

- the query ("Query components and syntax in CloudWatch Metrics Insights"):
  ``SELECT FUNC(metric) FROM SCHEMA(namespace, key, ...) | namespace [WHERE key = 'value' [AND
  ...]] [GROUP BY key, ...] [ORDER BY FUNC() [ASC|DESC]] [LIMIT n]``: FUNC (AVG, COUNT, MAX,
  MIN, SUM) of every observation of the matching metrics in a period; SCHEMA matches the metrics
  whose dimensions are exactly its keys; at most 500 series are returned, the first by ORDER BY;
- a query that returns one series makes an alarm with one state; "for multi-time series
  queries, each returned time series becomes a contributor to the alarm" ("Create a CloudWatch
  alarm based on a Metrics Insights query"), which is only ever ALARM or OK, and SNS
  notifications are sent for the alarm and for each contributor ("Acting on alarm changes");
- an evaluation reads the last ``EvaluationPeriods`` periods: ``DatapointsToAlarm`` of them
  breaching is ALARM; a missing point counts as ``TreatMissingData`` says; actions run on a
  change of state only, "not performed again if the condition persists" ("Alarm actions").

Not modelled: the 10,000 metrics a query processes at most, and how ``ignore`` and ``missing``
weigh partly missing data (only a window with no data at all is treated apart).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

MAX_SERIES = 500  # a query's series at most
_IDENT = r'"[^"]+"|[^\s(),"\']+'
_QUERY = re.compile(
    r"^\s*SELECT\s+(?P<function>AVG|COUNT|MAX|MIN|SUM)\s*\(\s*(?P<metric>" + _IDENT + r")\s*\)"
    r"\s+FROM\s+(?:SCHEMA\s*\((?P<schema>[^)]*)\)|(?P<namespace>" + _IDENT + r"))"
    r"(?:\s+WHERE\s+(?P<where>.+?))?"
    r"(?:\s+GROUP\s+BY\s+(?P<group>.+?))?"
    r"(?:\s+ORDER\s+BY\s+(?P<order>AVG|COUNT|MAX|MIN|SUM)\s*\(\s*\)(?:\s+(?P<direction>ASC|DESC))?)?"
    r"(?:\s+LIMIT\s+(?P<limit>\d+))?\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_CONDITION = re.compile(r"^\s*(" + _IDENT + r")\s*=\s*'([^']*)'\s*$")
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanThreshold": operator.gt, "GreaterThanOrEqualToThreshold": operator.ge,
    "LessThanThreshold": operator.lt, "LessThanOrEqualToThreshold": operator.le,
}

Group = tuple[tuple[str, str], ...]  # a contributor's attributes: GROUP BY's keys and values


class QueryError(ValueError):
    """Not a Metrics Insights query the emulator evaluates."""


def _name(text: str) -> str:
    text = text.strip()
    return text[1:-1] if len(text) > 1 and text[0] == text[-1] == '"' else text


@dataclass(frozen=True)
class Query:
    function: str  # AVG, COUNT, MAX, MIN or SUM
    metric: str
    namespace: str
    schema: frozenset[str] | None  # SCHEMA's dimension keys: exactly these; None: any
    where: tuple[tuple[str, str], ...] = ()
    group_by: tuple[str, ...] = ()
    order: str | None = None  # ORDER BY's function
    descending: bool = False
    limit: int = MAX_SERIES

    def matches(self, namespace: str, name: str, dimensions: dict[str, str]) -> bool:
        return (namespace == self.namespace and name == self.metric
                and (self.schema is None or set(dimensions) == self.schema)
                and all(dimensions.get(k) == v for k, v in self.where)
                and all(k in dimensions for k in self.group_by))


def parse(expression: str) -> Query:
    found = _QUERY.match(expression)
    if not found:
        raise QueryError(f"not a Metrics Insights query the emulator evaluates: {expression}")
    if found["schema"] is not None:
        namespace, *keys = [_name(part) for part in found["schema"].split(",")]
        schema: frozenset[str] | None = frozenset(keys)
    else:
        namespace, schema = _name(found["namespace"]), None
    where = []
    for condition in re.split(r"\s+AND\s+", found["where"] or "", flags=re.IGNORECASE):
        if not condition.strip():
            continue
        pair = _CONDITION.match(condition)
        if not pair:
            raise QueryError(f"a WHERE condition the emulator does not evaluate: {condition}")
        where.append((_name(pair[1]), pair[2]))
    group = tuple(_name(k) for k in (found["group"] or "").split(",") if k.strip())
    return Query(function=found["function"].upper(), metric=_name(found["metric"]),
                 namespace=namespace, schema=schema, where=tuple(where), group_by=group,
                 order=found["order"].upper() if found["order"] else None,
                 descending=(found["direction"] or "ASC").upper() == "DESC",
                 limit=min(int(found["limit"] or MAX_SERIES), MAX_SERIES))


@dataclass(frozen=True)
class Observation:
    """A data point as CloudWatch holds it: one value, or a set of statistics."""

    namespace: str
    name: str
    dimensions: dict[str, str]
    at: float  # seconds since the epoch
    count: float
    total: float
    low: float
    high: float


@dataclass
class _Stats:
    count: float = 0.0
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf

    def add(self, o: Observation | _Stats) -> None:
        self.count += o.count
        self.total += o.total
        self.low, self.high = min(self.low, o.low), max(self.high, o.high)

    def value(self, function: str) -> float:
        return {"AVG": self.total / self.count if self.count else math.nan,
                "COUNT": self.count, "MAX": self.high, "MIN": self.low,
                "SUM": self.total}[function]


# A query's observations bucketed: group -> period's start (seconds) -> statistics.
Series = dict[Group, dict[int, _Stats]]


def bucket(query: Query, observations: Iterable[Observation], period: int) -> Series:
    """Every observation the query matches, by contributor and period."""
    found: Series = {}
    for o in observations:
        if not query.matches(o.namespace, o.name, o.dimensions):
            continue
        group = tuple((k, o.dimensions[k]) for k in query.group_by)
        start = int(o.at // period) * period
        found.setdefault(group, {}).setdefault(start, _Stats()).add(o)
    return found


def window(query: Query, series: Series, at: int, periods: int,
           period: int) -> dict[Group, list[float | None]]:
    """What the query returns for the ``periods`` periods before ``at``: each series' points,
    oldest first (None where it has none), for the series that have any, at most ``limit``."""
    starts = [at - period * k for k in range(periods, 0, -1)]
    found: dict[Group, list[float | None]] = {}
    whole: dict[Group, _Stats] = {}
    for group, by_start in series.items():
        present = [by_start.get(s) for s in starts]
        if not any(present):
            continue
        found[group] = [p.value(query.function) if p else None for p in present]
        whole[group] = _Stats()
        for p in present:
            if p:
                whole[group].add(p)
    ranked = list(found)
    if query.order:
        order = query.order
        ranked.sort(key=lambda g: whole[g].value(order), reverse=query.descending)
    return {g: found[g] for g in ranked[:query.limit]}


@dataclass(frozen=True)
class Rules:
    """An alarm's condition, as PutMetricAlarm sets it."""

    threshold: float
    comparison: str
    evaluation_periods: int
    datapoints_to_alarm: int
    treat_missing: str = "missing"

    def breaching(self, value: float | None) -> bool:
        if value is None:
            return self.treat_missing == "breaching"
        return _COMPARE[self.comparison](value, self.threshold)

    def state(self, points: list[float | None], current: str) -> str:
        """The state these points (oldest first) put the alarm in."""
        if all(p is None for p in points):
            if self.treat_missing == "ignore":
                return current
            if self.treat_missing == "missing":
                return "INSUFFICIENT_DATA"
        if self.treat_missing in ("ignore", "missing"):
            points = [p for p in points if p is not None]
        alarming = sum(self.breaching(p) for p in points)
        return "ALARM" if alarming >= self.datapoints_to_alarm else "OK"

    def reason(self, points: list[float | None]) -> str:
        shown = ", ".join("missing" if p is None else f"{p:g}" for p in points)
        return (f"{sum(self.breaching(p) for p in points)} out of the last {len(points)} "
                f"datapoints [{shown}] breached the threshold ({self.threshold:g})")


@dataclass(frozen=True)
class Change:
    at: datetime
    contributor: Group | None  # None: the alarm itself
    old: str
    new: str
    reason: str


@dataclass
class State:
    """An alarm's state and, for a query that groups, its contributors' (ALARM or OK)."""

    value: str = "INSUFFICIENT_DATA"
    contributors: dict[Group, tuple[str, str, datetime]] = field(default_factory=dict)


def step(state: State, rules: Rules, grouped: bool,
         returned: dict[Group, list[float | None]], at: datetime) -> list[Change]:
    """One evaluation at ``at`` of what the query returned; the changes it makes to ``state``."""
    changes: list[Change] = []
    if grouped:
        for group, points in returned.items():
            new = rules.state(points, "OK")
            new = new if new in ("ALARM", "OK") else "OK"
            old = state.contributors.get(group, ("OK", "", at))[0]
            if group not in state.contributors or old != new:
                state.contributors[group] = (new, rules.reason(points), at)
            if old != new:
                changes.append(Change(at, group, old, new, rules.reason(points)))
        for group in [g for g in state.contributors if g not in returned]:
            # A series with no data in the window is no contributor any more.
            old = state.contributors.pop(group)[0]
            if old == "ALARM":
                changes.append(Change(at, group, "ALARM", "OK", "no datapoints"))
        in_alarm = sum(s == "ALARM" for s, _, _ in state.contributors.values())
        new_value = "ALARM" if in_alarm else "OK"
        reason = f"{in_alarm} out of {len(returned)} time series evaluated to ALARM"
    else:
        empty: list[float | None] = [None] * rules.evaluation_periods
        (points,) = returned.values() if returned else (empty,)
        new_value, reason = rules.state(points, state.value), rules.reason(points)
    if new_value != state.value:
        changes.append(Change(at, None, state.value, new_value, reason))
        state.value = new_value
    return changes
