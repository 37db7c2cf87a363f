"""botocore's errors become TrainGrid's once, in the adapters (``aws/client_errors.py``): a
service's answer by its code, a call that got no answer as an AwsServiceError too, so the steps
and the state machines' Retry see one family of errors."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

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
