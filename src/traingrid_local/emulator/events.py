"""Adaptation (moto 5.2.5): EventBridge rules deliver to Lambda and Step Functions targets.

moto's S3 sends "Object Created" events to EventBridge, but its rules deliver only to SQS,
logs, archives and buses; a Lambda or Step Functions target raises and silently stops the
delivery to every later rule. Here those two target types are delivered (Lambda invoked
asynchronously in-process, Step Functions started), each target on its own so one failure
cannot hide another, with ``Input``/``InputPath`` honoured. An event forwarded to an event bus
in another region keeps its envelope (``region``, ``id``, ``time``), as AWS keeps it; moto
re-creates it in the target region. S3 events are also given the shape AWS sends: one ``id``,
an ISO ``time`` (on the simulated clock, like every other time in the emulator) and
``detail.object.etag``. A schedule rule (no event pattern) receives no events at all: moto
matches an empty pattern to every event, AWS sends such a rule only its schedule's events
(which never fire in the emulator; ``traingrid tick`` fires them). :func:`emit` publishes the
events AWS services send on their own (Batch job state changes).
"""

from __future__ import annotations

import copy
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

from moto.awslambda.utils import get_backend as lambda_backend
from moto.events.models import Rule, events_backends
from moto.events.utils import EventMessageType
from moto.stepfunctions.responses import get_backend as stepfunctions_backend
from moto.utilities.arns import parse_arn

from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.patching import PATCHES

log = logging.getLogger(__name__)


def as_aws_sends_it(event: EventMessageType) -> EventMessageType:
    original, event = event, copy.deepcopy(event)
    if isinstance(sent := event.get("time"), int | float):
        moment = CLOCK.simulated_at(sent)
        event["time"] = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        # One id per event, the same at every rule it reaches.
        identity = json.dumps(original, sort_keys=True, default=str)
        event["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, identity))
    obj = event.get("detail", {}).get("object", {})
    if "eTag" in obj:
        obj["etag"] = obj.pop("eTag")
    return event


def _payload(target: dict[str, Any], event: EventMessageType) -> Any:
    if "Input" in target:
        return json.loads(target["Input"])
    if "InputPath" in target:
        from jsonpath_ng.ext import parse

        found = parse(target["InputPath"]).find(event)
        return found[0].value if found else None
    return event


def _is_bus(target: dict[str, Any]) -> bool:
    arn = parse_arn(target["Arn"])
    return arn.service == "events" and arn.resource_type == "event-bus"


def deliver(target: dict[str, Any], event: EventMessageType) -> None:
    arn = parse_arn(target["Arn"])
    if _is_bus(target):
        bus = events_backends[arn.account][arn.region].event_buses.get(arn.resource_id)
        for rule in list(bus.rules.values()) if bus else []:
            rule.send_to_targets(event)
        return
    body = json.dumps(_payload(target, event))
    if arn.service == "lambda":
        lambda_backend(arn.account, arn.region).invoke(
            target["Arn"], None, body, {"x-amz-invocation-type": "Event"}, {}
        )
    else:
        stepfunctions_backend(arn.account, arn.region).start_execution(
            target["Arn"], name=str(uuid.uuid4()), execution_input=body
        )


def _send_to_targets(previous: Callable[..., None]) -> Callable[..., None]:
    def send_to_targets(self: Rule, original_event: EventMessageType,
                        transform_input: bool = True) -> None:
        if self.scheduled_expression and not self.event_pattern.dump():
            return  # a schedule rule: only its schedule sends it events
        event = as_aws_sends_it(original_event)
        if not self.event_pattern.matches_event(event):
            return
        others = []
        for target in self.targets:
            if parse_arn(target["Arn"]).service not in ("lambda", "states") and not _is_bus(target):
                others.append(target)
                continue
            try:
                deliver(target, event)
            except Exception:  # noqa: BLE001 - delivery is asynchronous on AWS too
                log.exception("EventBridge delivery to %s failed", target["Arn"])
        if others:
            # moto's own deliveries (SQS, logs, …) expect moto's event shape (a numeric time).
            rest = copy.copy(self)
            rest.targets = others
            previous(rest, original_event, transform_input)

    return send_to_targets


def emit(account: str, region: str, source: str, detail_type: str, detail: dict[str, Any],
         resources: list[str]) -> int:
    """Publish a service's own event (e.g. ``aws.batch``) on the account's default bus, the way
    AWS services do (PutEvents refuses ``aws.*`` sources); returns how many rules matched."""
    event: EventMessageType = {
        "version": "0", "id": str(uuid.uuid4()), "detail-type": detail_type,
        "source": source, "account": account,
        "time": CLOCK.now().strftime("%Y-%m-%dT%H:%M:%SZ"), "region": region,
        "resources": resources, "detail": detail,
    }
    bus = events_backends[account][region].event_buses.get("default")
    matched = 0
    for rule in list(bus.rules.values()) if bus else []:
        if rule.state == "ENABLED" and rule.event_pattern.matches_event(event):
            matched += 1
            rule.send_to_targets(event)
    return matched


def apply() -> None:
    PATCHES.wrap(Rule, "send_to_targets", _send_to_targets)
