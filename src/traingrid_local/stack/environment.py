"""TrainGrid as a whole, deployed into the emulator: the campaign database, the home stack and
one regional stack in every campaign region."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from traingrid.db.migrate import upgrade
from traingrid_local.emulator.deploy import Stack, deploy
from traingrid_local.emulator.session import Emulator
from traingrid_local.templates import REGIONAL_TEMPLATE

CAMPAIGN_REGIONS = ("us-east-1", "us-west-2", "eu-west-1", "eu-central-1")
DEMO_BUCKET = "traingrid-demo-data"
# The stack outputs that name its state machines, by pipeline.
STATE_MACHINES = {"training": "TrainingRunStateMachineArn",
                  "campaign": "CampaignFanoutStateMachineArn"}
MACHINE_NAMES = {"training": "TrainingRun", "campaign": "CampaignFanout"}


def state_machines(outputs: Mapping[str, str]) -> dict[str, str]:
    """The state machines' ARNs by pipeline (TrainingRun, CampaignFanout), from the stack's
    outputs."""
    return {MACHINE_NAMES[key]: outputs[output] for key, output in STATE_MACHINES.items()}


@dataclass
class Deployment:
    stack: Stack
    regional: dict[str, Stack]
    database_url: str
    workdir: Path | None = field(default=None, repr=False)

    def close(self) -> None:
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def deploy_traingrid(emulator: Emulator, *, database_url: str | None = None,
                     regions: tuple[str, ...] = CAMPAIGN_REGIONS,
                     parameters: dict[str, str] | None = None) -> Deployment:
    """Deploy everything; the database is a fresh SQLite file unless a URL is given (its
    schema is migrated to the latest revision first, as a deploy does)."""
    workdir = None
    if database_url is None:
        workdir = Path(tempfile.mkdtemp(prefix="traingrid-db-"))
        database_url = f"sqlite:///{workdir / 'traingrid.db'}"
    upgrade(database_url)
    secret = emulator.client("secretsmanager").create_secret(
        Name="traingrid/campaign-database", SecretString=json.dumps({"url": database_url}))
    # The emulator migrates above; CloudFormation custom resources need a reachable
    # response URL, which an in-process emulator has not. A SQLite file has no roles: the
    # functions' secret is the owner's.
    stack = deploy(emulator, parameters={"DataBucketName": DEMO_BUCKET,
                                         "DatabaseSecretArn": secret["ARN"],
                                         "DatabaseAppSecretArn": secret["ARN"],
                                         # What a database brought along needs: its range
                                         # (the emulator's VPC; SQLite is reached locally).
                                         "ExternalDatabaseCidr": "10.20.0.0/16",
                                         "ApplyMigrationsOnDeploy": "false",
                                         **(parameters or {})})
    regional = {
        region: deploy(emulator, "traingrid-regional", {"HomeRegion": emulator.region},
                       REGIONAL_TEMPLATE, region)
        for region in regions
    }
    from traingrid_local.stack import run_events

    run_events.observe(emulator)  # a user's rule: the runs' status events, to a queue
    return Deployment(stack, regional, database_url, workdir)
