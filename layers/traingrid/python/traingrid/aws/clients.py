"""AWS clients: created lazily, once per process, region-aware and replaceable in tests.

They are botocore's clients, which is all boto3's ``client()`` returns: importing boto3 would
add its S3 transfer manager, unused here, to every cold start.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import botocore.session
from botocore.config import Config

from traingrid.aws.list_pages import ListingParserFactory

# Adaptive mode retries throttling with backoff and client-side rate limiting. A fresh Config
# per client: botocore rewrites the retries dict it is given.
RETRIES = {"mode": "adaptive", "max_attempts": 10}
# Listing a large prefix runs on a time budget: few retries and short socket timeouts, so one
# stuck page costs seconds, not the budget (botocore's read timeout is 60 s, the step's whole
# limit); the step's own Retry takes over from there. A pool as large as the listing's threads
# (botocore's default is 10 connections), so every thread keeps its connection.
LISTING_RETRIES = {"mode": "adaptive", "max_attempts": 3}
LISTING_CONNECTIONS = 16


@cache
def session() -> botocore.session.Session:
    """The process's one botocore session: service models are parsed once."""
    return botocore.session.get_session()


@cache
def client(service: str, region: str | None = None, listing: bool = False) -> Any:
    """A client of ``service``; with ``listing``, from ``listing_session``."""
    if not listing:
        return session().create_client(service, region_name=region,
                                       config=Config(retries=dict(RETRIES)))
    return listing_session().create_client(service, region_name=region, config=Config(
        retries=dict(LISTING_RETRIES), max_pool_connections=LISTING_CONNECTIONS,
        connect_timeout=5, read_timeout=10))


@cache
def listing_session() -> botocore.session.Session:
    """A session for listing large prefixes: its clients parse ListObjectsV2 pages with
    ``list_pages.ListingParser`` (a 1,000-key page in a fraction of botocore's CPU time; of an
    object, only Key and Size are read). It is botocore's ``response_parser_factory`` session
    component (the one ``set_parser_defaults`` configures), on this session alone: every
    other client keeps botocore's parser whole."""
    listing = botocore.session.get_session()
    listing.register_component("response_parser_factory", ListingParserFactory())
    return listing


def reset() -> None:
    """Forget cached clients (after the endpoint or credentials change, e.g. in tests)."""
    client.cache_clear()


def home_region() -> str:
    """The region this code runs in (a Lambda's own)."""
    return client("sts").meta.region_name
