"""ListObjectsV2's pages parsed for listing large prefixes: the fields a listing reads, straight
from the XML body.

botocore's parser walks every element of a page through the service model (a 1,000-key page is
~230 KB: LastModified, ETag, ChecksumAlgorithm, StorageClass and Owner of every key), and on one
vCPU that, not the network, bounded how fast a dataset could be listed. This one builds the
element tree with the same C parser and reads only each key's Key and Size, the common
prefixes and the page's own scalars; everything else about the response (an error, the
headers, ResponseMetadata, any other operation) is botocore's. botocore's ``after-call``
handlers run on its result as on their own, so keys sent URL-encoded (botocore asks for
``EncodingType=url`` on every ListObjectsV2) come back decoded.
"""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

from botocore.parsers import ResponseParserFactory, RestXMLParser

OUTPUT_SHAPE = "ListObjectsV2Output"
ROOT = "ListBucketResult"
# ListObjectsV2Output's scalars as S3's model types them: MaxKeys and KeyCount integers,
# IsTruncated a boolean, the rest strings; an Object's Key a string, its Size a long.
TEXT = frozenset({"Name", "Prefix", "Delimiter", "StartAfter", "ContinuationToken",
                  "NextContinuationToken", "EncodingType"})
NUMBERS = frozenset({"MaxKeys", "KeyCount"})


class ListingParser(RestXMLParser):
    """botocore's REST-XML parser, except for a ListObjectsV2 page answered 200: only each
    object's Key and Size (``Contents``), ``CommonPrefixes``' Prefix and the page's scalars."""

    def parse(self, response: dict[str, Any], shape: Any) -> Any:
        if shape is None or shape.name != OUTPUT_SHAPE or response["status_code"] != 200:
            return super().parse(response, shape)
        page = _page(response["body"])
        if page is None:  # not a page botocore would read as one: it says what it is
            return super().parse(response, shape)
        # The headers (RequestCharged), ResponseMetadata and checksums, as botocore makes them.
        parsed = super().parse({**response, "body": b""}, shape)
        parsed.update(page)
        return parsed


class ListingParserFactory(ResponseParserFactory):
    """The listing session's parsers: ``ListingParser`` for REST-XML (S3), botocore's for the
    rest."""

    def create_parser(self, protocol_name: str) -> Any:
        if protocol_name == "rest-xml":
            return ListingParser()
        return super().create_parser(protocol_name)


def _page(body: bytes) -> dict[str, Any] | None:
    """The page's fields as botocore's parser names and types them; None when ``body`` is not
    a well-formed ListBucketResult."""
    root = _root(body)
    if root is None:
        return None
    ns = root.tag[:-len(ROOT)]
    contents_tag, prefixes_tag, prefix_tag = ns + "Contents", ns + "CommonPrefixes", ns + "Prefix"
    page: dict[str, Any] = {}
    contents: list[dict[str, Any]] = []
    prefixes: list[dict[str, Any]] = []
    for element in root:
        if element.tag == contents_tag:
            contents.append(_object(element, ns))
        elif element.tag == prefixes_tag:
            found = element.find(prefix_tag)
            prefixes.append({} if found is None else {"Prefix": found.text or ""})
        else:
            _scalar(page, element.tag[len(ns):], element.text or "")
    # A flattened list with no members is left out of botocore's result, not made empty.
    if contents:
        page["Contents"] = contents
    if prefixes:
        page["CommonPrefixes"] = prefixes
    return page


def _root(body: bytes) -> ElementTree.Element | None:
    # botocore reads S3's XML as UTF-8 whatever its declaration says, and so does this.
    parser = ElementTree.XMLParser(encoding="utf-8")
    try:
        parser.feed(body)
        root = parser.close()
    except ElementTree.ParseError:
        return None
    ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    return root if root.tag == ns + ROOT else None


def _object(element: ElementTree.Element, ns: str) -> dict[str, Any]:
    """An object's Key and Size; an empty element is "", as botocore reads it."""
    item: dict[str, Any] = {}
    key_tag, size_tag = ns + "Key", ns + "Size"
    for field in element:
        if field.tag == key_tag:
            item["Key"] = field.text or ""
        elif field.tag == size_tag:
            item["Size"] = int(field.text or "")
    return item


def _scalar(page: dict[str, Any], name: str, text: str) -> None:
    if name in TEXT:
        page[name] = text
    elif name in NUMBERS:
        page[name] = int(text)
    elif name == "IsTruncated":
        page[name] = text == "true"
