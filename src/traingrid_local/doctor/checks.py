"""The checks: each reads the account and says, one line per problem, what to do (quotas, FSx
and its storage quota, the images, the network (``network``), Lambda's concurrency), and
``run_checks`` runs them all.

A blocker stops the stack from deploying or its runs from starting; a warning is worth
knowing. Every AWS call goes through ``findings.Aws``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator

from traingrid.vocabulary.catalog import (
    FSX_DEFAULT_STORAGE_QUOTA_GIB,
    MIN_CAPACITY_GIB,
    InstanceType,
    fsx_storage_quota,
)
from traingrid_local.doctor.findings import BLOCKER, OK, WARNING, Aws, AwsError, Finding
from traingrid_local.doctor.needs import Image, Needs
from traingrid_local.doctor.network import network

# EC2's vCPU quotas by instance family: (on-demand, spot) quota codes.
EC2_FAMILY_QUOTAS = {
    "p": ("L-417A185B", "L-7212CCBC"),  # Running On-Demand P instances; All P Spot Requests
    "g": ("L-DB2E81BA", "L-3819A6DF"),  # Running On-Demand G and VT; All G and VT Spot
}
LAMBDA_CONCURRENCY = "L-B99A9384"  # Lambda's Concurrent executions
# Lambda keeps this much of the account's concurrency unreserved (all of it below 100).
LAMBDA_MIN_UNRESERVED = 100
FSX_ROLE_PATH = "/aws-service-role/fsx.amazonaws.com/"
S3_DATA_REPOSITORY = "s3.data-source.lustre.fsx.amazonaws.com"


Check = Callable[[Needs, Aws], Iterator[Finding]]


def _increase(service: str, code: str, value: float, region: str) -> str:
    return (f"aws service-quotas request-service-quota-increase --service-code {service} "
            f"--quota-code {code} --desired-value {value:g} --region {region}")


def quota_value(aws: Aws, service: str, code: str, region: str) -> float | None:
    """The applied value; AWS's default where none is applied; None if there is no such
    quota."""
    for operation in ("get_service_quota", "get_aws_default_service_quota"):
        try:
            return float(aws.call("service-quotas", operation, region, ServiceCode=service,
                                  QuotaCode=code)["Quota"]["Value"])
        except AwsError as error:
            if error.code != "NoSuchResourceException":
                raise
    return None


def quotas_by_name(aws: Aws, service: str, region: str) -> dict[str, tuple[str, float]]:
    """Name → (code, value) of a service's quotas: applied values over AWS's defaults."""
    found = {q["QuotaName"]: (q["QuotaCode"], float(q["Value"])) for q in aws.pages(
        "service-quotas", "list_aws_default_service_quotas", "Quotas", region,
        ServiceCode=service)}
    found |= {q["QuotaName"]: (q["QuotaCode"], float(q["Value"])) for q in aws.pages(
        "service-quotas", "list_service_quotas", "Quotas", region, ServiceCode=service)}
    return found


def ec2_quota(needs: Needs, aws: Aws) -> Iterator[Finding]:
    """vCPU quota of each instance family the compute environment may launch, against
    nodes × the vCPUs of each type."""
    name = "ec2-quota"
    unknown = [t for t in needs.instance_types
               if t not in {i.name for i in needs.known_instance_types}]
    if unknown:
        yield Finding(name, WARNING, f"{', '.join(unknown)}: not in TrainGrid's catalog; "
                                     "their quota is not checked")
    families: dict[str, list[InstanceType]] = defaultdict(list)
    for instance in needs.known_instance_types:
        families[re.match(r"[a-z]+", instance.name)[0][0]].append(instance)  # type: ignore[index]
    kind = "spot" if needs.compute_spot else "on-demand"
    for family, types in sorted(families.items()):
        code = EC2_FAMILY_QUOTAS[family][1 if needs.compute_spot else 0]
        quota = quota_value(aws, "ec2", code, needs.region)
        if quota is None:
            yield Finding(name, WARNING, f"EC2 has no quota {code} in {needs.region}")
            continue
        need = {t.name: needs.nodes * t.vcpus for t in types}
        short = [t for t, n in need.items() if n > quota]
        most = max(need.values())
        label = f"{family.upper()} instances ({kind}, {code}): {quota:g} vCPUs in {needs.region}"
        if not short:
            yield Finding(name, OK, f"{label} ≥ {needs.nodes} nodes × "
                                    f"{max(types, key=lambda t: t.vcpus).name} ({most})")
        elif len(short) == len(need):
            least = min(need, key=need.__getitem__)
            yield Finding(name, BLOCKER, (
                f"{label}; {needs.nodes} nodes × {least} need {need[least]}: no run of "
                f"{needs.nodes} nodes can start. Ask for {most}: "
                + _increase("ec2", code, most, needs.region)))
        else:
            yield Finding(name, WARNING, (
                f"{label}; {needs.nodes} nodes of {', '.join(short)} need {most}: those runs "
                f"wait for capacity. Ask for {most}: " + _increase("ec2", code, most,
                                                                   needs.region)))
    need_least = min((needs.nodes * t.vcpus for t in needs.known_instance_types), default=0)
    if needs.max_vcpus is not None and need_least > needs.max_vcpus:
        yield Finding(name, BLOCKER, (
            f"MaxVcpus is {needs.max_vcpus}; {needs.nodes} nodes need at least {need_least}: "
            f"deploy with MaxVcpus={need_least} or more"))


def sagemaker_quota(needs: Needs, aws: Aws) -> Iterator[Finding]:
    """Each campaign region's quota for the campaign's instance type (and for spot training
    with ManagedSpot) against its instance count."""
    name = "sagemaker-quota"
    wanted = [f"{needs.campaign_instance_type} for training job usage"]
    if needs.managed_spot:
        wanted.append(f"{needs.campaign_instance_type} for spot training job usage")
    count = needs.campaign_instance_count
    short: list[tuple[str, str, str, float]] = []
    fits = []
    for region in needs.campaign_regions:
        quotas = quotas_by_name(aws, "sagemaker", region)
        missing = [q for q in wanted if q not in quotas]
        if missing:
            yield Finding(name, WARNING, f"{region}: SageMaker has no quota "
                                         f"{' or '.join(map(repr, missing))}; is "
                                         f"{needs.campaign_instance_type} offered there?")
            continue
        lacking = [(region, q, *quotas[q]) for q in wanted if quotas[q][1] < count]
        short += lacking
        if not lacking:
            fits.append(region)
    for region, quota, code, value in short:
        status = WARNING if fits else BLOCKER
        consequence = (f"its data trains in {', '.join(fits)} instead, staged there" if fits
                       else "no campaign job can start")
        yield Finding(name, status, (
            f"{region}: '{quota}' is {value:g}; a campaign job needs {count}: {consequence}. "
            f"Ask for {count}: " + _increase("sagemaker", code, count, region)))
    if fits:
        yield Finding(name, OK, f"'{wanted[0]}' ≥ {count} in {', '.join(fits)}")


def fsx(needs: Needs, aws: Aws) -> Iterator[Finding]:
    """FSx's service-linked role: the first file system creates it as the caller (the
    stack's file-system creator), which needs ``iam:CreateServiceLinkedRole`` for
    fsx.amazonaws.com; the S3 data repository's role is made the same way."""
    name = "fsx"
    aws.call("fsx", "describe_file_systems", MaxResults=1)
    if not needs.grants_service_linked_role(S3_DATA_REPOSITORY):
        yield Finding(name, BLOCKER, (
            "the stack's roles may not create the role FSx reads the data bucket through (a "
            f"service-linked role of {S3_DATA_REPOSITORY}, one per file system): every run's "
            "file system would fail. Deploy the current template.yaml"))
    roles = list(aws.pages("iam", "list_roles", "Roles", PathPrefix=FSX_ROLE_PATH))
    if roles:
        yield Finding(name, OK, f"FSx's service-linked role {roles[0]['RoleName']} exists")
        return
    create = "aws iam create-service-linked-role --aws-service-name fsx.amazonaws.com"
    if needs.grants_service_linked_role("fsx.amazonaws.com"):
        yield Finding(name, OK, (
            "FSx's service-linked role does not exist yet: the first file system creates it "
            f"(the stack's roles may); to have it now: {create}"))
        return
    allowed = _caller_may("iam:CreateServiceLinkedRole", aws)
    who = {True: "you may create it", False: "an administrator must create it",
           None: "create it"}[allowed]
    yield Finding(name, BLOCKER, (
        "FSx's service-linked role AWSServiceRoleForAmazonFSx does not exist and the stack's "
        f"roles may not create it: every run's file system would fail. Once, {who}: {create}"))


def fsx_quota(needs: Needs, aws: Aws) -> Iterator[Finding]:
    """FSx for Lustre's storage quotas of the deployment types runs use (SCRATCH_2 and
    PERSISTENT_1), applied values over AWS's defaults, against FsxStorageQuotaGiB, within
    which the plan sizes every file system: a plan above what the account allows makes file
    systems FSx refuses (ServiceLimitExceeded)."""
    name = "fsx-quota"
    planned = needs.fsx_storage_quota_gib or FSX_DEFAULT_STORAGE_QUOTA_GIB
    for kind in ("SCRATCH_2", "PERSISTENT_1"):
        quota = fsx_storage_quota(kind)
        value = quota_value(aws, "fsx", quota.code, needs.region)
        if value is None:
            yield Finding(name, WARNING, f"FSx's quota {quota.code} ({quota.name}) was not "
                                         f"found in {needs.region}; not checked")
            continue
        summary = (f'{kind}: "{quota.name}" ({quota.code}) is {value:,.0f} GiB in '
                   f"{needs.region}; runs are sized within FsxStorageQuotaGiB={planned:,}")
        if value < MIN_CAPACITY_GIB:
            yield Finding(name, BLOCKER, (
                f"{summary}: below the smallest file system ({MIN_CAPACITY_GIB:,} GiB), so "
                f"FSx refuses every run's. Request an increase: "
                f"{quota.increase_command(max(planned, MIN_CAPACITY_GIB), needs.region)}"))
        elif value < planned:
            yield Finding(name, BLOCKER, (
                f"{summary}: a run sized up to the parameter gets a file system FSx refuses "
                f"(ServiceLimitExceeded). Deploy with FsxStorageQuotaGiB={value:.0f}, or "
                f"request an increase: {quota.increase_command(planned, needs.region)}"))
        else:
            yield Finding(name, OK, f"{summary} (file systems of runs at the same time share "
                                    "the quota)")


def _caller_may(action: str, aws: Aws) -> bool | None:
    """What the policy simulator says of the caller (None: it cannot say)."""
    caller = caller_role_arn(aws)
    if not caller:
        return None
    try:
        results = aws.call("iam", "simulate_principal_policy", PolicySourceArn=caller,
                           ActionNames=[action])
    except AwsError as error:
        if error.denied:
            return None
        raise
    return all(r["EvalDecision"] == "allowed" for r in results["EvaluationResults"])


def caller_role_arn(aws: Aws) -> str | None:
    """The caller as IAM names it (an assumed role's role), for the policy simulator."""
    arn = aws.call("sts", "get_caller_identity")["Arn"]
    assumed = re.match(r"arn:([\w-]+):sts::(\d+):assumed-role/([^/]+)/", arn)
    if assumed:
        return f"arn:{assumed[1]}:iam::{assumed[2]}:role/{assumed[3]}"
    return arn if ":iam::" in arn else None


def images(needs: Needs, aws: Aws) -> Iterator[Finding]:
    """The node image in the home region and the SageMaker image in each campaign region,
    with the tags the stack names."""
    name = "images"
    node = needs.node_image()
    wanted = [("node image", node)] if node else []
    wanted += [("SageMaker image", needs.regional_image(r)) for r in needs.campaign_regions]
    if node is None:
        yield Finding(name, WARNING, "the template names no node image (TrainingImageUri or a "
                                     "job definition's ECR image); not checked")
    missing: list[tuple[str, Image]] = []
    for what, image in wanted:
        if image.repository is None:
            yield Finding(name, WARNING, f"{what} {image.uri} is not in ECR: not checked")
            continue
        if image.created_by_deploy:
            yield _repository_the_deploy_creates(what, image, needs, aws)
            continue
        problem = _image_problem(aws, image)
        if problem is None:
            yield Finding(name, OK, f"{what} {image.name} is in {image.region}")
        else:
            missing.append((what, image))
            yield Finding(name, BLOCKER, f"{what} {image.name} in {image.region}: {problem}")
    for tag in dict.fromkeys(image.tag for _, image in missing):
        regions = " ".join(dict.fromkeys(i.region for what, i in missing
                                         if i.tag == tag and what == "SageMaker image"))
        yield Finding(name, BLOCKER, f"push them: {_push_images(needs, tag, regions)}" + (
            " (a campaign region's repository comes with regional/template.yaml, deployed "
            "there first)" if regions else ""))


def _push_images(needs: Needs, tag: str, regions: str | None = None) -> str:
    command = f"make push-images HOME_REGION={needs.region}"
    return command + (f' REGIONS="{regions}"' if regions else "") + f" TAG={tag}"


def _repository_the_deploy_creates(what: str, image: Image, needs: Needs, aws: Aws) -> Finding:
    try:
        aws.call("ecr", "describe_repositories", image.region,
                 repositoryNames=[image.repository])
    except AwsError as error:
        if error.code != "RepositoryNotFoundException":
            raise
        return Finding("images", WARNING, (
            f"{what} {image.name}: the deploy creates repository {image.repository} in "
            f"{image.region}; push the image after it, before the first run: "
            + _push_images(needs, image.tag)))
    return Finding("images", BLOCKER, (
        f"{what}: repository {image.repository} exists already in {image.region}, and the "
        "deploy creates it: CloudFormation would fail (AlreadyExists). Delete it, or deploy "
        "with TrainingImageUri naming an image in it"))


def _image_problem(aws: Aws, image: Image) -> str | None:
    ids = ({"imageDigest": image.tag} if image.tag.startswith("sha256:")
           else {"imageTag": image.tag})
    try:
        aws.call("ecr", "describe_images", image.region, repositoryName=image.repository,
                 imageIds=[ids])
    except AwsError as error:
        if error.code == "RepositoryNotFoundException":
            return f"no repository {image.repository}"
        if error.code == "ImageNotFoundException":
            return f"the repository has no image {image.tag}"
        raise
    return None


def lambda_concurrency(needs: Needs, aws: Aws) -> Iterator[Finding]:
    """The account's concurrency limit against what the stack reserves (Lambda refuses a
    reservation that leaves less than 100 unreserved, or any on an account below 100)."""
    name = "lambda"
    settings = aws.call("lambda", "get_account_settings")["AccountLimit"]
    limit = int(settings["ConcurrentExecutions"])
    unreserved = int(settings["UnreservedConcurrentExecutions"])
    reserved = needs.reserved_concurrency()
    stack_reserves = sum(reserved.values())
    # Deployed, the stack's reservation is already out of the unreserved pool.
    left = unreserved - (0 if needs.resources else stack_reserves)
    keep = min(LAMBDA_MIN_UNRESERVED, limit)
    which = (f"{stack_reserves} (" + ", ".join(f"{logical} {count}" for logical, count
                                               in reserved.items()) + ")") if reserved else "none"
    summary = (f"{limit} concurrent executions in {needs.region}, {unreserved} unreserved; the "
               f"stack reserves {which}")
    if stack_reserves and left < keep:
        yield Finding(name, BLOCKER, (
            f"{summary}: Lambda keeps {keep} unreserved, so the deploy fails. Ask for 1000: "
            + _increase("lambda", LAMBDA_CONCURRENCY, 1000, needs.region)))
    elif limit < LAMBDA_MIN_UNRESERVED:
        yield Finding(name, WARNING, (
            f"{summary}: more than {limit} calls at once are throttled (the state machines "
            "retry them, so runs slow down; the API answers 429). Ask for 1000: "
            + _increase("lambda", LAMBDA_CONCURRENCY, 1000, needs.region)))
    else:
        yield Finding(name, OK, summary)


CHECKS: dict[str, Check] = {
    "ec2-quota": ec2_quota,
    "sagemaker-quota": sagemaker_quota,
    "fsx": fsx,
    "fsx-quota": fsx_quota,
    "images": images,
    "network": network,
    "lambda": lambda_concurrency,
}


def run_checks(needs: Needs, aws: Aws) -> list[Finding]:
    findings: list[Finding] = []
    for name, check in CHECKS.items():
        found: list[Finding] = []
        try:
            for finding in check(needs, aws):
                found.append(finding)
        except AwsError as error:
            found.append(_not_checked(name, error))
        findings += found
    return findings


def _not_checked(check: str, error: AwsError) -> Finding:
    if error.denied:
        return Finding(check, WARNING, (
            f"not checked: this identity may not call {error.action}; grant it to whoever "
            "runs traingrid doctor (it only reads)"))
    return Finding(check, WARNING, f"not checked: {error.action} failed: {error.code}: "
                                   f"{error.message}")
