#!/usr/bin/env python3
"""Replays an afternoon's attacks on a running `roncho serve` (keys on) and
prints what held. Driven by loadtests/run-attack.sh, which starts the
release build; exits 1 when anything got through.

Attacks, each against loopback only:
  webhooks     every spelling of loopback the HTTP client's parser accepts,
               registered with a workspace key, against a listener on loopback
  protobuf     a Struct nested 20,000 levels, truncated messages, bad UTF-8
  half-open    N connections from other loopback addresses sending half a
               request head (REST) or nothing (gRPC), while /health and an
               authenticated call are timed, and RSS is read before, during
               and after
  slow bodies  600 requests from one workspace's key sending their bodies a
               byte every 2 s, while another workspace's calls are timed
  replay       a batch retried with its Idempotency-Key after one of its
               messages was erased
  data files   the data directory scanned for erased text once the erasure's
               receipt says its bytes were overwritten (60 s at most)
  watch        100,000 health Watch streams asked for on 400 connections
               (no key needed), RSS before, with them and after they close
  stages       each stage of a connection started and not finished: HTTP/2's
               opening at several byte offsets on gRPC and REST, an HTTP/1
               head, a body on REST and on /mcp (a peer key's); each must be
               closed within its timeout
  webhooks metered
               TestWebhook called as fast as possible: refused past its rate
  idle HTTP/2  as many connections as the half-open flood that open HTTP/2
               and keep it alive (SETTINGS, PINGs) without ever asking for
               anything, while the checks are timed: they hold no place a
               new client needs

Needs grpcio (the Python client's venv). Standard library otherwise.
"""
import argparse
import asyncio
import http.server
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

import grpc

LOOPBACK_SPELLINGS = [
    "http://127.0.0.1:{port}/", "http://127.0.0.1.:{port}/", "http://127.1:{port}/",
    "http://127.0.0.2:{port}/", "http://0x7f.1:{port}/", "http://0x7f000001:{port}/",
    "http://2130706433:{port}/", "http://0177.0.0.1:{port}/", "http://017700000001:{port}/",
    "http://\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11:{port}/", "http://127\u30020\u30020\u30021:{port}/",
    "http://\u2460\u2461\u2466.0.0.1:{port}/", "http://%31%32%37.0.0.1:{port}/", "http://127.0.0.1%2e:{port}/",
    "http://127.0.0.1:{port}\\@example.com/", "http:/\\127.0.0.1:{port}/", "http:127.0.0.1:{port}/",
    "http://127.0.0.\t1:{port}/", "http://user:pass@127.0.0.1:{port}/", "http://example.com@127.0.0.1:{port}/",
    "http://example.com:80@127.0.0.1:{port}/", "HTTP://127.0.0.1:{port}/", "https://127.0.0.1:{port}/",
    "http://0:{port}/", "http://0.0.0.0:{port}/", "http://[::]:{port}/", "http://[::1]:{port}/",
    "http://[0:0:0:0:0:0:0:1]:{port}/", "http://[::ffff:127.0.0.1]:{port}/", "http://[::ffff:7f00:1]:{port}/",
    "http://[::127.0.0.1]:{port}/", "http://localhost:{port}/", "http://LOCALHOST.:{port}/",
    "http://%6c%6fcalhost:{port}/", "http://api.localhost:{port}/", "http://\uff4cocalhost:{port}/",
]
# Spellings of other inside ranges (private, link-local, NAT64, 6to4, ...)
# are checked by parsing alone in roncho-core's unit tests: registered here,
# a vulnerable build would try to deliver to them, and this machine's traffic
# must stay on loopback.

results = []


def report(name, held, detail):
    results.append((name, held, detail))
    print(f"{'HELD' if held else 'FAILED':6}  {name}: {detail}", flush=True)


def rest_call(base, method, path, key, body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("authorization", f"Bearer {key}")
    if data is not None:
        request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, None
    except Exception:  # a refused or reset connection
        return 0, None


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def webhooks(args):
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            hits.append(self.path)
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"internal secret")

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    accepted = []
    spellings = [s.replace("{port}", str(port)) for s in LOOPBACK_SPELLINGS]
    for url in spellings:
        # CreateWebhook is metered (a name is looked up): wait out its rate.
        status = 429
        while status == 429:
            status, _ = rest_call(args.rest, "POST", "/v3/workspaces/loud/webhooks", args.loud, {"url": url})
            if status == 429:
                time.sleep(2)
        if status not in (400, 422):
            accepted.append((url, status))
    # Whatever was stored would be called by the test event.
    rest_call(args.rest, "GET", "/v3/workspaces/loud/webhooks/test", args.loud)
    time.sleep(2)
    server.shutdown()
    report("webhook spellings", not accepted and not hits,
           f"{len(spellings)} spellings of loopback, {len(accepted)} accepted "
           f"{accepted[:3]}, {len(hits)} deliveries reached the loopback listener")


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value == 0:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def nested_struct(depth):
    """GetOrCreateWorkspaceRequest{id: "w", metadata: {"a": {"a": ...}}}, built outside in."""
    sizes, headers = [0], []
    for level in range(depth):
        inner = sizes[level]
        value = 1 + len(varint(inner)) + inner
        entry = 4 + len(varint(value)) + value
        sizes.append(1 + len(varint(entry)) + entry)
        headers.append((entry, value, inner))
    out = bytearray(b"\x0a\x01w\x12" + varint(sizes[depth]))
    for entry, value, inner in reversed(headers):
        out += b"\x0a" + varint(entry) + b"\x0a\x01a\x12" + varint(value) + b"\x2a" + varint(inner)
    return bytes(out)


def protobuf(args):
    channel = grpc.insecure_channel(args.grpc, options=[("grpc.max_send_message_length", 64 << 20)])
    metadata = (("authorization", f"Bearer {args.admin}"),)
    cases = [
        ("/roncho.v1.IngestService/GetOrCreateWorkspace", "Struct nested 20,000 levels", nested_struct(20_000)),
        ("/roncho.v1.IngestService/CreateMessages", "truncated", b"\x0a\x05a"),
        ("/roncho.v1.IngestService/GetOrCreateWorkspace", "bad UTF-8", b"\x0a\x02\xff\xfe"),
        ("/roncho.v1.RecallService/SearchMessages", "field number 0", b"\x02\x00"),
        ("/roncho.v1.DialecticService/Chat", "truncated", b"\x12\x7fabc"),
    ]
    wrong = []
    for path, what, body in cases:
        call = channel.unary_unary(path)
        try:
            call(body, metadata=metadata, timeout=30)
            wrong.append(f"{what} on {path}: OK")
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.INVALID_ARGUMENT:
                wrong.append(f"{what} on {path}: {error.code().name}")
    report("malformed protobuf", not wrong, f"{len(cases)} cases, not INVALID_ARGUMENT: {wrong or 'none'}")


async def timed_checks(args, stop, samples):
    """Times GET /health and an authenticated call every 250 ms until `stop`."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        for name, call in (
            ("health", lambda: rest_call(args.rest, "GET", "/health", args.quiet, timeout=5)),
            ("call", lambda: rest_call(args.rest, "POST", "/v3/workspaces/quiet/sessions/list", args.quiet, {}, 5)),
        ):
            started = time.monotonic()
            status, _ = await loop.run_in_executor(None, call)
            samples.append((name, status, time.monotonic() - started))
        await asyncio.sleep(0.25)


H2_OPENING = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
H2_PING = bytes([0, 0, 8, 6, 0, 0, 0, 0, 0]) + bytes(8)


async def flood(rest, grpc_target, sources, count, wait, mode="half-open"):
    """One flooding process: opens `count` connections from `sources` —
    half-open (half a request head on REST, nothing on gRPC), or `h2-idle`
    (HTTP/2's preface and SETTINGS, then a PING a second, never a request)
    — says how many on stdout, then waits for the server to close them and
    says how many it did not close within `wait` seconds."""
    host, grpc_port = grpc_target.rsplit(":", 1)
    rest_host, rest_port = rest.removeprefix("http://").rsplit(":", 1)
    readers, failed = [], 0

    async def open_one(index):
        nonlocal failed
        to_rest = index % 2 == 0
        try:
            reader, writer = await asyncio.open_connection(
                rest_host if to_rest else host, int(rest_port if to_rest else grpc_port),
                local_addr=(sources[index % len(sources)], 0))
            if mode == "h2-idle":
                writer.write(H2_OPENING)
                await writer.drain()
            elif to_rest:
                writer.write(b"POST /v3/workspaces HTTP/1.1\r\nHost: roncho\r\nContent-Ty")
                await writer.drain()
            readers.append((reader, writer))
        except OSError:
            failed += 1

    started = time.monotonic()
    for batch in range(0, count, 500):
        await asyncio.gather(*(open_one(i) for i in range(batch, min(batch + 500, count))))
    print(json.dumps({"opened": len(readers), "failed": failed, "seconds": time.monotonic() - started}), flush=True)

    deadline = time.monotonic() + wait

    async def closed(reader):
        try:
            while await asyncio.wait_for(reader.read(4096), timeout=max(0.01, deadline - time.monotonic())):
                pass
            return True
        except (asyncio.TimeoutError, OSError):
            return False

    async def chatter(writer):
        while mode == "h2-idle" and not writer.is_closing():
            await asyncio.sleep(1)
            try:
                writer.write(H2_PING)
                await writer.drain()
            except (ConnectionError, OSError):
                return

    chatting = [asyncio.create_task(chatter(w)) for _, w in readers]
    still_open = sum(1 for ok in await asyncio.gather(*(closed(r) for r, _ in readers)) if not ok)
    for task in chatting:
        task.cancel()
    print(json.dumps({"still_open": still_open, "seconds": time.monotonic() - started}), flush=True)
    for _, writer in readers:
        writer.close()


# How long after its last connection opened a flood waits, past the
# server's timeout, for each to be closed: a connection's timers start when
# the server accepts it, and on a loaded 2-core machine the last of 20,000
# are accepted seconds after the client saw them open (in the kernel's
# queue, the server has not seen them yet).
ACCEPT_LAG = 15


async def flood_while_checked(args, mode, subnet):
    """Floods from `--connections / 9,000` processes (a process holds fewer
    descriptors than N), from `--sources` addresses each in `subnet`, in
    `mode`, while the checks run from 127.0.0.1. Returns what the processes
    said when their connections were open and when they were closed, the
    checks' samples, the process count and RSS before, at the peak and
    after."""
    baseline = rss_mb(args.pid)
    stop, samples = asyncio.Event(), []
    checks = asyncio.create_task(timed_checks(args, stop, samples))
    processes = max(1, -(-args.connections // 9_000))
    per_process = args.connections // processes
    children = []
    for n in range(processes):
        sources = ",".join(f"{subnet}.{2 + n * args.sources + i}" for i in range(args.sources))
        children.append(await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--flood", args.rest, args.grpc, sources, str(per_process),
            str(args.header_timeout + ACCEPT_LAG), mode, stdout=asyncio.subprocess.PIPE))
    opened = [json.loads(await child.stdout.readline()) for child in children]
    peak = rss_mb(args.pid)
    closed = [json.loads(await child.stdout.readline()) for child in children]
    for child in children:
        await child.wait()
    stop.set()
    await checks
    # Freed memory is handed back at the server's next look for a passed
    # flood (every 5 s): RSS after is its lowest within 8 s.
    after = peak
    for _ in range(16):
        await asyncio.sleep(0.5)
        after = min(after, rss_mb(args.pid))
    return opened, closed, samples, processes, (baseline, peak, after)


async def half_open(args):
    """N half-open connections while the checks run from 127.0.0.1."""
    opened, closed, samples, processes, (baseline, peak, after) = await flood_while_checked(
        args, "half-open", "127.0.0")
    bad = [s for s in samples if s[1] != 200]
    slowest = max((s[2] for s in samples), default=0)
    still_open = sum(c["still_open"] for c in closed)
    report("half-open connections", still_open == 0 and not bad and after <= baseline * 1.2 + 1,
           f"{sum(o['opened'] for o in opened)} opened ({sum(o['failed'] for o in opened)} failed) by {processes} "
           f"processes from {processes * args.sources} addresses in {max(o['seconds'] for o in opened):.1f} s, "
           f"{still_open} left open {max(c['seconds'] for c in closed):.1f} s after the first; {len(samples)} checks "
           f"during, {len(bad)} not 200, slowest {slowest * 1000:.0f} ms; RSS {baseline:.0f} MB before, {peak:.0f} MB "
           f"with the flood, {after:.0f} MB after")


async def slow_bodies(args):
    rest_host, rest_port = args.rest.removeprefix("http://").rsplit(":", 1)
    head = (f"POST /v3/workspaces/loud/sessions/list HTTP/1.1\r\nHost: roncho\r\nAuthorization: Bearer {args.loud}\r\n"
            "Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n{").encode()
    connections, statuses = [], {}

    async def flood_one():
        try:
            reader, writer = await asyncio.open_connection(rest_host, int(rest_port), local_addr=("127.0.0.200", 0))
            writer.write(head)
            await writer.drain()
            connections.append((reader, writer))
        except OSError:
            statuses["refused"] = statuses.get("refused", 0) + 1

    await asyncio.gather(*(flood_one() for _ in range(600)))
    started = time.monotonic()

    async def trickle():
        while time.monotonic() - started < args.body_timeout + 10:
            for _, writer in connections:
                if not writer.is_closing():
                    writer.write(b" ")
            await asyncio.sleep(2)

    async def answer(reader):
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=args.body_timeout + 15)
            code = line.split()[1].decode() if len(line.split()) > 1 else "closed"
        except (asyncio.TimeoutError, OSError, IndexError):
            code = "none"
        statuses[code] = statuses.get(code, 0) + 1

    trickling = asyncio.create_task(trickle())
    answers = asyncio.gather(*(answer(reader) for reader, _ in connections))
    loop = asyncio.get_running_loop()
    quiet_bad, loud_back, loud_first = 0, None, None
    while time.monotonic() - started < args.body_timeout + 8:
        status, _ = await loop.run_in_executor(
            None, lambda: rest_call(args.rest, "POST", "/v3/workspaces/quiet/sessions/list", args.quiet, {}, 5))
        quiet_bad += status != 200
        status, _ = await loop.run_in_executor(
            None, lambda: rest_call(args.rest, "POST", "/v3/workspaces/loud/sessions/list", args.loud, {}, 5))
        if loud_first is None:
            loud_first = status
        if status == 200 and loud_back is None:
            loud_back = time.monotonic() - started
        await asyncio.sleep(0.25)
    await answers
    trickling.cancel()
    for _, writer in connections:
        writer.close()
    held = quiet_bad == 0 and loud_back is not None and loud_back <= args.body_timeout + 2
    report("slow bodies", held,
           f"600 slow requests from one workspace's key: their answers {dict(sorted(statuses.items()))}; another "
           f"workspace's calls not 200: {quiet_bad}; the flooding workspace's own call answered {loud_first} at first "
           f"and 200 again after {loud_back if loud_back is None else round(loud_back, 1)} s (body timeout "
           f"{args.body_timeout} s)")


def replay_and_data_files(args):
    admin, base = args.admin, args.rest
    rest_call(base, "POST", "/v3/workspaces", admin, {"id": "replay"})
    rest_call(base, "POST", "/v3/workspaces/replay/sessions", admin, {"id": "s"})
    marker = "qzxwvkjplmbrtq"
    batch = {"messages": [{"peer_id": "alice", "content": f"my passphrase is {marker} and nobody knows"},
                          {"peer_id": "alice", "content": "see you at the gym"}]}

    def post():
        request = urllib.request.Request(f"{base}/v3/workspaces/replay/sessions/s/messages",
                                         data=json.dumps(batch).encode(), method="POST")
        request.add_header("authorization", f"Bearer {admin}")
        request.add_header("content-type", "application/json")
        request.add_header("idempotency-key", "batch-1")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    first = post()
    secret = first[0]["id"]
    request = urllib.request.Request(f"{base}/v3/workspaces/replay/sessions/s/messages/{secret}", method="DELETE")
    request.add_header("authorization", f"Bearer {admin}")
    with urllib.request.urlopen(request, timeout=10) as response:
        receipt = json.loads(response.read())
    again = post()
    _, page = rest_call(base, "POST", "/v3/workspaces/replay/sessions/s/messages/list", admin, {})
    left = [m["content"] for m in (page or {}).get("items", [])]
    report("replay after erasure", [m["content"] for m in again] == ["see you at the gym"] and left == [
        "see you at the gym"], f"the retry answered {len(again)} message(s); the session holds {left}")

    started, overwritten = time.monotonic(), None
    while time.monotonic() - started < 60 and not overwritten:
        _, now = rest_call(base, "GET", f"/v3/workspaces/replay/erasures/{receipt['id']}", admin)
        overwritten = (now or {}).get("bytes_overwritten_at")
        time.sleep(0.5)
    waited = time.monotonic() - started
    found = []
    windows = {marker[i:i + 6].encode() for i in range(len(marker) - 5)}
    for name in os.listdir(args.data_dir):
        path = os.path.join(args.data_dir, name)
        if os.path.isfile(path):
            with open(path, "rb") as file:
                data = file.read()
            found += [f"{w.decode()} in {name}" for w in windows if w in data]
    report("erased text in the data files", overwritten is not None and not found,
           f"receipt bytes_overwritten_at {overwritten} after {waited:.1f} s; traces of the erased text in "
           f"{args.data_dir}: {found or 'none'}")


async def watch_flood(args, connections=400, per_connection=250):
    """Health Watch streams need no key: ask for `connections` ×
    `per_connection` of them, hold what is granted, then let all go."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    baseline = rss_mb(args.pid)
    channels = [grpc.aio.insecure_channel(args.grpc, options=[("grpc.use_local_subchannel_pool", 1),
                                                             ("grpc.http2.max_pings_without_data", 0)])
                for _ in range(connections)]
    granted, refused, other = [], 0, []

    async def one(channel):
        nonlocal refused
        call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
        try:
            await asyncio.wait_for(call.read(), timeout=30)
            granted.append(call)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                refused += 1
            else:
                other.append(error.code().name)
        except asyncio.TimeoutError:
            other.append("no answer in 30 s")
            call.cancel()

    started = time.monotonic()
    for channel in channels:
        await asyncio.gather(*(one(channel) for _ in range(per_connection)))
    asked = time.monotonic() - started
    during = rss_mb(args.pid)
    for call in granted:
        call.cancel()
    for channel in channels:
        await channel.close()
    # The server hands freed memory back once the flood has passed (a check every 5 s).
    await asyncio.sleep(12)
    after = rss_mb(args.pid)
    held = not other and len(granted) <= 2_048 and after <= baseline * 1.2 + 1
    report("health Watch streams", held,
           f"{connections * per_connection} asked on {connections} connections in {asked:.0f} s: {len(granted)} "
           f"granted, {refused} refused, other {sorted(set(other))[:3] or 'none'}; RSS {baseline:.0f} MB before, "
           f"{during:.0f} MB with them, {after:.0f} MB after")


async def stages(args, key):
    """Every stage of a connection started and left unfinished is closed
    within its timeout, whatever bytes of it arrived."""
    host, grpc_port = args.grpc.rsplit(":", 1)
    rest_host, rest_port = args.rest.removeprefix("http://").rsplit(":", 1)
    opening = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100])
    cases = []
    for offset in (1, 12, 23, 24, 30, 33, 38):
        cases.append((f"gRPC, HTTP/2 opening cut at {offset}", host, grpc_port, opening[:offset], args.header_timeout))
        cases.append((f"REST, HTTP/2 opening cut at {offset}", rest_host, rest_port, opening[:offset],
                      args.header_timeout))
    cases.append(("REST, half a head", rest_host, rest_port, b"POST /v3/workspaces HTTP/1.1\r\nHost: 127.0.0.1\r\nCont",
                  args.header_timeout))
    for path in ("/v3/workspaces/quiet/sessions/list", "/mcp"):
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                "Content-Length: 100000\r\n\r\n{").encode()
        cases.append((f"a body that never comes on {path}", rest_host, rest_port, head, args.body_timeout))

    async def one(name, to_host, port, data, timeout):
        reader, writer = await asyncio.open_connection(to_host, int(port), local_addr=("127.0.0.9", 0))
        writer.write(data)
        await writer.drain()
        started = time.monotonic()
        try:
            while await asyncio.wait_for(reader.read(4096), timeout=timeout + 10):
                pass
            return name, True, time.monotonic() - started
        except (asyncio.TimeoutError, OSError):
            return name, False, time.monotonic() - started
        finally:
            writer.close()

    outcomes = await asyncio.gather(*(one(*case) for case in cases))
    still_open = [name for name, closed, _ in outcomes if not closed]
    slowest = max(seconds for _, _, seconds in outcomes)
    report("unfinished connection stages", not still_open,
           f"{len(cases)} stages left unfinished, each closed within its timeout + {slowest - max(args.header_timeout, args.body_timeout):.1f} s "
           f"at most; still open: {still_open or 'none'}")


async def idle_http2(args):
    """N connections that open HTTP/2 and keep it alive (SETTINGS, a PING a
    second) without ever asking for anything, as many as the half-open
    flood (past the process's cap), while the checks run from 127.0.0.1:
    they may wait (a pool's connections do), but hold no place a new client
    needs. The flood's processes wait `header_timeout + ACCEPT_LAG` s for
    the server to close their connections: those it closed made room."""
    opened, closed, samples, _, (baseline, peak, after) = await flood_while_checked(args, "h2-idle", "127.0.1")
    bad = [s for s in samples if s[1] != 200]
    slowest = max((s[2] for s in samples), default=0)
    total = sum(o["opened"] for o in opened)
    still_open = sum(c["still_open"] for c in closed)
    report("idle HTTP/2 connections", not bad and after <= baseline * 1.2 + 1,
           f"{total} opened HTTP/2 and sent a PING a second, never a request ({sum(o['failed'] for o in opened)} "
           f"failed to open); {total - still_open} closed by the server to make room, {still_open} left waiting; "
           f"{len(samples)} checks during, {len(bad)} not 200, slowest {slowest * 1000:.0f} ms; RSS {baseline:.0f} MB "
           f"before, {peak:.0f} MB with them, {after:.0f} MB after")


def webhook_tests_metered(args):
    statuses = {}
    for _ in range(200):
        status, _ = rest_call(args.rest, "GET", "/v3/workspaces/loud/webhooks/test", args.loud)
        statuses[status] = statuses.get(status, 0) + 1
    report("TestWebhook metered", statuses.get(429, 0) > 0 and statuses.get(200, 0) <= 60,
           f"200 calls from one workspace's key: {statuses}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--flood":
        rest, grpc_target, sources, count, wait = sys.argv[2:7]
        mode = sys.argv[7] if len(sys.argv) > 7 else "half-open"
        asyncio.run(flood(rest, grpc_target, sources.split(","), int(count), float(wait), mode))
        return 0
    parser = argparse.ArgumentParser()
    for name in ("grpc", "rest", "admin", "loud", "quiet", "data-dir"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--connections", type=int, default=20_000)
    parser.add_argument("--sources", type=int, default=10, help="source addresses per flooding process")
    parser.add_argument("--header-timeout", type=float, default=10)
    parser.add_argument("--body-timeout", type=float, default=30)
    args = parser.parse_args()
    for workspace in ("loud", "quiet"):
        rest_call(args.rest, "POST", "/v3/workspaces", args.admin, {"id": workspace})
    webhooks(args)
    protobuf(args)
    asyncio.run(half_open(args))
    asyncio.run(slow_bodies(args))
    asyncio.run(stages(args, args.loud))
    asyncio.run(watch_flood(args))
    asyncio.run(idle_http2(args))
    webhook_tests_metered(args)
    replay_and_data_files(args)
    failed = [name for name, held, _ in results if not held]
    print(f"attacks: {len(results) - len(failed)} held, {len(failed)} got through {failed or ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
