#!/usr/bin/env python3
"""Pages through every list while other clients write, over kept-alive
connections, and counts the calls that failed: a 5xx, or a connection the
server closed without an answer.

    lists_churn.py BASE_URL SECONDS

Six writer threads make and delete workspaces w0..w3, their peers and
sessions, and append batches of messages; eight reader threads page
through the workspaces, peers, sessions, scopes, a peer's sessions and a
session's messages. Prints the count of each status and each failure
(with the request before it on that thread). Used for
docs/benchmarks.md, "Every body read before the route"; start the server
with `--roles ingest,recall` and no model.
"""

import collections
import random
import sys
import threading
import time

import httpx


def main() -> int:
    base, seconds = sys.argv[1], float(sys.argv[2])
    stop = time.time() + seconds
    failures: collections.Counter = collections.Counter()
    counts: collections.Counter = collections.Counter()

    def writer(seed: int) -> None:
        client, rng = httpx.Client(base_url=base, timeout=30), random.Random(seed)
        while time.time() < stop:
            workspace = f"w{rng.randint(0, 3)}"
            op = rng.random()
            try:
                if op < 0.3:
                    client.post("/v3/workspaces", json={"id": workspace})
                    client.post(f"/v3/workspaces/{workspace}/peers", json={"id": f"p{rng.randint(0, 5)}"})
                elif op < 0.6:
                    session = f"s{rng.randint(0, 5)}"
                    client.post(f"/v3/workspaces/{workspace}/sessions", json={"id": session})
                    batch = [{"peer_id": f"p{rng.randint(0, 5)}", "content": "hello there"}
                             for _ in range(rng.randint(1, 50))]
                    client.post(f"/v3/workspaces/{workspace}/sessions/{session}/messages", json={"messages": batch})
                elif op < 0.8:
                    client.delete(f"/v3/workspaces/{workspace}/sessions/s{rng.randint(0, 5)}")
                elif op < 0.9:
                    client.delete(f"/v3/workspaces/{workspace}/peers/p{rng.randint(0, 5)}")
                else:
                    client.delete(f"/v3/workspaces/{workspace}")
                counts["writes"] += 1
            except httpx.HTTPError as error:
                failures[f"writer: {type(error).__name__}: {error}"] += 1

    def reader(seed: int) -> None:
        client, rng = httpx.Client(base_url=base, timeout=30), random.Random(100 + seed)
        before = None
        while time.time() < stop:
            workspace = f"w{rng.randint(0, 3)}"
            path = rng.choice([
                "/v3/workspaces/list",
                f"/v3/workspaces/{workspace}/peers/list",
                f"/v3/workspaces/{workspace}/sessions/list",
                f"/v3/workspaces/{workspace}/scopes/list",
                f"/v3/workspaces/{workspace}/peers/p{rng.randint(0, 5)}/sessions",
                f"/v3/workspaces/{workspace}/sessions/s{rng.randint(0, 5)}/messages/list",
            ])
            try:
                reply = client.post(f"{path}?page={rng.randint(1, 3)}&size={rng.choice([1, 7, 50])}", json={})
                counts[reply.status_code] += 1
                if reply.status_code >= 500:
                    failures[f"{reply.status_code} {path}: {reply.text[:200]}"] += 1
            except httpx.HTTPError as error:
                failures[f"{path}: {type(error).__name__}: {error} (after {before})"] += 1
            before = path

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    threads += [threading.Thread(target=reader, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(dict(counts))
    print(f"failed calls: {sum(failures.values())}")
    for failure, count in failures.most_common(20):
        print(count, failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
