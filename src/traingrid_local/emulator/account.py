"""Adaptation (moto 5.2.5): the account's quotas and settings, as ``traingrid doctor`` reads them.

moto answers Service Quotas for VPC only, has no Lambda ``GetAccountSettings`` and no IAM
``SimulatePrincipalPolicy``, and names FSx's service-linked role ``AWSServiceRoleForfsx``.
Here the emulated account holds what a first deploy depends on (:data:`ACCOUNT`), set by tests:

- quotas by region: EC2's vCPU quotas of the GPU families, SageMaker's training-instance
  quotas (``ml.p3.16xlarge for training job usage``, and for spot training), Lambda's
  concurrent executions and FSx for Lustre's storage capacity (AWS's default applied),
  answered by ``GetServiceQuota``, ``GetAWSDefaultServiceQuota``, ``ListServiceQuotas`` and
  ``ListAWSDefaultServiceQuotas``. A fresh session has a new
  account's values (0 GPU instances of any kind, 10 concurrent executions);
- ``GetAccountSettings``: the concurrency limit from that quota, less what the region's
  functions reserve;
- the caller: an IAM user, ``arn:aws:iam::<account>:user/traingrid-emulator``;
- actions the caller may not call (:attr:`Account.denied`): refused with ``AccessDenied`` as
  AWS does, and answered ``implicitDeny`` by ``SimulatePrincipalPolicy`` (any other action is
  ``allowed``).

The emulator reads these quotas; it does not enforce them at deploy or run time (the
``sagemaker-quota`` fault does, for CreateTrainingJob), except FSx's storage quotas, which
CreateFileSystem enforces (``emulator/fsx_quota.py``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import moto.awslambda.urls
from moto.awslambda.responses import LambdaResponse
from moto.core.exceptions import ServiceException
from moto.core.responses import ActionResult, BaseResponse
from moto.core.utils import get_service_model
from moto.iam.models import SERVICE_NAME_CONVERSION
from moto.iam.responses import IamResponse
from moto.servicequotas.exceptions import NoSuchResource
from moto.servicequotas.models import ServiceQuotasBackend
from moto.servicequotas.responses import ServiceQuotasResponse
from moto.sts.models import STSBackend

from traingrid.campaigns.sagemaker_job import GPUS_PER_HOST
from traingrid.vocabulary.catalog import FSX_STORAGE_QUOTAS
from traingrid_local.emulator.patching import PATCHES


@dataclass(frozen=True)
class QuotaSpec:
    service: str  # Service Quotas' service code
    code: str
    name: str
    new_account: float  # what a new account has applied
    aws_default: float  # what Service Quotas lists as AWS's default
    unit: str = "None"


def _sagemaker_code(name: str) -> str:
    # SageMaker's quota codes follow no rule a client could derive (the doctor finds them by
    # name); these stand-ins are stable and shaped like AWS's.
    return "L-" + hashlib.sha256(name.encode()).hexdigest()[:8].upper()


LAMBDA_CONCURRENCY = "L-B99A9384"
QUOTAS: dict[tuple[str, str], QuotaSpec] = {
    (q.service, q.code): q for q in (
        QuotaSpec("ec2", "L-417A185B", "Running On-Demand P instances", 0, 0),
        QuotaSpec("ec2", "L-7212CCBC", "All P Spot Instance Requests", 0, 0),
        QuotaSpec("ec2", "L-DB2E81BA", "Running On-Demand G and VT instances", 0, 0),
        QuotaSpec("ec2", "L-3819A6DF", "All G and VT Spot Instance Requests", 0, 0),
        QuotaSpec("lambda", LAMBDA_CONCURRENCY, "Concurrent executions", 10, 1000),
        # FSx for Lustre's storage quotas: a new account has AWS's defaults (GiB).
        *(QuotaSpec("fsx", q.code, q.name, q.default_gib, q.default_gib)
          for q in FSX_STORAGE_QUOTAS.values()),
        *(QuotaSpec("sagemaker", _sagemaker_code(name), name, 0, 0)
          for instance_type in GPUS_PER_HOST
          for name in (f"{instance_type} for training job usage",
                       f"{instance_type} for spot training job usage")),
    )
}
SERVICE_NAMES = {"ec2": "Amazon Elastic Compute Cloud (Amazon EC2)", "lambda": "AWS Lambda",
                 "sagemaker": "Amazon SageMaker", "fsx": "Amazon FSx"}


@dataclass
class Account:
    """What the emulated account allows. ``set_quota`` by name or code, in given regions
    (all by default)."""

    applied: dict[tuple[str | None, str, str], float] = field(default_factory=dict)
    denied: set[str] = field(default_factory=set)  # "service:Action", as IAM spells it

    def reset(self) -> None:
        self.applied.clear()
        self.denied.clear()

    def spec(self, service: str, code_or_name: str) -> QuotaSpec:
        for spec in QUOTAS.values():
            if spec.service == service and code_or_name in (spec.code, spec.name):
                return spec
        raise KeyError(f"the emulated account has no {service} quota {code_or_name!r}")

    def set_quota(self, service: str, code_or_name: str, value: float,
                  regions: Iterable[str | None] = (None,)) -> None:
        spec = self.spec(service, code_or_name)
        for region in regions:
            self.applied[(region, service, spec.code)] = value

    def raise_fsx_storage(self, gib: float) -> None:
        """Every FSx for Lustre storage quota at ``gib``, in every region: an account whose
        increase was granted, for many runs' file systems at once."""
        for spec in QUOTAS.values():
            if spec.service == "fsx":
                self.set_quota("fsx", spec.code, gib)

    def value(self, region: str, spec: QuotaSpec) -> float:
        for key in ((region, spec.service, spec.code), (None, spec.service, spec.code)):
            if key in self.applied:
                return self.applied[key]
        return spec.new_account


ACCOUNT = Account()


def _quota(spec: QuotaSpec, region: str, account_id: str, value: float) -> dict[str, Any]:
    return {
        "ServiceCode": spec.service, "ServiceName": SERVICE_NAMES[spec.service],
        "QuotaArn": f"arn:aws:servicequotas:{region}:{account_id}:{spec.service}/{spec.code}",
        "QuotaCode": spec.code, "QuotaName": spec.name, "Value": value, "Unit": spec.unit,
        "Adjustable": True, "GlobalQuota": False,
    }


def _modelled(service: str) -> bool:
    return service in SERVICE_NAMES


def _get_service_quota(previous: Any) -> Any:
    def get_service_quota(self: ServiceQuotasBackend, service_code: str,
                          quota_code: str) -> dict[str, Any]:
        if not _modelled(service_code):
            return previous(self, service_code, quota_code)
        spec = QUOTAS.get((service_code, quota_code))
        if spec is None:
            raise NoSuchResource
        return _quota(spec, self.region_name, self.account_id,
                      ACCOUNT.value(self.region_name, spec))

    return get_service_quota


def _list_defaults(previous: Any) -> Any:
    def list_aws_default_service_quotas(self: ServiceQuotasBackend,
                                        service_code: str) -> list[dict[str, Any]]:
        if not _modelled(service_code):
            return previous(self, service_code)
        return [_quota(s, self.region_name, self.account_id, s.aws_default)
                for s in QUOTAS.values() if s.service == service_code]

    return list_aws_default_service_quotas


def _response_get_default(self: ServiceQuotasResponse) -> str:
    params = json.loads(self.body)
    service, code = str(params.get("ServiceCode")), str(params.get("QuotaCode"))
    found = [q for q in self.backend.list_aws_default_service_quotas(service)
             if q["QuotaCode"] == code]
    if not found:
        raise NoSuchResource
    return json.dumps({"Quota": found[0]})


PAGE = 100  # Service Quotas' largest page


def _response_list_applied(self: ServiceQuotasResponse) -> str:
    """Applied values, paged as AWS pages them (moto's own list is unpaged)."""
    params = json.loads(self.body)
    service = str(params.get("ServiceCode"))
    if not _modelled(service):
        raise NoSuchResource
    quotas = [_quota(s, self.region, self.current_account, ACCOUNT.value(self.region, s))
              for s in QUOTAS.values() if s.service == service]
    start = int(params.get("NextToken") or 0)
    size = min(int(params.get("MaxResults") or PAGE), PAGE)
    page: dict[str, Any] = {"Quotas": quotas[start:start + size]}
    if start + size < len(quotas):
        page["NextToken"] = str(start + size)
    return json.dumps(page)


def _get_account_settings(self: LambdaResponse) -> str:
    spec = QUOTAS[("lambda", LAMBDA_CONCURRENCY)]
    limit = int(ACCOUNT.value(self.region, spec))
    functions = list(self.backend.list_functions())
    reserved = sum(int(f.reserved_concurrency or 0) for f in functions)
    return json.dumps({
        "AccountLimit": {"TotalCodeSize": 80_530_636_800, "CodeSizeUnzipped": 262_144_000,
                         "CodeSizeZipped": 52_428_800, "ConcurrentExecutions": limit,
                         "UnreservedConcurrentExecutions": limit - reserved},
        "AccountUsage": {"TotalCodeSize": sum(f.code_size for f in functions),
                         "FunctionCount": len(functions)},
    })


def _caller_arn(account_id: str) -> str:
    return f"arn:aws:iam::{account_id}:user/traingrid-emulator"


def _caller_identity(previous: Any) -> Any:
    """An IAM user's ARN, as AWS gives it for an access key (moto's fallback,
    ``arn:aws:sts::…:user/moto``, is no ARN AWS returns, and the policy simulator takes none
    like it)."""

    def get_caller_identity(self: STSBackend, access_key_id: str,
                            region: str) -> tuple[str, str, str]:
        user_id, arn, account_id = previous(self, access_key_id, region)
        if arn.endswith(":user/moto"):
            arn = _caller_arn(account_id)
        return user_id, arn, account_id

    return get_caller_identity


def _simulate_principal_policy(self: IamResponse) -> ActionResult:
    actions = self._get_param("ActionNames", [])
    resources = self._get_param("ResourceArns", []) or ["*"]
    return ActionResult({"EvaluationResults": [
        {"EvalActionName": action, "EvalResourceName": resource,
         "EvalDecision": "implicitDeny" if action in ACCOUNT.denied else "allowed",
         "MatchedStatements": [], "MissingContextValues": []}
        for action in actions for resource in resources], "IsTruncated": False})


# How each protocol's services spell a refusal (EC2 its own way).
DENIED_CODES = {"ec2": "UnauthorizedOperation", "json": "AccessDeniedException",
                "rest-json": "AccessDeniedException"}


class Denied(ServiceException):
    """Defined here: moto looks a moto exception's error model up by its package."""


def _denying(previous: Any) -> Any:
    def call_action(self: BaseResponse) -> Any:
        if ACCOUNT.denied:
            scope = self.headers.get("Authorization", "").split("Credential=", 1)[-1]
            parts = scope.split(",", 1)[0].split("/")
            action = f"{parts[3] if len(parts) > 3 else '?'}:{self._get_action()}"
            if action in ACCOUNT.denied:
                protocol = get_service_model(self.boto3_service_name).protocol
                refusal = Denied(
                    DENIED_CODES.get(protocol, "AccessDenied"),
                    f"User: {_caller_arn(self.current_account)} is not authorized to perform: "
                    f"{action} (the emulated account denies it)")
                status, headers, body = self.serialized(ActionResult(refusal))
                return status, *self._enrich_response(headers, body)
        return previous(self)

    return call_action


def apply() -> None:
    # moto's serializer notes that Lambda's model declares no AccessDeniedException; AWS's
    # Lambda answers it all the same.
    PATCHES.ignore_warnings(r"Exception\(Denied\) with code")
    PATCHES.wrap(ServiceQuotasBackend, "get_service_quota", _get_service_quota)
    PATCHES.wrap(ServiceQuotasBackend, "list_aws_default_service_quotas", _list_defaults)
    # moto routes X-Amz-Target operations to same-named response methods.
    PATCHES.add(ServiceQuotasResponse, "get_aws_default_service_quota", _response_get_default)
    PATCHES.add(ServiceQuotasResponse, "list_service_quotas", _response_list_applied)
    PATCHES.update(moto.awslambda.urls.url_paths,
                   {r"{0}/(?P<api_version>[^/]+)/account-settings/?$": LambdaResponse.dispatch},
                   "Lambda's account-settings route")
    PATCHES.add(LambdaResponse, "get_account_settings", _get_account_settings)
    PATCHES.add(IamResponse, "simulate_principal_policy", _simulate_principal_policy)
    PATCHES.wrap(STSBackend, "get_caller_identity", _caller_identity)
    PATCHES.update(SERVICE_NAME_CONVERSION, {"fsx": "AmazonFSx"},
                   "service-linked role names (AWSServiceRoleForAmazonFSx)")
    PATCHES.wrap(BaseResponse, "call_action", _denying)
