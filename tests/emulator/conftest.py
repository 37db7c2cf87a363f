"""Fixtures for the emulator adaptation tests: one emulator session per test.

Time-dependent behaviour runs on the simulated clock; the default speed (simulated seconds per
real second) makes minutes of simulated time pass in milliseconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import boto3
import pytest

from traingrid_local.emulator.session import Emulator

FAST = 100_000.0

# One boto3 session for every client the tests create. A session parses each service's API
# model the first time it makes a client for it (a tenth of a second or more), and the
# emulator renews boto3's default session each time it starts; the clients are the same
# either way, and every botocore client talks to the emulator while it runs.
_TEST_SESSION = boto3.session.Session()


class TestEmulator(Emulator):
    """An emulator session whose ``client`` comes from the tests' long-lived boto3 session."""

    __test__ = False  # not a test class

    def client(self, service: str, region: str | None = None) -> Any:
        return _TEST_SESSION.client(service, region_name=region or self.region)


StartEmulator = Callable[..., Emulator]


@pytest.fixture
def start_emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[StartEmulator]:
    """``start_emulator(speed=..., faults=...)`` opens the test's session (closed after it)."""
    # No test boots an instance from moto's catalog of public AMIs, and loading it costs a
    # fifth of a second each time the EC2 backend is created or reset.
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with contextlib.ExitStack() as stack:

        def start(speed: float = FAST, faults: Iterable[str] = ()) -> Emulator:
            return stack.enter_context(TestEmulator(speed=speed, fault_names=set(faults)))

        yield start


@pytest.fixture
def emulator(start_emulator: StartEmulator) -> Emulator:
    """A fault-free session at high clock speed."""
    return start_emulator()
