"""``scale.concurrent``: 100 TrainingRuns and 10 fan-outs started together through the API.

The served API (``traingrid serve``: real HTTP on 127.0.0.1, the deployed API function behind
it) over the emulator, on the simulated clock, with the campaign database on the PostgreSQL
server in a schema of its own. Every request is sent at the same moment from its own thread;
then every run is followed to its end. Written into ``results["scale"]["concurrent"]``:

- ``lost``: runs that did not end as expected: a request not answered 202, a run whose
  execution did not succeed, or whose outcome the database does not hold;
- ``leaked``: file systems, Batch jobs and SageMaker training jobs alive once every run ended
  (``stack.report``'s checks, the janitor's inventory as the emulator sees it);
- ``peak_db_connections``: the most connections the campaign database's server held for the
  stack at once (``pg_stat_activity``, polled throughout), one Lambda execution environment
  per concurrent invocation of a database function holding its own pool
  (``emulator/lambda_inprocess.py``); ``lambda_peak_concurrency``: those concurrencies;
- ``wall_s``: from the first request to the last run's end.

FSx for Lustre's storage quota is raised for the run (110 file systems and more at once need
more than AWS's default 100,800 GiB; ``emulator/fsx_quota.py``), as ``tests/integration/
test_load.py`` does. ``python -m traingrid_local.bench_scale_concurrent [RUNS FANOUTS]``
measures alone and prints the figure.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

RUNS = 100
FANOUTS = 10
# Fast enough that a simulated hour of training passes in a fraction of a real second; the
# clock stands still while any function works, so every state still sees its own time.
SPEED = 20_000.0
TRAINING_SECONDS = 3600
FSX_QUOTA_GIB = 10_000_000
POSTGRES_URL = os.environ.get("TRAINGRID_TEST_POSTGRES_URL",
                              "postgresql+psycopg://postgres@127.0.0.1:5432/test")
POLL_S = 0.02
TIMEOUT_S = 900.0
GOALS = {
    "concurrent runs, lost": (("scale", "concurrent", "lost"), 0, ""),
    "concurrent runs, leaked": (("scale", "concurrent", "leaked"), 0, ""),
}


@contextmanager
def postgres_database(label: str) -> Iterator[tuple[str, str] | None]:
    """(URL, application name) of a scratch schema on the PostgreSQL server whose every
    connection names itself ``application name``; None when the server is not reachable."""
    from sqlalchemy import create_engine, make_url, text
    from sqlalchemy.pool import NullPool

    name = f"{label}_{secrets.token_hex(4)}"
    engine = create_engine(POSTGRES_URL, poolclass=NullPool, connect_args={"connect_timeout": 3})
    try:
        with engine.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA {name}"))
    except Exception as error:  # noqa: BLE001 - reported; SQLite measures the rest
        print(f"PostgreSQL not reachable: {type(error).__name__}: {error}", file=sys.stderr)
        yield None
        return
    url = make_url(POSTGRES_URL).update_query_dict(
        {"options": f"-csearch_path={name}", "application_name": name}
    ).render_as_string(hide_password=False)
    try:
        yield url, name
    finally:
        from traingrid.db.engine import dispose

        dispose(url)
        with engine.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {name} CASCADE"))
        engine.dispose()


class ConnectionGauge:
    """The most connections named ``application`` the server held at once, polled every
    ``POLL_S`` on a connection of its own (not counted) until stopped."""

    def __init__(self, application: str) -> None:
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        self.application, self.peak, self.samples = application, 0, 0
        self._engine = create_engine(POSTGRES_URL, poolclass=NullPool)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="db-gauge", daemon=True)

    def now(self) -> int:
        from sqlalchemy import text

        with self._engine.connect() as connection:
            return int(connection.execute(text(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = :name"),
                {"name": self.application}).scalar_one())

    def _poll(self) -> None:
        from sqlalchemy import text

        with self._engine.connect() as connection:
            while not self._stop.is_set():
                count = connection.execute(text(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = :name"),
                    {"name": self.application}).scalar_one()
                connection.rollback()  # a fresh snapshot of the statistics each time
                self.peak, self.samples = max(self.peak, int(count)), self.samples + 1
                self._stop.wait(POLL_S)

    def __enter__(self) -> ConnectionGauge:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._engine.dispose()


def requests(runs: int, fanouts: int, label: str) -> list[tuple[str, dict[str, Any]]]:
    """(path, body) of every request: ``runs`` TrainingRuns on the sample dataset (1 to 4
    nodes), ``fanouts`` fan-outs of the sample campaign, each named."""
    from traingrid_local.demo.runner import DATASET_PREFIX
    from traingrid_local.stack.environment import DEMO_BUCKET
    from traingrid_local.stack.sample_campaign import CAMPAIGN

    dataset = f"s3://{DEMO_BUCKET}/{DATASET_PREFIX}"
    return ([("/runs", {"dataset": dataset, "name": f"{label}-run-{i:03d}", "nodes": 1 + i % 4})
             for i in range(runs)]
            + [(f"/campaigns/{CAMPAIGN}/runs", {"name": f"{label}-fanout-{i:02d}",
                                                "instance_count": 5})
               for i in range(fanouts)])


def send_together(url: str, sent: list[tuple[str, dict[str, Any]]]) -> list[tuple[int, Any]]:
    """Each request from its own thread (its own connection), released at the same moment;
    (status, body) of each answer, in order."""
    from traingrid_local.api.client import ApiClient

    gate = threading.Barrier(len(sent))

    def send(request: tuple[str, dict[str, Any]]) -> tuple[int, Any]:
        client = ApiClient(url, timeout=120)
        gate.wait(60)
        answer = client.request("POST", request[0], request[1])
        return answer.status, answer.body

    with ThreadPoolExecutor(max_workers=len(sent)) as pool:
        return list(pool.map(send, sent))


def recorded(database_url: str, executions: list[dict[str, Any]], fanout_machine: str
             ) -> set[str]:
    """The executions that succeeded and whose success the campaign database holds: a
    TrainingRun's record, a fan-out's run."""
    from traingrid.db.engine import transaction
    from traingrid.db.repositories import RunRepository, TrainingRunRepository

    found = set()
    with transaction(database_url) as session:
        for execution in executions:
            if execution["status"] != "SUCCEEDED":
                continue
            arn = execution["executionArn"]
            if execution["stateMachineArn"] == fanout_machine:
                row: Any = RunRepository(session).get(arn)
            else:
                row = TrainingRunRepository(session).get(arn)
            if row is not None and getattr(row, "status", None) == "SUCCEEDED":
                found.add(arn)
    return found


def leaked(emulator: Any) -> list[dict[str, Any]]:
    """What is alive with no running execution to own it: file systems (but those kept on
    purpose until their expiry), Batch jobs, SageMaker training jobs in every region."""
    from traingrid_local.stack import report, sample_campaign

    executions = report.Executions(emulator)
    file_systems, _retained = report.file_systems(emulator, executions)
    regions = sorted(set(sample_campaign.REGION_PRICES) | {emulator.region})
    return (file_systems + report.live_jobs(emulator, executions)
            + report.live_training_jobs(emulator, regions, executions))


def measure(runs: int = RUNS, fanouts: int = FANOUTS,
            timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """The figure: every request sent at once, every run followed to its end."""
    import tempfile

    from traingrid.db.engine import dispose
    from traingrid_local.demo.runner import wait_for_runs
    from traingrid_local.demo.served import served
    from traingrid_local.emulator import lambda_environments
    from traingrid_local.emulator.account import ACCOUNT

    label = "scale"
    with tempfile.TemporaryDirectory() as workdir, postgres_database(label) as postgres:
        database_url = postgres[0] if postgres else f"sqlite:///{workdir}/campaigns.db"
        with served(port=0, speed=SPEED, database_url=database_url,
                    training_seconds={"batch": TRAINING_SECONDS,
                                      "sagemaker": TRAINING_SECONDS}) as api:
            ACCOUNT.raise_fsx_storage(FSX_QUOTA_GIB)
            machines = [api.deployment.stack.outputs[key] for key in (
                "TrainingRunStateMachineArn", "CampaignFanoutStateMachineArn")]
            # The seeding's pooled connection goes: what the server holds from here on is
            # the functions' (one pool per execution environment), and the gauge's own.
            dispose(database_url)
            gauge = ConnectionGauge(postgres[1]) if postgres else None
            started = time.monotonic()
            with gauge or _nothing():
                answers = send_together(api.url, requests(runs, fanouts, label))
                arns = wait_for_runs(api.emulator, machines, timeout_s, None)
            wall_s = time.monotonic() - started
            sfn = api.emulator.client("stepfunctions")
            executions = [sfn.describe_execution(executionArn=arn) for arn in arns]
            held = recorded(database_url, executions, machines[1])
            refused = [(status, body) for status, body in answers if status != 202]
            failed = {e["name"]: (e["status"], e.get("error"), e.get("cause"))
                      for e in executions if e["executionArn"] not in held}
            left = leaked(api.emulator)
            concurrency = lambda_environments.peak_concurrency()
            database_environments = lambda_environments.with_database()
    expected = runs + fanouts
    lost = expected - len(held)
    return {
        "runs": runs, "fanouts": fanouts, "lost": lost, "leaked": len(left),
        "wall_s": round(wall_s, 1),
        "peak_db_connections": gauge.peak if gauge else None,
        "database_environments": database_environments,
        "lambda_peak_concurrency": concurrency,
        "refused": refused[:5], "refused_count": len(refused),
        "failed": dict(list(failed.items())[:5]), "failed_count": len(failed),
        "leaked_resources": left[:5],
        "database": "postgresql" if postgres else "sqlite",
    }


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def goals(results: dict[str, Any]) -> dict[str, Any]:
    """The goals of ``scale.concurrent`` that were measured: nothing lost, nothing leaked."""
    met: dict[str, Any] = {}
    for name, (path, bound, unit) in GOALS.items():
        value: Any = results
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            met[name] = {"value": value, "at_most": bound, "unit": unit, "met": value <= bound}
    return met


def add_rows(table: Any, results: dict[str, Any]) -> None:
    """This figure's row of the bench's table (a ``rich`` Table), if it was measured."""
    figure = results.get("scale", {}).get("concurrent")
    if figure:
        table.add_row(f"{figure['runs']} TrainingRuns + {figure['fanouts']} fan-outs at once",
                      f"{figure['lost']} lost, {figure['leaked']} leaked, {figure['wall_s']} s "
                      f"wall, peak {figure['peak_db_connections']} database connections")


def main(argv: list[str] | None = None) -> int:
    parts = sys.argv[1:] if argv is None else argv
    runs, fanouts = (int(parts[0]), int(parts[1])) if len(parts) == 2 else (RUNS, FANOUTS)
    results: dict[str, Any] = {"scale": {"concurrent": measure(runs, fanouts)}}
    print(json.dumps(results | {"goals": goals(results)}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
