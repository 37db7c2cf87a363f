"""botocore's errors become TrainGrid's once, in the adapters (``aws/client_errors.py``): a
service's answer by its code, a call that got no answer as an AwsServiceError too, so the steps
and the state machines' Retry see one family of errors."""

from __future__ import annotations

import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    ParamValidationError,
    ReadTimeoutError,
)

from traingrid.aws import leases, sagemaker, stepfunctions, task_tokens
from traingrid.aws.client_errors import translated
from traingrid.errors import AwsServiceError, ResourceNotFound


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "said so"}}, "DescribeJobs")


def test_a_services_answer_is_translated_by_its_code():
    with pytest.raises(ResourceNotFound, match="NoSuchKey"), translated("S3", "GetObject"):
        raise client_error("NoSuchKey")
    with pytest.raises(AwsServiceError) as raised, translated("Batch", "DescribeJobs"):
        raise client_error("TooManyRequestsException")
    assert raised.value.code == "TooManyRequestsException"


@pytest.mark.parametrize("error", [
    EndpointConnectionError(endpoint_url="https://batch.us-east-1.amazonaws.com"),
    ReadTimeoutError(endpoint_url="https://batch.us-east-1.amazonaws.com"),
])
def test_a_call_that_got_no_answer_is_an_aws_service_error(error):
    with pytest.raises(AwsServiceError) as raised, translated("Batch", "DescribeJobs"):
        raise error
    assert raised.value.code == type(error).__name__
    assert "Batch.DescribeJobs failed" in str(raised.value)


def test_a_bug_or_a_missing_setting_is_not_an_aws_service_error():
    # A parameter botocore's model refuses is a bug: retrying it would only wait longer.
    with pytest.raises(ParamValidationError), translated("Batch", "DescribeJobs"):
        raise ParamValidationError(report="jobs: expected a list")


class Unreachable:
    """A client whose every call gets no answer."""

    def __getattr__(self, name):
        def call(**_):
            raise EndpointConnectionError(endpoint_url="https://example.amazonaws.com")
        return call


@pytest.mark.parametrize(("module", "call"), [
    (leases, lambda: leases.acquire("t", "janitor", "me", 0.0, 60)),
    (leases, lambda: leases.release("t", "janitor", "me")),
    (sagemaker, lambda: sagemaker.create_training_job("us-west-2", {})),
    (sagemaker, lambda: sagemaker.stop_training_job("us-west-2", "job")),
    (stepfunctions, lambda: stepfunctions.complete_task("token", {})),
    (stepfunctions, lambda: stepfunctions.start_named_execution(
        "arn:aws:states:us-east-1:1:stateMachine:m", "run", {})),
    (task_tokens, lambda: task_tokens.forget("t", "job", "token")),
])
def test_the_adapters_with_answers_of_their_own_translate_no_answer_too(monkeypatch, module,
                                                                        call):
    monkeypatch.setattr(module, "client", lambda *args, **kwargs: Unreachable())
    with pytest.raises(AwsServiceError, match="EndpointConnectionError"):
        call()
