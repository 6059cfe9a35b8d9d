#!/usr/bin/env python3
"""What a call costs the client itself: the p50 of GET /health (the least a
route does) from httpx, the client of ../shared/bench/honcho_workload.py,
and from a bare keep-alive socket, against a running roncho REST edge, and
optionally the same for any other path (e.g. a session's context).

    client_floor.py BASE_URL [PATH ...]

The difference between the two columns is httpx's own time per call: it is
in every latency the workload reports, whatever the server does.
"""

import socket
import sys
import time
from urllib.parse import urlsplit

import httpx

CALLS = 2000


def p50(samples):
    samples.sort()
    return samples[len(samples) // 2]


def with_httpx(base, path):
    samples = []
    with httpx.Client(base_url=base) as client:
        for _ in range(CALLS // 10):
            client.get(path).read()
        for _ in range(CALLS):
            began = time.perf_counter()
            client.get(path).read()
            samples.append((time.perf_counter() - began) * 1000)
    return p50(samples)


def with_socket(base, path):
    url = urlsplit(base)
    conn = socket.create_connection((url.hostname, url.port))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    request = f"GET {path} HTTP/1.1\r\nHost: {url.hostname}\r\n\r\n".encode()

    def call():
        conn.sendall(request)
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            buffer += conn.recv(65536)
        head, _, body = buffer.partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        while len(body) < length:
            body += conn.recv(65536)

    for _ in range(CALLS // 10):
        call()
    samples = []
    for _ in range(CALLS):
        began = time.perf_counter()
        call()
        samples.append((time.perf_counter() - began) * 1000)
    return p50(samples)


def main() -> int:
    base = sys.argv[1]
    for path in ["/health", *sys.argv[2:]]:
        print(f"{path}: httpx p50 {with_httpx(base, path):.3f} ms, socket p50 {with_socket(base, path):.3f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
