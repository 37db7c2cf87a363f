"""The opaque tokens the API hands its clients to go on from (``GET /runs``' and ``GET /costs``'
``next_token``, a plan's ``GET /plans/{token}``): a JSON document as URL-safe text, and back.

A token is not signed: it holds only what its caller could send in a request of its own (a
position in a list, its filters, a plan's request and listing progress). Whoever reads one
checks every field it uses, as it checks a request; this module only guarantees the document
is bounded JSON (``validation.load_json``: finite numbers, a bounded depth) of at most
``max_bytes`` once inflated.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any

from traingrid.validation import load_json


def encode(document: Any) -> str:
    """``document`` as compact JSON, deflated, in URL-safe base64 without padding."""
    text = json.dumps(document, separators=(",", ":"))
    return base64.urlsafe_b64encode(zlib.compress(text.encode(), 9)).decode().rstrip("=")


def decode(token: str, max_bytes: int) -> Any:
    """The document ``encode`` made; ValueError for anything else, or one that inflates past
    ``max_bytes``."""
    try:
        packed = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        inflate = zlib.decompressobj()
        text = inflate.decompress(packed, max_bytes)
    except (binascii.Error, zlib.error, ValueError) as error:
        raise ValueError(f"not a token: {error}") from None
    if inflate.unconsumed_tail:
        raise ValueError(f"inflates past {max_bytes} bytes")
    if not inflate.eof:
        raise ValueError("not a whole token")
    return load_json(text)
