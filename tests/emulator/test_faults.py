"""The fault plan: which named faults are on, and throttling of the first calls."""

from __future__ import annotations

import threading

import pytest

from traingrid_local.emulator import fault_injection
from traingrid_local.emulator.fault_injection import FAULTS, FaultPlan
from traingrid_local.emulator.session import Emulator


def test_unknown_fault_names_are_rejected_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown fault") as raised:
        FaultPlan(frozenset({"throttling", "disk-full", "cosmic-ray"}))

    message = str(raised.value)
    assert "'cosmic-ray'" in message and "'disk-full'" in message
    for known in FAULTS:
        assert known in message


def test_a_session_with_an_unknown_fault_does_not_start() -> None:
    with pytest.raises(ValueError, match="stuck-runnable"):
        Emulator(fault_names={"stuck-runable"})


def test_on_is_true_only_for_active_faults() -> None:
    plan = FaultPlan(frozenset({"export-failed", "stuck-runnable"}))

    assert plan.on("export-failed") and plan.on("stuck-runnable")
    assert not plan.on("fsx-create-failed")
    assert not FaultPlan().on("export-failed")


def test_throttling_hits_only_the_first_calls_of_each_operation() -> None:
    plan = FaultPlan(frozenset({"throttling"}))

    first = [plan.should_throttle("fsx:describe_file_systems") for _ in range(4)]
    other = [plan.should_throttle("batch:submitjob") for _ in range(3)]

    assert first == [True, True, False, False]
    assert other == [True, True, False]
    assert plan.throttled_calls() == 4


def test_the_number_of_throttled_calls_is_configurable() -> None:
    plan = FaultPlan(frozenset({"throttling"}), throttle_first_calls=3)

    assert [plan.should_throttle("op") for _ in range(5)] == [True, True, True, False, False]


@pytest.mark.parametrize("active", [frozenset(), frozenset(FAULTS) - {"throttling"}])
def test_nothing_is_throttled_without_the_throttling_fault(active: frozenset[str]) -> None:
    plan = FaultPlan(active)

    assert not any(plan.should_throttle("fsx:create_file_system") for _ in range(5))
    assert plan.throttled_calls() == 0


def test_concurrent_callers_share_the_first_calls() -> None:
    plan = FaultPlan(frozenset({"throttling"}))
    results: list[bool] = []
    lock = threading.Lock()

    def call() -> None:
        for _ in range(50):
            throttled = plan.should_throttle("batch:describejobs")
            with lock:
                results.append(throttled)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert len(results) == 400
    assert results.count(True) == 2


def test_a_session_installs_its_plan_and_removes_it_on_exit() -> None:
    with Emulator(fault_names={"stuck-runnable"}) as emulator:
        assert fault_injection.CURRENT is emulator.fault_plan
        assert fault_injection.CURRENT.on("stuck-runnable")

    assert not fault_injection.CURRENT.active


SAGEMAKER_FAULTS = ("sagemaker-capacity", "sagemaker-job-failed", "sagemaker-quota")


def test_the_sagemaker_faults_are_known_and_described() -> None:
    for name in SAGEMAKER_FAULTS:
        assert FAULTS[name].strip()
        assert "fault region" in FAULTS[name]

    assert FaultPlan(frozenset(SAGEMAKER_FAULTS)).active == frozenset(SAGEMAKER_FAULTS)


def test_the_fault_region_is_us_west_2_unless_chosen() -> None:
    assert FaultPlan().fault_region == "us-west-2"
    assert FaultPlan(frozenset({"sagemaker-quota"}), fault_region="eu-west-1").fault_region == (
        "eu-west-1")


@pytest.mark.parametrize("name", SAGEMAKER_FAULTS)
def test_a_regional_fault_is_on_only_in_the_fault_region(name: str) -> None:
    default = FaultPlan(frozenset({name}))
    chosen = FaultPlan(frozenset({name}), fault_region="eu-west-1")

    assert default.on_in_region(name, "us-west-2")
    assert not default.on_in_region(name, "us-east-1")
    assert chosen.on_in_region(name, "eu-west-1")
    assert not chosen.on_in_region(name, "us-west-2")
    assert not FaultPlan().on_in_region(name, "us-west-2")


def test_a_regional_fault_that_is_off_stays_off_in_the_fault_region() -> None:
    plan = FaultPlan(frozenset({"sagemaker-capacity"}))

    assert not plan.on_in_region("sagemaker-job-failed", "us-west-2")
    assert not plan.on_in_region("sagemaker-quota", plan.fault_region)
