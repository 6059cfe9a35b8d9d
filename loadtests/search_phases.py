"""Searches of the Honcho workload's shape against a running server, one
client, back to back: the workload's own queries (../shared/bench/
honcho_workload.py, seed 42: 1-3 content words of S0's messages), limit 10,
scoped to session s0 or to the workspace.

  search_phases.py --base-url URL --workspace W --scope session|workspace
                   [--seconds S] [--label L]

Without --seconds: the 210 queries once (the workload's 10 warm-up and 200
timed). With it: the queries over and over for S seconds, and the p50 of
each second (to follow a text index catching up). Prints one line of
p50 / p90 / p99 in ms.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import sys
import time

import httpx


def workload_queries(path: str) -> list[str]:
    spec = importlib.util.spec_from_file_location("honcho_workload", path)
    workload = importlib.util.module_from_spec(spec)
    sys.modules["honcho_workload"] = workload
    spec.loader.exec_module(workload)
    # As the workload generates them: S0's 50 batches of 100, then the queries.
    rng = random.Random(42)
    _, s0_texts = workload.make_batches(workload.Corpus(42), rng, 50, 100, ("alice", "bob"))
    return workload.make_queries(random.Random(43), s0_texts, 210)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--scope", choices=("session", "workspace"), required=True)
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--label", default="")
    parser.add_argument(
        "--workload",
        default=os.environ.get("RONCHO_HONCHO_WORKLOAD", "../shared/bench/honcho_workload.py"),
    )
    args = parser.parse_args()
    queries = workload_queries(args.workload)
    base = f"{args.base_url}/v3/workspaces/{args.workspace}"
    url = f"{base}/sessions/s0/search" if args.scope == "session" else f"{base}/search"
    latencies: list[float] = []
    seconds: dict[int, list[float]] = {}
    started = time.perf_counter()
    with httpx.Client(timeout=60) as client:
        index = 0
        while True:
            if args.seconds <= 0 and index == len(queries):
                break
            if args.seconds > 0 and time.perf_counter() - started >= args.seconds:
                break
            query = queries[index % len(queries)]
            index += 1
            sent = time.perf_counter()
            response = client.post(url, json={"query": query, "limit": 10})
            response.raise_for_status()
            took = (time.perf_counter() - sent) * 1000
            latencies.append(took)
            seconds.setdefault(int(sent - started), []).append(took)
    by_second = ""
    if args.seconds > 0:
        by_second = "; p50 by second: " + " ".join(f"{percentile(v, 0.5):.1f}" for _, v in sorted(seconds.items()))
    print(
        f"{args.label}{args.scope} search: {len(latencies)} calls, p50 {percentile(latencies, 0.5):.2f} / "
        f"p90 {percentile(latencies, 0.9):.2f} / p99 {percentile(latencies, 0.99):.2f} ms{by_second}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
