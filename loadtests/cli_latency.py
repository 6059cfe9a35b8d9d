#!/usr/bin/env python3
"""Times roncho's one-shot commands from process start to the last byte of
output: 30 runs each, median and 90th percentile.

    cli_latency.py RONCHO_BINARY (BASE_URL | DATA_DIR) WORKSPACE [SESSION]

Against a running server (BASE_URL), or straight from an embedded data
directory no server holds (DATA_DIR: each command runs the server in its
own process; the environment's RONCHO_EMBEDDING_PROVIDER says whether it
loads the local model). Used on the data of loadtests/run-hot-path.sh
(workspace `hot`: 50,000 messages, session s0 of 5,000); a server is run
with `--roles ingest,recall`. The last row, an export of the whole
workspace, runs 3 times.
"""

import os
import statistics
import subprocess
import sys
import time


def timed(args: list[str], runs: int = 30) -> tuple[int, int, float, float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(args, capture_output=True, check=False)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return done.returncode, len(done.stdout.splitlines()), statistics.median(times), times[int(runs * 0.9)]


def main() -> int:
    binary, base, workspace = sys.argv[1:4]
    session = sys.argv[4] if len(sys.argv) > 4 else "s0"
    place = ["--data-dir", base] if os.path.isdir(base) else ["--addr", base]
    reach = [*place, "--workspace", workspace]
    rows = [
        ("roncho --version (process start)", [binary, "--version"]),
        ("search, whole workspace", [binary, "search", "deadline meeting", *reach]),
        ("search --session", [binary, "search", "deadline meeting", "--session", session, *reach]),
        ("context, 4,000 tokens", [binary, "context", session, "--tokens", "4000", *reach]),
        ("conclusions, newest 10", [binary, "conclusions", *reach]),
    ]
    print("| command | exit | lines | p50 ms | p90 ms |")
    print("|---|---|---|---|---|")
    for name, args in rows:
        code, lines, p50, p90 = timed(args)
        print(f"| {name} | {code} | {lines} | {p50:.1f} | {p90:.1f} |")
    code, lines, p50, p90 = timed([binary, "export", *reach], runs=3)
    print(f"| export, whole workspace (3 runs) | {code} | {lines} | {p50:.1f} | {p90:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
