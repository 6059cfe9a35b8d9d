#!/usr/bin/env python3
"""Writes the workspace the console's page benchmark reads: 50,000 messages
in 10 sessions of 5,000 (alice and bob taking turns, 44 words each) and
10,000 conclusions, each learned from one of the messages (so every
conclusion page has a source and 10,000 message pages have what was learned
from them).

    console_data.py BASE_URL WORKSPACE [API_KEY]

Through the REST API, as any client writes; standard library only.
"""

import json
import random
import sys
import urllib.request

WORDS = ("project deadline meeting report budget client manager team email calendar "
         "schedule presentation garden recipe kitchen coffee train museum").split()


def call(base, key, method, path, body=None):
    request = urllib.request.Request(f"{base}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode())
    request.add_header("content-type", "application/json")
    if key:
        request.add_header("authorization", f"Bearer {key}")
    with urllib.request.urlopen(request, timeout=120) as response:
        text = response.read()
        return json.loads(text) if text else None


def main():
    base, workspace = sys.argv[1], sys.argv[2]
    key = sys.argv[3] if len(sys.argv) > 3 else None
    rng = random.Random(60)
    call(base, key, "POST", "/v3/workspaces", {"id": workspace})
    message_ids = []
    for session in range(10):
        call(base, key, "POST", f"/v3/workspaces/{workspace}/sessions",
             {"id": f"s{session}", "peers": {"alice": {}, "bob": {}}})
        for _ in range(50):
            batch = [{"peer_id": ("alice", "bob")[i % 2],
                      "content": " ".join(rng.choice(WORDS) for _ in range(44))} for i in range(100)]
            written = call(base, key, "POST", f"/v3/workspaces/{workspace}/sessions/s{session}/messages",
                           {"messages": batch})
            message_ids.extend((f"s{session}", message["id"], message["peer_id"]) for message in written)
    for start in range(0, 10_000, 100):
        batch = []
        for index in range(start, start + 100):
            session, message, peer = message_ids[index * 5]
            observer = "bob" if peer == "alice" else "alice"
            batch.append({"content": f"{peer} mentioned the {rng.choice(WORDS)} ({index})",
                          "observer_id": observer, "observed_id": peer, "session_id": session,
                          "source_message_ids": [message]})
        call(base, key, "POST", f"/v3/workspaces/{workspace}/conclusions", {"conclusions": batch})
    print(json.dumps({"messages": len(message_ids), "conclusions": 10_000,
                      "a_message": message_ids[0], "sessions": 10}))


if __name__ == "__main__":
    main()
