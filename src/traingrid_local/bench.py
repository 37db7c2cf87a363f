"""``make bench``: TrainGrid's performance figures, measured (medians of fresh runs).

Writes ``bench/results.json`` and prints a table: the cold-start import time of each function's
handler module, the size of the runtime layer, planning a 10,000-dataset campaign on SQLite and
on PostgreSQL, and the wall time of the demo.
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from traingrid_local.emulator.deploy import stand_in_environment

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results.json"
POSTGRES_URL = os.environ.get("TRAINGRID_TEST_POSTGRES_URL",
                              "postgresql+psycopg://postgres@127.0.0.1:5432/test")
RUNS = 5
DATASETS = 10_000
IMPORT_HANDLER = (
    "import importlib.util, sys, time; t = time.perf_counter(); "
    "spec = importlib.util.spec_from_file_location('app', sys.argv[1]); "
    "spec.loader.exec_module(importlib.util.module_from_spec(spec)); "
    "print((time.perf_counter() - t) * 1000)"
)
console = Console()


def median_ms(measure: Callable[[], float], runs: int = RUNS) -> float:
    return round(statistics.median(measure() for _ in range(runs)), 1)


def cold_import_ms(function: Path) -> float:
    """Import time of the handler module in a fresh interpreter, as a Lambda cold start."""
    def once() -> float:
        result = subprocess.run(
            [sys.executable, "-c", IMPORT_HANDLER, str(function / "app.py")],
            capture_output=True, text=True, check=True, timeout=120,
            env={"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "us-east-1",
                 "POWERTOOLS_TRACE_DISABLED": "true"} | stand_in_environment(),
        )
        return float(result.stdout.strip())
    return median_ms(once)


def layer_bytes() -> int:
    package = ROOT / "layers" / "traingrid" / "python"
    return sum(p.stat().st_size for p in package.rglob("*.py"))


@contextmanager
def postgres_schema() -> Iterator[str | None]:
    """A scratch schema on the PostgreSQL server, or None when it is not reachable."""
    from sqlalchemy import create_engine, make_url, text
    from sqlalchemy.pool import NullPool

    schema = f"bench_{secrets.token_hex(4)}"
    engine = create_engine(POSTGRES_URL, poolclass=NullPool, connect_args={"connect_timeout": 3})
    try:
        with engine.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA {schema}"))
    except Exception as error:  # noqa: BLE001 - reported, the rest is still measured
        console.print(f"[yellow]PostgreSQL not measured[/]: {error.__class__.__name__}: {error}")
        yield None
        return
    url = make_url(POSTGRES_URL).update_query_dict(
        {"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        from traingrid.db.engine import dispose

        dispose(url)  # the planner's pooled connections, before the schema goes
        with engine.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        engine.dispose()


def seed_campaign(url: str, datasets: int) -> None:
    """Four regions and one campaign with ``datasets`` datasets across them, in bulk."""
    from sqlalchemy import insert

    from traingrid.db.engine import transaction
    from traingrid.db.migrate import upgrade
    from traingrid.db.models import Dataset
    from traingrid.db.repositories import CampaignRepository, RegionRepository
    from traingrid_local.campaign_demo import CAMPAIGN, INSTANCE_TYPE, REGION_PRICES

    upgrade(url)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    with transaction(url) as session:
        for code, (on_demand, spot, capacity) in REGION_PRICES.items():
            RegionRepository(session).upsert(
                code, enabled=True, transfer_usd_per_gb=0.02, artifact_bucket=f"art-{code}",
                prices={INSTANCE_TYPE: {"on_demand_usd_per_hour": on_demand,
                                        "spot_usd_per_hour": spot, "capacity_instances": capacity}})
        CampaignRepository(session).ensure(CAMPAIGN)
        regions = list(REGION_PRICES)
        session.execute(insert(Dataset), [{
            "campaign_id": CAMPAIGN, "region_code": regions[i % len(regions)],
            "s3_uri": f"s3://campaign-{regions[i % len(regions)]}/campaigns/{CAMPAIGN}/"
                      f"{regions[i % len(regions)]}/drive-{i:05d}/",
            "objects": 100, "bytes": 50 * 1024**3, "registered_at": start + timedelta(minutes=i),
        } for i in range(datasets)])


def plan_ms(url: str) -> float:
    from traingrid.campaigns.placement import plan_campaign
    from traingrid.db.engine import transaction
    from traingrid_local.campaign_demo import CAMPAIGN

    seed_campaign(url, DATASETS)

    def once() -> float:
        with transaction(url) as session:
            started = time.perf_counter()
            plans = plan_campaign(session, CAMPAIGN)
            elapsed = (time.perf_counter() - started) * 1000
        assert len(plans) == 4, plans
        return elapsed
    return median_ms(once)


def demo_wall_s() -> float:
    with tempfile.TemporaryDirectory() as workdir:
        started = time.perf_counter()
        subprocess.run([str(Path(sys.executable).with_name("traingrid")), "demo", "--json"],
                       cwd=workdir, check=True, capture_output=True, timeout=600)
        return round(time.perf_counter() - started, 1)


def measure() -> dict[str, Any]:
    functions = sorted(p for p in (ROOT / "functions").iterdir() if (p / "app.py").is_file())
    console.print(f"cold imports of {len(functions)} handlers ({RUNS} fresh processes each)…")
    results: dict[str, Any] = {
        "cold_import_ms": {f.name: cold_import_ms(f) for f in functions},
        "layer_bytes": layer_bytes(),
    }
    console.print(f"planning {DATASETS:,} datasets…")
    with tempfile.TemporaryDirectory() as workdir:
        sqlite = plan_ms(f"sqlite:///{workdir}/bench.db")
    with postgres_schema() as postgres_url:
        postgres = plan_ms(postgres_url) if postgres_url else None
    results["plan_10k_ms"] = {"sqlite": sqlite, "postgresql": postgres}
    console.print("running the demo…")
    results["demo_wall_s"] = demo_wall_s()
    return results


def show(results: dict[str, Any]) -> None:
    table = Table(title="TrainGrid bench (medians)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for name, ms in results["cold_import_ms"].items():
        table.add_row(f"cold import: {name}", f"{ms:.0f} ms")
    table.add_row("runtime layer (python sources)", f"{results['layer_bytes'] / 1024:.0f} KiB")
    for backend, ms in results["plan_10k_ms"].items():
        table.add_row(f"plan {DATASETS:,} datasets: {backend}",
                      "not measured" if ms is None else f"{ms:.0f} ms")
    table.add_row("make demo (both pipelines)", f"{results['demo_wall_s']:.1f} s")
    console.print(table)


def main() -> int:
    results = measure()
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    show(results)
    console.print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
