"""The listing client's ListObjectsV2 parser (``aws.list_pages``) on pages moto's S3 served:
the fields a listing reads are botocore's own, on full 1,000-key pages, the last page, a page of
folders and an empty one, with keys sent URL-encoded (botocore's default) and as XML text
(entities, non-ASCII); ``s3.lister`` lists what botocore's client lists, and S3's errors still
reach the adapter's translation."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.handlers import set_list_objects_encoding_type_url
from botocore.parsers import ResponseParserError, RestXMLParser
from moto import mock_aws

from traingrid.aws import clients, s3
from traingrid.aws.list_pages import ListingParser
from traingrid.errors import ResourceNotFound

BUCKET = "list-pages-test"
# Characters XML writes as entities (&amp; &lt; &gt; &quot; &apos;), non-ASCII, spaces, %, +.
ODD = " &<>\"' é☃ 100%+x"
FOLDER_KEYS = 1_234  # a full page of 1,000, then a last page of 234
# The fields a listing reads, and the page's scalars botocore's handlers decode or page on.
PAGE_FIELDS = ("IsTruncated", "NextContinuationToken", "ContinuationToken", "KeyCount",
               "MaxKeys", "Name", "Prefix", "Delimiter", "StartAfter", "EncodingType")


@pytest.fixture(scope="module")
def bucket() -> Any:
    """One bucket for the module's tests, which only read it (1,237 PutObjects take seconds)."""
    with pytest.MonkeyPatch.context() as monkeypatch, mock_aws():
        for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                            "AWS_DEFAULT_REGION": "us-east-1"}.items():
            monkeypatch.setenv(name, value)
        clients.reset()
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        for i in range(FOLDER_KEYS):
            client.put_object(Bucket=BUCKET, Key=f"data/a{ODD}/{i:05d}{ODD}.jpg",
                              Body=b"x" * (i % 7))
        for key in ("data/b/1", f"data/{ODD}.txt", "data/c/ü/2"):
            client.put_object(Bucket=BUCKET, Key=key, Body=b"yy")
        yield client
        clients.reset()


def served_pages(url_encoded: bool, **args: Any) -> list[bytes]:
    """Every page's body moto served for ``args``, listed to the end by a client of its own."""
    client, bodies = boto3.client("s3"), []
    client.meta.events.register("after-call.s3.ListObjectsV2",
                                lambda http_response, **_: bodies.append(http_response.content))
    if not url_encoded:  # botocore asks for EncodingType=url unless told otherwise
        client.meta.events.unregister("before-parameter-build.s3.ListObjectsV2",
                                      set_list_objects_encoding_type_url)
    for _ in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, **args):
        pass
    return bodies


def parsed_both(client: Any, body: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    shape = client.meta.service_model.operation_model("ListObjectsV2").output_shape
    response = {"body": body, "headers": {"x-amz-request-id": "r1"}, "status_code": 200}
    return (ListingParser().parse(response, shape),
            RestXMLParser(timestamp_parser=str).parse(response, shape))


def used(parsed: dict[str, Any]) -> dict[str, Any]:
    return {**{name: parsed[name] for name in PAGE_FIELDS if name in parsed},
            "Contents": [(o["Key"], o["Size"]) for o in parsed.get("Contents", [])],
            "CommonPrefixes": [p["Prefix"] for p in parsed.get("CommonPrefixes", [])],
            "ResponseMetadata": parsed["ResponseMetadata"]}


@pytest.mark.parametrize("url_encoded", [True, False], ids=["url-encoded", "xml-text"])
def test_every_page_reads_as_botocore_reads_it(bucket, url_encoded):
    pages = {
        "folder": served_pages(url_encoded, Prefix=f"data/a{ODD}/"),
        "folders": served_pages(url_encoded, Prefix="data/", Delimiter="/"),
        "after": served_pages(url_encoded, Prefix="data/", StartAfter="data/b/"),
        "empty": served_pages(url_encoded, Prefix="nothing/"),
    }
    assert [len(bodies) for bodies in pages.values()] == [2, 1, 1, 1]
    if not url_encoded:
        assert b"&amp;&lt;&gt;" in pages["folder"][0] and b"%26" not in pages["folder"][0]
    for name, bodies in pages.items():
        for body in bodies:
            ours, botocores = parsed_both(bucket, body)
            assert used(ours) == used(botocores), name
    first, last = (parsed_both(bucket, body)[0] for body in pages["folder"])
    assert (len(first["Contents"]), first["IsTruncated"], first["KeyCount"]) == (1000, True, 1000)
    assert (len(last["Contents"]), last["IsTruncated"], "NextContinuationToken" in last) == (
        234, False, False)
    assert "Contents" not in parsed_both(bucket, pages["empty"][0])[0]


def test_the_lister_lists_what_botocore_lists(bucket):
    def botocores(**args: Any) -> tuple[list[tuple[str, int]], list[str]]:
        objects, prefixes = [], []
        for page in bucket.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, **args):
            objects += [(o["Key"], o["Size"]) for o in page.get("Contents", [])]
            prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        return objects, prefixes

    def ours(prefix: str, **args: Any) -> tuple[list[tuple[str, int]], list[str]]:
        list_page = s3.lister()
        objects, prefixes, token = [], [], None
        while True:
            page = list_page(BUCKET, prefix, token=token, **args)
            objects += page.objects
            prefixes += page.prefixes
            if page.next_token is None:
                return objects, prefixes
            token = page.next_token

    folder = f"data/a{ODD}/"
    listed = ours(folder)
    assert listed == botocores(Prefix=folder)
    assert listed[0] == [(f"{folder}{i:05d}{ODD}.jpg", i % 7) for i in range(FOLDER_KEYS)]
    assert ours("data/", delimiter="/") == botocores(Prefix="data/", Delimiter="/") == (
        [(f"data/{ODD}.txt", 2)], [f"data/a{ODD}/", "data/b/", "data/c/"])
    assert ours("data/", start_after="data/b/") == botocores(Prefix="data/", StartAfter="data/b/")


def test_s3s_errors_reach_the_adapter_and_other_answers_stay_botocores(bucket):
    with pytest.raises(ResourceNotFound, match="S3.ListObjectsV2: NoSuchBucket"):
        s3.lister()("no-such-bucket-here", "data/")
    # A body that is not XML: botocore's parser says so, as for any client.
    shape = bucket.meta.service_model.operation_model("ListObjectsV2").output_shape
    with pytest.raises(ResponseParserError):
        ListingParser().parse({"body": b"<ListBucketResult><Contents>", "headers": {},
                               "status_code": 200}, shape)
    # Another operation on the listing client is parsed by botocore whole.
    listing = clients.client("s3", listing=True)
    assert listing.head_bucket(Bucket=BUCKET)["ResponseMetadata"]["HTTPStatusCode"] == 200
    (v1,) = listing.list_objects(Bucket=BUCKET, Prefix="data/b/")["Contents"]
    assert (v1["Key"], v1["Size"], v1["StorageClass"]) == ("data/b/1", 2, "STANDARD")
    assert "ETag" in v1 and "LastModified" in v1
