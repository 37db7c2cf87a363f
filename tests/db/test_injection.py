"""Text that looks like SQL is data: whatever a campaign, dataset or run is called, or says,
is stored and read back verbatim, on SQLite and on PostgreSQL, and every table stays."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import inspect, select

from tests.db.seed import add_regions
from traingrid.db.models import Campaign, CampaignRun, Dataset
from traingrid.db.repositories import CampaignRepository, DatasetRepository, RunRepository

INJECTIONS = ["'; DROP TABLE campaigns; --", "x' OR '1'='1", "\"; DELETE FROM datasets; --",
              "') ; TRUNCATE campaign_runs CASCADE; --", "%s %(x)s {0} $1 ?", "\\'; --",
              "Robert'); DROP TABLE students;--"]
# PostgreSQL text holds any character but NUL; the API never lets NUL reach it.
texts = st.one_of(st.sampled_from(INJECTIONS), st.text(max_size=60)).map(
    lambda t: t.replace("\x00", ""))
AT = datetime(2026, 11, 21, 13, 0, tzinfo=UTC)


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                  HealthCheck.too_slow])
@given(description=texts, campaign=st.sampled_from(INJECTIONS).map(lambda t: t[:64]),
       name=texts, cause=texts)
@example(description=INJECTIONS[0], campaign=INJECTIONS[0], name=INJECTIONS[1],
         cause=INJECTIONS[2])
def test_text_like_sql_is_stored_verbatim(session, description, campaign, name, cause):
    with session.begin_nested():
        tables = set(inspect(session.connection()).get_table_names())
        add_regions(session)
        CampaignRepository(session).ensure(campaign, description=description,
                                           hyperparameters={name: cause})
        uri = f"s3://bucket/campaigns/{name}/"
        DatasetRepository(session).register(campaign, "us-east-1", uri, 1, 2)
        arn = f"arn:aws:states:us-east-1:123456789012:execution:fanout:{len(name)}-{hash(name)}"
        runs = RunRepository(session)
        runs.start(campaign, name[:80], arn, "data-local", AT)
        runs.finish(arn, "FAILED", AT, cause)
        session.flush()
        session.expire_all()

        stored = session.get(Campaign, campaign)
        assert (stored.id, stored.description) == (campaign, description)
        assert stored.hyperparameters == {name: cause}
        assert session.scalars(select(Dataset.s3_uri).where(
            Dataset.campaign_id == campaign)).all() == [uri]
        run = session.scalars(select(CampaignRun).where(CampaignRun.execution_arn == arn)).one()
        assert (run.name, run.failure_cause) == (name[:80], cause)
        (overview,) = [c for c in CampaignRepository(session).overview() if c["id"] == campaign]
        assert overview["description"] == description
        assert set(inspect(session.connection()).get_table_names()) == tables
        session.rollback()  # the next example starts from the empty database again
