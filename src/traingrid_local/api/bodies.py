"""What the local servers (``traingrid serve``, ``traingrid console --stack``) read of a
request's body, and the JSON they answer with, shaped as the API function's answers
(``statusCode``, ``headers``, ``body``).

A body is at most MAX_BODY bytes however it is framed: ``Content-Length``, or
``Transfer-Encoding: chunked``, which declares no length. A server's own routes (not the API's)
take settings, like a command's options: an object whose values are text, lists of text or
null.
"""

from __future__ import annotations

import json
from typing import Any

from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge
from werkzeug.wrappers import Request

from traingrid.validation import load_json

MAX_BODY = 6 * 1024 * 1024  # Lambda's request payload limit
Answer = dict[str, Any]
Settings = dict[str, str | list[str] | None]


def json_answer(status: int, body: Any, headers: dict[str, str] | None = None) -> Answer:
    return {"statusCode": status, "headers": {"Content-Type": "application/json"} | (
        headers or {}), "body": json.dumps(body)}


def invalid(problem: str, message: str | None = None) -> Answer:
    """A 400 shaped as the API's own, its one problem the whole body."""
    return json_answer(400, {"message": message or problem, "problem_count": 1,
                             "problems": [{"pointer": "", "message": problem}]})


class LimitedRequest(Request):
    """Reads a body up to one byte over MAX_BODY: Werkzeug stops a chunked body at its limit
    without a word, so the byte more shows it was over."""

    max_content_length = MAX_BODY + 1


def read_body(request: Request) -> tuple[bytes, Answer | None]:
    """(the body, None), or (b"", the JSON error): a 413 for a body over MAX_BODY, a 400 for
    one whose chunked framing is broken or that ended early."""
    too_large = json_answer(413, {"message": f"request body over {MAX_BODY} bytes"})
    try:
        body = request.get_data(cache=False)
    except RequestEntityTooLarge:
        return b"", too_large
    except (ClientDisconnected, OSError) as error:
        why = error.__context__ if isinstance(error, ClientDisconnected) else error
        return b"", invalid(f"the body could not be read ({why or 'it ended early'}): send it "
                            f"with a Content-Length, or chunked as HTTP/1.1 frames it")
    return (b"", too_large) if len(body) > MAX_BODY else (body, None)


def _text(value: Any) -> bool:
    return value is None or isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(item, str) for item in value))


def settings_of(body: bytes) -> tuple[Settings | None, Answer | None]:
    """(a local route's settings, None: none when the body is empty), or (None, a 400)."""
    try:
        settings = load_json(body) if body else None
    except ValueError as error:
        return None, invalid(f"the body is not JSON: {error}")
    if settings is not None and not isinstance(settings, dict):
        return None, invalid(f"the body must be a JSON object, not {type(settings).__name__}")
    if settings is not None and not all(_text(value) for value in settings.values()):
        return None, invalid("every value of the body must be text, a list of text or null")
    return settings, None
