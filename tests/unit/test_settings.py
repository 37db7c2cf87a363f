"""Settings come from the function's environment, strictly, with every problem said at once."""

from __future__ import annotations

import pytest

from traingrid.settings import (
    CompletionSettings,
    JanitorSettings,
    LaunchSettings,
    Settings,
    SettingsInvalid,
)


def test_variables_are_read_as_their_fields_types_with_defaults():
    read = CompletionSettings.from_env({"JOB_TOKENS_TABLE": "tokens",
                                        "JOB_EVENT_FALLBACK_SECONDS": "900"})
    assert (read.job_tokens_table, read.fallback_s) == ("tokens", 900)
    assert CompletionSettings.from_env({"JOB_TOKENS_TABLE": "t"}).fallback_s == 24 * 3600
    launch = LaunchSettings.from_env({"SAGEMAKER_ROLE_ARN": "r",
                                      "TRAINING_IMAGE_REPOSITORY": "i", "MANAGED_SPOT": "true"})
    assert launch.managed_spot is True


def test_an_empty_optional_variable_is_none():
    janitor = JanitorSettings.from_env({
        "DATABASE_SECRET_ARN": "s", "DATABASE_HOST": "", "DATA_BUCKET": "b",
        "TRAINING_RUN_STATE_MACHINE_ARN": "t", "CAMPAIGN_FANOUT_STATE_MACHINE_ARN": "c",
        "TRAINING_JOB_QUEUE": "q"})
    assert janitor.database_host is None and janitor.state_machines == ("t", "c")


def test_every_problem_is_said_at_once():
    with pytest.raises(SettingsInvalid) as raised:
        Settings.from_env({"RETENTION_DAYS": "365"})
    assert str(raised.value) == ("Settings: DATA_BUCKET is not set; RETENTION_DAYS must be "
                                 "from 1 to 90, not 365")
    with pytest.raises(SettingsInvalid) as raised:
        LaunchSettings.from_env({"SAGEMAKER_ROLE_ARN": "r", "MANAGED_SPOT": "maybe"})
    assert str(raised.value) == ("LaunchSettings: TRAINING_IMAGE_REPOSITORY is not set; "
                                 "MANAGED_SPOT must be true or false, not 'maybe'")
    with pytest.raises(SettingsInvalid, match="JOB_EVENT_FALLBACK_SECONDS must be an integer"):
        CompletionSettings.from_env({"JOB_TOKENS_TABLE": "t",
                                     "JOB_EVENT_FALLBACK_SECONDS": "soon"})


def test_settings_are_frozen():
    read = Settings.from_env({"DATA_BUCKET": "b"})
    with pytest.raises(AttributeError):
        read.data_bucket = "other"  # type: ignore[misc]
