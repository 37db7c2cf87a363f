#!/usr/bin/env python3
"""Whether make push-images pushes an image to a repository, skips it, or must refuse.

    aws ecr batch-get-image ... --output json | containers/push-decision.py ID "REPO_DIGESTS"

reads ECR's BatchGetImage answer for the version tag (stdin) and the local image's ID (its
config digest) and repo digests (``docker image inspect``), and prints one line,
``push|skip|conflict<TAB>why``. The repositories keep immutable tags: a tag pushed once never
moves, so pushing it again fails (ImageTagAlreadyExistsException). A tag already there with
this build's content (the same config digest, or a manifest digest this machine pushed) is
skipped, so a re-run succeeds; with another content it is a conflict: a new build is a new
version.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def decide(answer: dict[str, Any], local_id: str, local_digests: list[str]) -> tuple[str, str]:
    images = answer.get("images") or []
    if not images:
        failures = ", ".join(f.get("failureCode", "?") for f in answer.get("failures") or [])
        return "push", f"not in the repository yet ({failures or 'no image'})"
    image = images[0]
    digest = image.get("imageId", {}).get("imageDigest", "")
    try:
        manifest = json.loads(image.get("imageManifest") or "{}")
    except ValueError:
        manifest = {}
    config = (manifest.get("config") or {}).get("digest", "")
    if (config and config == local_id) or any(d.endswith(f"@{digest}")
                                              for d in local_digests if digest):
        return "skip", f"already there with this build's content ({digest})"
    return "conflict", (f"the tag already holds another image ({digest}, config "
                        f"{config or 'unknown'}; this build is {local_id}): tags are immutable, "
                        "so build a new version (TAG=...) and deploy with it")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    decision, why = decide(json.load(sys.stdin), argv[1], argv[2].split())
    print(f"{decision}\t{why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
