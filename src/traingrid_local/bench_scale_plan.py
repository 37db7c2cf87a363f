"""``scale.plan_objects``: planning ImageNet's 1,281,167 training JPEGs.

Full size does not fit the emulator: moto keeps about 3 KB a key (4 GB for 1.28 M keys) and
serialises a 1,000-key page in about half a second, so 2,001 pages would take a quarter of an
hour on one core. The emulator lists a sample of the same layout instead (``SAMPLE_FOLDERS``
class folders at ImageNet's sizes) through the Plan step's own code (``training.measure``,
parallel by folder, one bounded part per call), and the full size is modelled on Lambda from:

- the pages: one page of folders, then each folder's ``ceil(objects / 1,000)`` pages;
- ``per_page_ms``, the network time of one page (``PER_PAGE_SOURCE``), pages in flight on
  ``measure.WORKERS`` threads (list scheduling in the order the code submits them);
- ``parse_ms_per_page``, the CPU time to parse one 1,000-key page with the listing client's
  parser (``aws.list_pages``), the median over ``PARSED_PAGES`` full pages the emulator served,
  beside botocore's own on the same pages (``parse_ms_per_page_botocore``, and the ratio); one
  vCPU (the Plan function's 1,769 MB) parses them one at a time, as Python's threads do;
- the listing's time is the larger of the two; each Plan call lists for 45 s at most
  (``plan_step.MARGIN_S`` of its 60 s left), and a loop round trip costs ``LOOP_MS``.

``python -m traingrid_local.bench_scale_plan`` measures and prints it alone.
"""

from __future__ import annotations

import heapq
import json
import math
import resource
import statistics
import sys
import time
from typing import Any

from rich.console import Console

IMAGENET_OBJECTS = 1_281_167
IMAGENET_FOLDERS = 1_000
SMALLEST_FOLDER = 732  # ImageNet 2012's smallest training class
LARGEST_FOLDER = 1_300
SAMPLE_FOLDERS = 12
PAGE_KEYS = 1_000
PER_PAGE_MS = 200.0
PER_PAGE_SOURCE = (
    "AWS whitepaper 'Best Practices Design Patterns: Optimizing Amazon S3 Performance', "
    "Timeouts and Retries for Latency-Sensitive Applications: small requests (< 512 KB) have "
    "median latencies 'in the range of tens of milliseconds'; a 1,000-key ListObjectsV2 page "
    "is ~230 KB of XML, taken at 200 ms, several times that median, to stay on the safe side")
LAMBDA_TIMEOUT_S = 60.0
LOOP_MS = 100.0  # a Choice and a Lambda invocation between two parts, warm
GOAL_S = 60.0
PARSED_PAGES = 5  # full pages whose parsing is timed, each PARSE_RUNS times
PARSE_RUNS = 9
console = Console()


def imagenet_folders() -> list[int]:
    """1,000 class folders summing to 1,281,167: one of 732, the rest of 1,001-1,300."""
    rest = IMAGENET_OBJECTS - SMALLEST_FOLDER
    base, extra = divmod(rest, IMAGENET_FOLDERS - 1)
    return [SMALLEST_FOLDER] + [base + (1 if i < extra else 0)
                                for i in range(IMAGENET_FOLDERS - 1)]


def folder_pages(sizes: list[int]) -> list[int]:
    return [max(1, math.ceil(n / PAGE_KEYS)) for n in sizes]


def network_s(pages: list[int], workers: int, per_page_ms: float) -> float:
    """One page of folders, then the folders' pages on ``workers`` threads, each folder on
    the first free thread in order (a ThreadPoolExecutor's queue)."""
    free = [0.0] * workers
    for count in pages:
        heapq.heapreplace(free, free[0] + count * per_page_ms / 1000)
    return per_page_ms / 1000 + max(free)


def parse_ms_per_page(bodies: list[bytes], parser: str) -> float:
    """CPU ms to parse a 1,000-key page, the median over ``bodies`` and ``PARSE_RUNS`` runs of
    each: ``listing``, the listing client's parser; ``botocore``, botocore's with timestamps
    left as text; ``botocore_timestamps``, botocore's default, which parses every
    LastModified."""
    from botocore.parsers import RestXMLParser

    from traingrid.aws.clients import session
    from traingrid.aws.list_pages import ListingParser

    shape = session().get_service_model("s3").operation_model("ListObjectsV2").output_shape
    made = {"listing": ListingParser, "botocore": lambda: RestXMLParser(timestamp_parser=str),
            "botocore_timestamps": RestXMLParser}[parser]()
    times = []
    for body in bodies:
        for _ in range(PARSE_RUNS):
            started = time.process_time()
            parsed = made.parse({"body": body, "headers": {}, "status_code": 200}, shape)
            times.append((time.process_time() - started) * 1000)
            assert len(parsed["Contents"]) == PAGE_KEYS
    return round(statistics.median(times), 2)


def emulated_sample(folders: list[int]) -> dict[str, Any]:
    """The sample's folders in the emulator's S3, listed by the Plan step's code, a part at a
    time; the wall time, pages, parts, memory a key, and one page's body."""
    from moto.s3.models import FakeKey, s3_backends

    from traingrid.training import measure
    from traingrid_local.emulator.session import Emulator

    bucket, prefix = "bench-scale-plan", "imagenet/train/"
    with Emulator(speed=1.0) as emulator:
        client = emulator.client("s3")
        client.create_bucket(Bucket=bucket)
        account = emulator.client("sts").get_caller_identity()["Account"]
        held = s3_backends[account]["global"].buckets[bucket].keys
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        total = 0
        for f, count in enumerate(folders):
            for i in range(count):
                key = f"{prefix}n{f:08d}/n{f:08d}_{i}.JPEG"
                # Straight into moto's bucket: the same keys as PutObject makes, without
                # a quarter of an hour of requests.
                held[key] = FakeKey(name=key, value=b"", account_id=account,
                                    region_name="us-east-1")
                total += 1
        kb_per_key = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / total
        page_started = time.perf_counter()
        client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}n00000001/")
        one_page_s = time.perf_counter() - page_started
        # Full pages' bodies, for the parse figures (folder 0 is ImageNet's smallest, 732).
        bodies = [_raw_page(client.list_objects_v2, bucket, f"{prefix}n{f:08d}/")
                  for f in range(1, PARSED_PAGES + 1)]
        started = time.perf_counter()
        progress: Any = None
        per_part: list[int] = []
        trace: list[list[int]] = []
        while True:
            budget = measure.budget_for(10**6, LAMBDA_TIMEOUT_S - 15)
            progress, complete = measure.measure_part(bucket, prefix, progress, budget,
                                                      trace=trace)
            per_part.append(budget.used)
            if complete:
                break
        wall = time.perf_counter() - started
    assert progress["objects"] == total, (progress, total)
    return {"objects": total, "wall_s": round(wall, 2), "pages": progress["pages"],
            "parts": progress["parts"], "moto_kb_per_key": round(kb_per_key, 2),
            "moto_page_s": round(one_page_s, 3), "folder_pages": trace, "bodies": bodies}


def _raw_page(list_objects: Any, bucket: str, prefix: str) -> bytes:
    captured: dict[str, bytes] = {}

    def keep(http_response: Any, **_: Any) -> None:
        captured["body"] = http_response.content

    events = list_objects.__self__.meta.events
    events.register("after-call.s3.ListObjectsV2", keep)
    try:
        list_objects(Bucket=bucket, Prefix=prefix)
    finally:
        events.unregister("after-call.s3.ListObjectsV2", keep)
    return captured["body"]


def modelled_s(list_pages: int, network: float, parse_ms: float) -> tuple[float, int, float]:
    """The listing's modelled time on Lambda, its parts, and its CPU seconds: the larger of
    the network's and the parsing's, with a loop round trip between two parts."""
    cpu = list_pages * parse_ms / 1000
    listing = max(network, cpu)
    parts = max(1, math.ceil(listing / (LAMBDA_TIMEOUT_S - 15)))
    return listing + (parts - 1) * LOOP_MS / 1000, parts, cpu


def plan_objects() -> dict[str, Any]:
    from traingrid.training import measure

    full = imagenet_folders()
    sample = emulated_sample(full[:SAMPLE_FOLDERS])
    bodies = sample.pop("bodies")
    parse_ms = parse_ms_per_page(bodies, "listing")
    botocore_ms = parse_ms_per_page(bodies, "botocore")
    timestamps_ms = parse_ms_per_page(bodies, "botocore_timestamps")
    pages = folder_pages(full)
    list_pages = 1 + sum(pages)
    network = network_s(pages, measure.WORKERS, PER_PAGE_MS)
    model, parts, cpu = modelled_s(list_pages, network, parse_ms)
    botocore_model, _, _ = modelled_s(list_pages, network, botocore_ms)
    flat_pages = math.ceil(IMAGENET_OBJECTS / PAGE_KEYS)
    return {
        "objects": IMAGENET_OBJECTS,
        "folders": IMAGENET_FOLDERS,
        "list_pages": list_pages,
        "aws_model_s": round(model, 1),
        "aws_model_parts": parts,
        "aws_model_network_s": round(network, 1),
        "aws_model_cpu_s": round(cpu, 1),
        # Were no page's wait to overlap another's parsing: network and CPU one after another.
        "aws_model_no_overlap_s": round(network + cpu, 1),
        # The same model with botocore's parser (timestamps as text) in the listing client.
        "aws_model_botocore_parser_s": round(botocore_model, 1),
        "per_page_ms": PER_PAGE_MS,
        "per_page_source": PER_PAGE_SOURCE,
        "parse_ms_per_page": parse_ms,
        "parse_ms_per_page_botocore": botocore_ms,
        "parse_botocore_ratio": round(botocore_ms / parse_ms, 1),
        "parse_ms_per_page_timestamps_parsed": timestamps_ms,
        "parse_source": f"measured here: CPU time, median of {PARSED_PAGES} full pages the "
                        f"emulator served x {PARSE_RUNS} runs each; parse_ms_per_page is the "
                        "listing client's parser (aws.list_pages), _botocore botocore's with "
                        "timestamps as text, _timestamps_parsed botocore's default; taken as "
                        "one Lambda vCPU",
        "workers": measure.WORKERS,
        # A single pass with botocore's default, for comparison: one page after another.
        "sequential_model_s": round(flat_pages * (PER_PAGE_MS + timestamps_ms) / 1000, 1),
        "mode": "modelled at full size; the emulator listed a sample of the same layout",
        "emulated": sample,
    }


def measure_into(results: dict[str, Any]) -> None:
    """``make bench``'s hook: ``results["scale"]["plan_objects"]``."""
    console.print("planning ImageNet's 1.28 M objects (a sample on the emulator, modelled)…")
    results.setdefault("scale", {})["plan_objects"] = plan_objects()


def goals(results: dict[str, Any]) -> dict[str, Any]:
    figure = results.get("scale", {}).get("plan_objects", {}).get("aws_model_s")
    if figure is None:
        return {}
    return {"planning 1,281,167 objects, modelled on Lambda": {
        "value": figure, "at_most": GOAL_S, "unit": "s", "met": figure <= GOAL_S}}


def row(results: dict[str, Any]) -> tuple[str, str] | None:
    found = results.get("scale", {}).get("plan_objects")
    if not found:
        return None
    sample = found["emulated"]
    return (f"plan {found['objects']:,} objects ({found['list_pages']:,} pages)",
            f"{found['aws_model_s']} s modelled on Lambda ({found['aws_model_parts']} part(s); "
            f"network {found['aws_model_network_s']} s, CPU {found['aws_model_cpu_s']} s: "
            f"{found['parse_ms_per_page']} ms a page, botocore's "
            f"{found['parse_ms_per_page_botocore']} ms, {found['parse_botocore_ratio']}×; "
            f"a page at a time, botocore's default: {found['sequential_model_s']} s); emulator: "
            f"{sample['objects']:,} objects in {sample['wall_s']} s")


def add_row(table: Any, results: dict[str, Any]) -> None:
    """``make bench``'s table: the row, when the figure was measured."""
    found = row(results)
    if found:
        table.add_row(*found)


def main() -> int:
    results: dict[str, Any] = {}
    measure_into(results)
    shown = dict(results["scale"]["plan_objects"])
    shown["emulated"] = {k: v for k, v in shown["emulated"].items() if k != "folder_pages"}
    console.print_json(json.dumps(shown))
    console.print(row(results))
    console.print(goals(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
