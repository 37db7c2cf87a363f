"""The janitor's calls: one that fails is reported and the pass goes on (the next pass tries
again)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from traingrid.errors import TrainGridError
from traingrid.observability import logger, metrics

T = TypeVar("T")
D = TypeVar("D")


class Attempts:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def report(self, what: str, error: TrainGridError) -> None:
        self.errors.append(f"{what}: {error.message}")
        logger.error(f"janitor: {what} failed", extra={"error": error.message})
        metrics.add_metric(name="JanitorErrors", unit="Count", value=1)

    def attempt(self, what: str, call: Callable[[], T], default: D) -> T | D:
        """Run one call; a failure is reported and ``default`` returned."""
        try:
            return call()
        except TrainGridError as error:
            self.report(what, error)
            return default
