"""``traingrid doctor`` on emulated accounts: a healthy one passes; an account that lacks any one
thing the stack needs gets that check's blocker line and a non-zero exit."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from traingrid_local.cli.main import app
from traingrid_local.doctor.checks import S3_DATA_REPOSITORY
from traingrid_local.doctor.needs import read_template, template_defaults
from traingrid_local.emulator.account import ACCOUNT
from traingrid_local.emulator.session import Emulator
from traingrid_local.templates import TEMPLATE

runner = CliRunner()
SESSION = boto3.session.Session()
CLIENTS: dict[tuple[str, str], Any] = {}
HOME, OTHER = "us-east-1", "us-west-2"
REGIONS = (HOME, OTHER)
NODE_REPOSITORY, REGIONAL_REPOSITORY = "traingrid-mnp", "traingrid-sagemaker"
MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
# The tags the template names by default (its version, whatever it is now).
DEFAULTS = template_defaults(read_template(TEMPLATE))
REGIONAL_TAG = DEFAULTS["TrainingImageRepository"].partition(":")[2] or "latest"
NODE_TAG = DEFAULTS.get("NodeImageTag", "latest")


@dataclass
class Account:
    """The emulated account, made healthy for the project's defaults (20 nodes of up to
    192 vCPUs, campaigns of 10 × ml.p3.16xlarge in both regions)."""

    emulator: Emulator
    vpc: str = ""
    subnets: list[str] = field(default_factory=list)
    default_group: str = ""

    def healthy(self) -> Account:
        ACCOUNT.set_quota("ec2", "Running On-Demand P instances", 20 * 192)
        ACCOUNT.set_quota("sagemaker", "ml.p3.16xlarge for training job usage", 10)
        ACCOUNT.set_quota("lambda", "Concurrent executions", 1000)
        self.client("iam").create_service_linked_role(AWSServiceName="fsx.amazonaws.com")
        for region in REGIONS:
            self.push(REGIONAL_REPOSITORY, region, REGIONAL_TAG)
        ec2 = self.client("ec2")
        self.vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
        self.subnets = [self.subnet(f"10.30.{i}.0/24", zone) for i, zone in enumerate("ab")]
        self.nat_route(self.vpc)
        # The VPC's default group (as AWS creates it: all traffic in from itself, and out).
        (group,) = ec2.describe_security_groups(Filters=[
            {"Name": "vpc-id", "Values": [self.vpc]},
            {"Name": "group-name", "Values": ["default"]}])["SecurityGroups"]
        self.default_group = group["GroupId"]
        return self

    def nat_route(self, vpc: str) -> None:
        """The VPC's main route table sends 0.0.0.0/0 through a NAT gateway (in a public
        subnet of its own)."""
        ec2 = self.client("ec2")
        public = ec2.create_subnet(VpcId=vpc, CidrBlock=_last_block(ec2, vpc))["Subnet"]
        allocation = ec2.allocate_address(Domain="vpc")["AllocationId"]
        nat = ec2.create_nat_gateway(SubnetId=public["SubnetId"], AllocationId=allocation)
        main = ec2.describe_route_tables(Filters=[
            {"Name": "vpc-id", "Values": [vpc]},
            {"Name": "association.main", "Values": ["true"]}])["RouteTables"][0]
        ec2.create_route(RouteTableId=main["RouteTableId"], DestinationCidrBlock="0.0.0.0/0",
                         NatGatewayId=nat["NatGateway"]["NatGatewayId"])

    def client(self, service: str, region: str = HOME) -> Any:
        key = (service, region)
        if key not in CLIENTS:  # kept across emulator sessions: making one takes a while
            CLIENTS[key] = SESSION.client(service, region_name=region)
        return CLIENTS[key]

    def push(self, repository: str, region: str, tag: str) -> None:
        self.client("ecr", region).create_repository(repositoryName=repository)
        self.push_to(repository, region, tag)

    def push_to(self, repository: str, region: str, tag: str) -> None:
        ecr = self.client("ecr", region)
        ecr.put_image(repositoryName=repository, imageTag=tag, imageManifest=json.dumps(
            {"schemaVersion": 2, "mediaType": MANIFEST, "config": {"digest": f"sha256:{'0' * 64}"},
             "layers": []}))

    def subnet(self, cidr: str, zone: str, vpc: str | None = None) -> str:
        return self.client("ec2").create_subnet(
            VpcId=vpc or self.vpc, CidrBlock=cidr,
            AvailabilityZone=f"{HOME}{zone}")["Subnet"]["SubnetId"]

    def doctor(self, *extra: str, subnets: list[str] | None = None,
               database_subnets: list[str] | None = None) -> Any:
        network = ["--parameter", f"VpcId={self.vpc}", "--parameter",
                   f"TrainingSubnetIds={','.join(subnets or self.subnets)}", "--parameter",
                   f"DatabaseSubnetIds={','.join(database_subnets or self.subnets)}",
                   ] if self.vpc else []
        if self.default_group and "VpcDefaultSecurityGroupId" not in " ".join(extra):
            network += ["--parameter", f"VpcDefaultSecurityGroupId={self.default_group}"]
        return runner.invoke(app, ["doctor", "--region", HOME, "--campaign-regions",
                                   ",".join(REGIONS), *network, *extra])


def _last_block(ec2: Any, vpc: str) -> str:
    cidr = ec2.describe_vpcs(VpcIds=[vpc])["Vpcs"][0]["CidrBlock"]
    return cidr.rsplit(".", 2)[0] + ".255.0/24"


@pytest.fixture
def account(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with Emulator() as emulator:
        yield Account(emulator)


def lines(result: Any, status: str) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.startswith(status)]


def test_a_healthy_account_passes_every_check(account):
    result = account.healthy().doctor()
    assert result.exit_code == 0, result.output
    assert lines(result, "BLOCKER") == []
    # Before the deploy, the node image's repository (the stack's own) cannot hold it yet.
    (warning,) = lines(result, "warning")
    assert (f"node image traingrid-mnp:{NODE_TAG}: the deploy creates repository traingrid-mnp in "
            "us-east-1; push the image after it, before the first run: make push-images "
            f"HOME_REGION=us-east-1 TAG={NODE_TAG}") in warning
    checks = {line.split()[1] for line in lines(result, "ok")}
    assert checks == {"ec2-quota", "sagemaker-quota", "fsx", "fsx-quota", "images", "network",
                      "lambda"}
    assert "No blockers (1 warning(s))." in result.stdout


def test_a_new_accounts_p_instance_quota_is_a_blocker(account):
    account.healthy()
    ACCOUNT.set_quota("ec2", "L-417A185B", 0)
    result = account.doctor()
    assert result.exit_code == 1
    (blocker,) = lines(result, "BLOCKER")
    assert ("ec2-quota" in blocker and "P instances (on-demand, L-417A185B): 0 vCPUs in "
            "us-east-1; 20 nodes × p4d.24xlarge need 1920" in blocker)
    assert ("--service-code ec2 --quota-code L-417A185B --desired-value 3840 "
            "--region us-east-1") in blocker


def test_a_quota_for_the_smaller_type_only_warns_and_fewer_nodes_pass(account):
    account.healthy()
    ACCOUNT.set_quota("ec2", "L-417A185B", 1920)
    result = account.doctor()
    assert result.exit_code == 0, result.output
    warning = lines(result, "warning")[0]
    assert "p5.48xlarge need 3840" in warning
    fewer = account.doctor("--nodes", "10")
    assert fewer.exit_code == 0 and " ec2-quota " not in "".join(lines(fewer, "warning"))


def test_each_family_has_its_quota_and_a_spot_environment_the_spot_one(account, tmp_path):
    account.healthy()
    result = account.doctor("--instance-types", "p3.16xlarge,g5.12xlarge", "--nodes", "4")
    assert result.exit_code == 1
    (blocker,) = lines(result, "BLOCKER")
    assert ("G instances (on-demand, L-DB2E81BA): 0 vCPUs in us-east-1; 4 nodes × g5.12xlarge "
            "need 192") in blocker

    def spot(resources: dict[str, Any]) -> None:
        for resource in resources.values():
            if resource["Type"] == "AWS::Batch::ComputeEnvironment":
                resource["Properties"]["ComputeResources"]["Type"] = "SPOT"

    result = account.doctor("--template", variant(tmp_path, spot))
    assert result.exit_code == 1
    assert "P instances (spot, L-7212CCBC): 0 vCPUs" in lines(result, "BLOCKER")[0]


def test_sagemaker_quota_missing_in_every_campaign_region_is_a_blocker(account):
    account.healthy()
    ACCOUNT.set_quota("sagemaker", "ml.p3.16xlarge for training job usage", 0)
    result = account.doctor()
    assert result.exit_code == 1
    blockers = lines(result, "BLOCKER")
    assert len(blockers) == 2
    assert "us-west-2: 'ml.p3.16xlarge for training job usage' is 0; a campaign job needs 10: " \
           "no campaign job can start" in blockers[1]
    assert "--service-code sagemaker" in blockers[1] and "--region us-west-2" in blockers[1]


def test_sagemaker_quota_missing_in_one_region_warns_and_spot_needs_its_own(account):
    account.healthy()
    ACCOUNT.set_quota("sagemaker", "ml.p3.16xlarge for training job usage", 0, [OTHER])
    result = account.doctor()
    assert result.exit_code == 0, result.output
    (warning,) = [line for line in lines(result, "warning") if "sagemaker-quota" in line]
    assert "us-west-2:" in warning and "its data trains in us-east-1 instead" in warning
    spot = account.doctor("--parameter", "ManagedSpot=true")
    assert spot.exit_code == 1
    assert any("'ml.p3.16xlarge for spot training job usage' is 0" in line
               for line in lines(spot, "BLOCKER"))


def test_no_fsx_service_linked_role_is_a_blocker_unless_the_stack_may_create_it(account,
                                                                                 tmp_path):
    account.healthy()
    account.client("iam").delete_service_linked_role(RoleName="AWSServiceRoleForAmazonFSx")
    result = account.doctor()
    assert result.exit_code == 0, result.output
    assert any("does not exist yet: the first file system creates it (the stack's roles may)"
               in line for line in lines(result, "ok"))
    # A template whose roles may not create it (as before this release).
    template = without_grants(tmp_path, "fsx.amazonaws.com")
    result = account.doctor("--template", template)
    assert result.exit_code == 1
    (blocker,) = lines(result, "BLOCKER")
    assert "fsx" in blocker and "AWSServiceRoleForAmazonFSx does not exist" in blocker
    assert ("you may create it: aws iam create-service-linked-role --aws-service-name "
            "fsx.amazonaws.com") in blocker
    ACCOUNT.denied.add("iam:CreateServiceLinkedRole")
    assert "an administrator must create it" in lines(
        account.doctor("--template", template), "BLOCKER")[0]
    # FSx reaches the data bucket through a role made per file system, by the stack's roles.
    result = account.doctor("--template", without_grants(tmp_path, S3_DATA_REPOSITORY))
    assert result.exit_code == 1
    assert ("the stack's roles may not create the role FSx reads the data bucket through" in
            lines(result, "BLOCKER")[0])


def without_grants(tmp_path: Path, service: str) -> str:
    """template.yaml whose roles may not create ``service``'s service-linked roles."""

    def change(value: Any) -> None:
        if isinstance(value, dict):
            action = value.get("Action")
            if "iam:CreateServiceLinkedRole" in (action if isinstance(action, list) else [action]):
                value["Resource"] = [r for r in value["Resource"]
                                     if f"/{service}/" not in json.dumps(r)]
            for item in value.values():
                change(item)
        elif isinstance(value, list):
            for item in value:
                change(item)

    return variant(tmp_path, change)


def test_an_image_missing_in_a_campaign_region_is_a_blocker_with_the_push_command(account):
    account.healthy()
    account.client("ecr", OTHER).batch_delete_image(
        repositoryName=REGIONAL_REPOSITORY, imageIds=[{"imageTag": "latest"}])
    result = account.doctor("--parameter", "TrainingImageRepository=traingrid-sagemaker:v2")
    assert result.exit_code == 1
    blockers = lines(result, "BLOCKER")
    assert "SageMaker image traingrid-sagemaker:v2 in us-east-1: the repository has no image v2" \
        in blockers[0]
    assert "SageMaker image traingrid-sagemaker:v2 in us-west-2: the repository has no image v2" \
        in blockers[1]
    assert ('push them: make push-images HOME_REGION=us-east-1 REGIONS="us-east-1 us-west-2" '
            "TAG=v2") in blockers[-1]


def test_the_node_image_is_read_from_training_image_uri_or_the_template(account):
    account.healthy()
    result = account.doctor("--parameter", f"TrainingImageUri=123456789012.dkr.ecr.{HOME}."
                                           "amazonaws.com/traingrid-node:1.4")
    assert result.exit_code == 1
    assert "node image traingrid-node:1.4 in us-east-1: no repository traingrid-node" in \
        lines(result, "BLOCKER")[0]
    # The template's own repository, there before the deploy: the deploy would fail.
    account.push(NODE_REPOSITORY, HOME, NODE_TAG)
    result = account.doctor()
    assert result.exit_code == 1
    assert ("node image: repository traingrid-mnp exists already in us-east-1, and the deploy "
            "creates it: CloudFormation would fail") in lines(result, "BLOCKER")[0]


def test_subnets_without_a_nat_route_are_a_blocker_even_with_endpoints(account):
    account.healthy()
    ec2 = account.client("ec2")
    isolated = ec2.create_route_table(VpcId=account.vpc)["RouteTable"]["RouteTableId"]
    ec2.associate_route_table(RouteTableId=isolated, SubnetId=account.subnets[1])
    ec2.create_vpc_endpoint(VpcId=account.vpc, ServiceName=f"com.amazonaws.{HOME}.sagemaker.api",
                            VpcEndpointType="Interface", SubnetIds=[account.subnets[1]])
    result = account.doctor()
    assert result.exit_code == 1
    (blocker,) = lines(result, "BLOCKER")
    assert (f"subnet(s) {account.subnets[1]} have no default route to a NAT gateway: the "
            "janitor and RegisterDataset (SageMaker and S3 of the campaign regions) call other "
            "regions' APIs, which no VPC endpoint serves (the VPC's endpoints for api serve "
            "this region only)") in blocker
    # Through a transit gateway: the doctor cannot follow it, and says so.
    gateway = ec2.create_transit_gateway()["TransitGateway"]["TransitGatewayId"]
    ec2.create_route(RouteTableId=isolated, DestinationCidrBlock="0.0.0.0/0",
                     TransitGatewayId=gateway)
    result = account.doctor()
    assert result.exit_code == 0, result.output
    assert "not a NAT gateway: make sure it reaches the internet" in \
        "".join(lines(result, "warning"))


def test_database_subnets_in_one_zone_are_a_blocker_before_rds_refuses_them(account):
    account.healthy()
    same_zone = account.subnet("10.30.5.0/24", "a")
    result = account.doctor(database_subnets=[account.subnets[0], same_zone])
    assert result.exit_code == 1
    (blocker,) = lines(result, "BLOCKER")
    assert ("DatabaseSubnetIds: they cover 1 Availability Zone (us-east-1a); RDS refuses a DB "
            "subnet group in fewer than two (DBSubnetGroupDoesNotCoverEnoughAZs)") in blocker
    result = account.doctor()
    assert "DatabaseSubnetIds cover us-east-1a, us-east-1b" in "".join(lines(result, "ok"))
    # A database brought along needs none of them.
    result = account.doctor("--parameter", "DatabaseSecretArn=arn:aws:secretsmanager:x",
                            database_subnets=[same_zone])
    assert not any("DatabaseSubnetIds" in line for line in result.stdout.splitlines())


def test_an_fsx_quota_below_the_stacks_fsx_storage_quota_is_a_blocker(account):
    account.healthy()
    ACCOUNT.set_quota("fsx", "Lustre Scratch storage capacity", 48_000)
    result = account.doctor()
    assert result.exit_code == 1
    (blocker,) = lines(result, "BLOCKER")
    assert ('SCRATCH_2: "Lustre Scratch storage capacity" (L-AD2FC696) is 48,000 GiB in '
            "us-east-1; runs are sized within FsxStorageQuotaGiB=100,800") in blocker
    assert ("Deploy with FsxStorageQuotaGiB=48000, or request an increase: aws service-quotas "
            "request-service-quota-increase --service-code fsx --quota-code L-AD2FC696 "
            "--desired-value 100800 --region us-east-1") in blocker
    result = account.doctor("--parameter", "FsxStorageQuotaGiB=48000")
    assert result.exit_code == 0, result.output


def test_subnets_without_room_for_the_nodes_or_outside_the_vpc_are_blockers(account):
    account.healthy()
    small = account.subnet("10.30.9.0/28", "a")  # AWS keeps 5 of its 16 addresses
    result = account.doctor(subnets=[small])
    assert result.exit_code == 1
    (blocker,) = lines(result, "BLOCKER")
    # The widest of the default types: p4d.24xlarge's 4 EFA interfaces each have an address,
    # and the multi-node task's interface one more.
    assert (f"the first training subnet {small} (us-east-1a), where every node launches, has 11 "
            "free addresses; 20 × p4d.24xlarge nodes take 100 addresses (5 a node: 4 "
            "interface(s) with an address and the multi-node task's own)") in blocker
    # A larger subnet after it in the same zone does not help: the nodes launch in the first.
    large = account.subnet("10.30.10.0/24", "a")
    result = account.doctor(subnets=[small, large])
    assert result.exit_code == 1 and "has 11 free addresses" in lines(result, "BLOCKER")[0]
    assert account.doctor(subnets=[large, small]).exit_code == 0
    other_vpc = account.client("ec2").create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
    stray = account.subnet("10.40.1.0/24", "a", other_vpc)
    result = account.doctor(subnets=[account.subnets[0], stray])
    assert result.exit_code == 1
    assert f"subnet {stray} is in {other_vpc}, not in VpcId {account.vpc}" in \
        lines(result, "BLOCKER")[0]


def variant(tmp_path: Path, change: Any) -> str:
    """A copy of template.yaml (as JSON, which the doctor reads too) that ``change`` made."""
    template = read_template(TEMPLATE)
    change(template["Resources"])
    path = tmp_path / f"template-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(template))
    return str(path)


def reserving(tmp_path: Path, reserved: int | None) -> str:
    """template.yaml with the janitor reserving ``reserved`` (None: no function reserving)."""

    def change(resources: dict[str, Any]) -> None:
        for resource in resources.values():
            resource.get("Properties", {}).pop("ReservedConcurrentExecutions", None)
        if reserved is not None:
            janitor = resources["JanitorFunction"]["Properties"]
            janitor["ReservedConcurrentExecutions"] = reserved

    return variant(tmp_path, change)


def test_a_new_accounts_lambda_concurrency_is_a_blocker_for_a_stack_that_reserves(account,
                                                                                  tmp_path):
    account.healthy()
    ACCOUNT.set_quota("lambda", "Concurrent executions", 10)
    result = account.doctor("--template", reserving(tmp_path, 1))
    assert result.exit_code == 1
    (blocker,) = lines(result, "BLOCKER")
    assert ("10 concurrent executions in us-east-1, 10 unreserved; the stack reserves 1 "
            "(JanitorFunction 1): Lambda keeps 10 unreserved, so the deploy fails") in blocker
    assert "--service-code lambda --quota-code L-B99A9384 --desired-value 1000" in blocker
    # Reserving nothing, it deploys: its calls throttle beyond 10 at once.
    result = account.doctor("--template", reserving(tmp_path, None))
    assert result.exit_code == 0, result.output
    assert "the stack reserves none: more than 10 calls at once are throttled" in \
        [line for line in lines(result, "warning") if " lambda " in line][0]
    ACCOUNT.set_quota("lambda", "Concurrent executions", 1000)
    result = account.doctor("--template", reserving(tmp_path, 1))
    assert result.exit_code == 0 and " lambda " not in "".join(lines(result, "warning"))


def test_a_permission_the_doctor_lacks_is_a_warning_naming_it(account):
    account.healthy()
    ACCOUNT.denied.add("servicequotas:GetServiceQuota")
    result = account.doctor()
    assert result.exit_code == 0, result.output
    warning = lines(result, "warning")[0]
    assert "ec2-quota" in warning
    assert "not checked: this identity may not call servicequotas:GetServiceQuota" in warning


def test_json_and_samconfig_parameter_overrides(account, tmp_path):
    account.healthy()
    samconfig = tmp_path / "samconfig.toml"
    samconfig.write_text(
        '[default.deploy.parameters]\nparameter_overrides = "VpcId=vpc-0missing '
        f'TrainingSubnetIds=\\"{",".join(account.subnets)}\\" MaxVcpus=256"\n')
    result = runner.invoke(app, ["doctor", "--region", HOME, "--samconfig", str(samconfig),
                                 "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["read_from"][1].endswith("parameter_overrides")
    blockers = [f["message"] for f in report["findings"] if f["status"] == "blocker"]
    assert blockers == [
        "MaxVcpus is 256; 20 nodes need at least 1920: deploy with MaxVcpus=1920 or more",
        "VPC vpc-0missing does not exist in us-east-1: deploy with the VpcId of the training "
        "VPC"]


def test_a_deployed_stack_is_checked_with_its_own_parameters(account):
    from traingrid_local.stack.environment import deploy_traingrid

    account.healthy()
    deployment = deploy_traingrid(account.emulator, regions=())
    try:
        result = runner.invoke(app, ["doctor", "--stack", "traingrid", "--region", HOME])
        assert result.exit_code == 1
        assert "stack traingrid in us-east-1" in result.stdout
        # The stack made the node image's repository; nothing is pushed yet.
        images = [line for line in lines(result, "BLOCKER") if " images " in line]
        assert f"node image traingrid-mnp:{NODE_TAG} in us-east-1: the repository has no " \
               f"image {NODE_TAG}" in images[0]
        assert images[1].endswith(f"push them: make push-images HOME_REGION=us-east-1 "
                                  f"TAG={NODE_TAG}")
        # The emulated deploy's subnets route to a NAT gateway.
        assert not [line for line in lines(result, "BLOCKER") if " network " in line]
        account.push_to(NODE_REPOSITORY, HOME, NODE_TAG)
        result = runner.invoke(app, ["doctor", "--stack", "traingrid", "--region", HOME])
        assert result.exit_code == 0, result.output
        # The stack's own subnets (made by the emulated deploy), not any flag's.
        network = next(line for line in lines(result, "ok") if " network " in line)
        assert "10.20.0.0/16" in network
        reserved = sum(int(r["Properties"].get("ReservedConcurrentExecutions", 0))
                       for r in read_template(TEMPLATE)["Resources"].values()
                       if r["Type"] == "AWS::Serverless::Function")
        assert f"{1000 - reserved} unreserved" in result.stdout
    finally:
        deployment.close()


def test_invalid_options_and_an_unknown_stack(account):
    result = runner.invoke(app, ["doctor", "--region", HOME, "--nodes", "0", "--parameter",
                                 "VpcId", "--campaign-instance-type", "ml.t3.medium",
                                 "--campaign-regions", "us-west-2,moon"])
    assert result.exit_code == 2
    assert "--campaign-regions 'moon' is not a region code" in result.stderr
    assert "--nodes 0 must be 1-500" in result.stderr and "not Key=Value: 'VpcId'" in \
        result.stderr and "--campaign-instance-type ml.t3.medium" in result.stderr
    result = runner.invoke(app, ["doctor", "--region", HOME, "--stack", "nope"])
    assert result.exit_code == 3 and "cannot read stack nope in us-east-1" in result.stderr


def test_a_p5_node_takes_the_address_of_its_one_efa_with_ena_interface_not_32(account):
    """Cards 1-31 of a p5.48xlarge are EFA-only, without an address: 20 nodes take 40 (with
    their tasks' interfaces), which a /26 holds; 20 p4d.24xlarge nodes (5 each) it does not."""
    account.healthy()
    subnet = account.subnet("10.30.9.0/26", "a")  # 59 free
    p5 = account.doctor("--parameter", "TrainingInstanceTypes=p5.48xlarge", subnets=[subnet])
    assert ("(us-east-1a), where every node launches, has 59 free addresses ≥ 40: 20 × "
            "p5.48xlarge nodes take 40 addresses (2 a node: 1 interface(s) with an address of 32 "
            "and the multi-node task's own)") in "".join(lines(p5, "ok"))
    p4d = account.doctor("--parameter", "TrainingInstanceTypes=p4d.24xlarge", subnets=[subnet])
    assert p4d.exit_code == 1
    assert "20 × p4d.24xlarge nodes take 100 addresses" in \
        lines(p4d, "BLOCKER")[0]


def test_efa_nodes_tasks_need_the_vpcs_default_group_named_and_letting_them_meet(account):
    account.healthy()
    group = account.default_group
    result = account.doctor("--parameter", "VpcDefaultSecurityGroupId=")
    assert result.exit_code == 1
    (blocker,) = lines(result, "BLOCKER")
    assert (f"VpcDefaultSecurityGroupId is not given; deploy with VpcDefaultSecurityGroupId="
            f"{group}, the default security group of {account.vpc}") in blocker
    ec2 = account.client("ec2")
    rules = ec2.describe_security_group_rules(
        Filters=[{"Name": "group-id", "Values": [group]}])["SecurityGroupRules"]
    ec2.revoke_security_group_ingress(GroupId=group, SecurityGroupRuleIds=[
        r["SecurityGroupRuleId"] for r in rules if not r["IsEgress"]])
    result = account.doctor()
    assert result.exit_code == 1
    (blocker,) = lines(result, "BLOCKER")
    assert (f"the default security group {group} of {account.vpc} does not allow all traffic "
            "in from itself: the multi-node tasks on EFA nodes are in it") in blocker
    # Types without EFA only: their compute environment names the training group.
    result = account.doctor("--parameter", "TrainingInstanceTypes=p3.16xlarge")
    assert result.exit_code == 0, result.output
