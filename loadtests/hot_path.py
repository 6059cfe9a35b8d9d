#!/usr/bin/env python3
"""Times one kind of call an agent makes every turn against a roncho REST edge
and reports its latency and the server's CPU time per call.

    hot_path.py BASE_URL WORKSPACE KIND CALLS [SERVER_PID]

KIND: context (GET session context of s0, 4,000 tokens), list (a random page
of s0's messages, SIZE per page, default 100), filtered (a random page of
s0's messages by alice: the general way, counted, not a range of numbers),
sessions (a page of the workspace's sessions, SIZE per page) or ingest (100
messages of 44 words into four other sessions). One client, one keep-alive connection, the
calls back to back after 50 untimed ones. With SERVER_PID, the server's user
and system CPU over the timed calls (from /proc) divided by CALLS: on a noisy
two-core machine a steadier measure than latency. Used by
loadtests/run-hot-path.sh on a workspace written by ../shared/bench's
honcho_workload.py (session s0 holds 5,000 messages).
"""

import json
import os
import random
import sys
import time

import httpx

WORDS = ("project deadline meeting report budget client manager team email calendar "
         "schedule presentation garden recipe kitchen coffee train museum").split()


def request(client: httpx.Client, workspace: str, kind: str, size: int, rng: random.Random):
    if kind == "context":
        return client.get(f"/v3/workspaces/{workspace}/sessions/s0/context?tokens=4000")
    if kind == "list":
        page = rng.randint(1, 5000 // size)
        return client.post(f"/v3/workspaces/{workspace}/sessions/s0/messages/list?page={page}&size={size}",
                           content=b"{}", headers={"content-type": "application/json"})
    if kind == "filtered":
        page = rng.randint(1, 2500 // size)
        return client.post(f"/v3/workspaces/{workspace}/sessions/s0/messages/list?page={page}&size={size}",
                           content=b'{"filters": {"peer_id": "alice"}}', headers={"content-type": "application/json"})
    if kind == "sessions":
        return client.post(f"/v3/workspaces/{workspace}/sessions/list?page=1&size={size}",
                           content=b"{}", headers={"content-type": "application/json"})
    if kind == "ingest":
        body = json.dumps({"messages": [
            {"peer_id": ("alice", "bob")[i % 2], "content": " ".join(rng.choice(WORDS) for _ in range(44))}
            for i in range(100)]}).encode()
        return client.post(f"/v3/workspaces/{workspace}/sessions/h{rng.randint(0, 3)}/messages", content=body,
                           headers={"content-type": "application/json"})
    raise SystemExit(f"unknown kind {kind}")


def cpu_ms(pid: str | None) -> float:
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def main() -> int:
    base, workspace, kind, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    pid = sys.argv[5] if len(sys.argv) > 5 else None
    size = int(os.environ.get("SIZE", "100"))
    rng = random.Random(7)
    latencies = []
    with httpx.Client(base_url=base, timeout=60) as client:
        for _ in range(50):
            request(client, workspace, kind, size, rng).raise_for_status()
        started = cpu_ms(pid)
        for _ in range(calls):
            began = time.perf_counter()
            response = request(client, workspace, kind, size, rng)
            response.read()
            latencies.append((time.perf_counter() - began) * 1000)
            response.raise_for_status()
        spent = cpu_ms(pid) - started
    latencies.sort()
    at = lambda q: latencies[min(len(latencies) - 1, int(len(latencies) * q))]  # noqa: E731
    line = f"{kind:<8} p50 {at(0.5):6.2f}  p90 {at(0.9):6.2f}  p99 {at(0.99):6.2f} ms"
    if pid is not None:
        line += f"  server CPU {spent / calls:5.2f} ms/call"
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
