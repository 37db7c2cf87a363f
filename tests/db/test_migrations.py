"""The migration builds exactly the models' schema, on SQLite and PostgreSQL, and undoes it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import CheckConstraint, inspect, text

from traingrid.db import migrate
from traingrid.db.engine import dispose, engine_for
from traingrid.db.models import Base
from traingrid.vocabulary.campaign_fanout import RegionJobStatus

MODEL_TABLES = set(Base.metadata.tables)
ROOT = Path(__file__).resolve().parents[2]
HEAD = "0006"


def differences(url: str) -> list:
    with engine_for(url).connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return compare_metadata(context, Base.metadata)


def check_constraints(url: str) -> set[str | None]:
    with engine_for(url).connect() as connection:
        inspector = inspect(connection)
        return {c["name"] for table in MODEL_TABLES
                for c in inspector.get_check_constraints(table)}


def test_upgrade_creates_exactly_the_models(database_url):
    assert migrate.current(database_url) is None
    migrate.upgrade(database_url)
    assert migrate.current(database_url) == HEAD
    assert differences(database_url) == []
    # compare_metadata does not look at CHECK constraints: compare their names.
    assert check_constraints(database_url) == {
        c.name for table in Base.metadata.tables.values() for c in table.constraints
        if isinstance(c, CheckConstraint)
    } == {"ck_campaigns_placement", "ck_campaign_runs_status", "ck_campaign_runs_placement",
          "ck_training_runs_status", "ck_region_jobs_status"}


def test_the_region_job_status_check_is_the_enum():
    """The migration writes the statuses out; they stay RegionJobStatus's values."""
    from importlib import util

    path = ROOT / "schema" / "migrations" / "versions" / "0003_region_job_status_check.py"
    spec = util.spec_from_file_location("migration_0003", path)
    assert spec and spec.loader
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert set(module.REGION_JOB_STATUSES) == {s.value for s in RegionJobStatus}



def test_a_deploy_applies_the_newest_migration():
    """The template's SchemaRevision changes with each migration, so a deploy runs it."""
    newest = max(p.name.split("_", 1)[0]
                 for p in (ROOT / "schema" / "migrations" / "versions").glob("[0-9]*_*.py"))
    template = (ROOT / "stacks" / "database.yaml").read_text()
    assert newest == HEAD and f'SchemaRevision: "{HEAD}"' in template


def test_the_comparison_notices_drift(migrated_url):
    with engine_for(migrated_url).begin() as connection:
        connection.execute(text("ALTER TABLE regions ADD COLUMN notes TEXT"))
    assert [d[0] for d in differences(migrated_url)] == ["remove_column"]


def test_upgrade_is_idempotent_and_downgrade_drops_everything(migrated_url):
    migrate.upgrade(migrated_url)
    assert migrate.current(migrated_url) == HEAD
    migrate.downgrade(migrated_url, "base")
    assert migrate.current(migrated_url) is None
    with engine_for(migrated_url).connect() as connection:
        assert set(inspect(connection).get_table_names()) <= {"alembic_version"}


def test_a_deployed_copy_of_the_migrations_runs_from_the_environment(monkeypatch, tmp_path):
    source = migrate.migrations_folder()
    assert source == ROOT / "schema" / "migrations"
    deployed = tmp_path / "task" / "migrations"
    shutil.copytree(source, deployed, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("TRAINGRID_MIGRATIONS", str(deployed))
    url = f"sqlite:///{tmp_path / 'deployed.db'}"
    migrate.upgrade(url)
    assert migrate.migrations_folder() == deployed and migrate.current(url) == HEAD
    dispose(url)


def test_runtime_modules_import_neither_alembic_nor_local_code():
    probe = ("import sys, traingrid.db.engine, traingrid.db.repositories, "
             "traingrid.campaigns.placement; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('alembic', 'traingrid_local', 'tests', 'moto')))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"
