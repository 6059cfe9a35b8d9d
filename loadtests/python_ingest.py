"""CreateMessages from Python, as most users call roncho: stubs generated
from proto/ (grpcio), batches of 100 messages of 20-60 words between two
peers, one client or several (threads, each with its own channel and its
own session). Prints one JSON line per run: messages/s and the per-batch
p50/p99 in milliseconds.

    python python_ingest.py --target 127.0.0.1:50051 --batches 300 --clients 8 [--label TEXT]

The generated modules (roncho.v1.*_pb2) must be on PYTHONPATH.
"""

import argparse
import json
import random
import threading
import time
import uuid

import grpc
from roncho.v1 import ingest_pb2, ingest_pb2_grpc, types_pb2

WORDS = (
    "the a we I you they it this that and but so because when after before about with from into over "
    "coffee trip Lisbon weekend project deadline meeting garden kitten bread bike train office family "
    "dinner book movie music running plan budget doctor school weather holiday friend sister brother "
    "think want need like love hate remember forget told asked said started finished moved bought "
    "tomorrow yesterday today soon later early late often never always maybe really quite very"
).split()


def conversation(rng, batches, size):
    """`batches` batches of `size` messages, alternating user and assistant."""
    out = []
    for _ in range(batches):
        messages = []
        for index in range(size):
            words = rng.randint(20, 60)
            text = " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."
            peer = "user" if index % 2 == 0 else "assistant"
            messages.append(types_pb2.MessageCreate(peer_id=peer, content=text))
        out.append(messages)
    return out


def percentile(sorted_values, fraction):
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, int(round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--batches", type=int, default=300, help="batches in all, shared by the clients")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--label", default="")
    parser.add_argument("--api-key")
    parser.add_argument(
        "--no-derivation",
        action="store_true",
        help="the workspace derives and summarises nothing: no tasks are written with the messages",
    )
    args = parser.parse_args()

    workspace = f"pyload-{uuid.uuid4().hex[:8]}"
    metadata = [("authorization", f"Bearer {args.api_key}")] if args.api_key else None
    shares = [args.batches // args.clients + (1 if i < args.batches % args.clients else 0) for i in range(args.clients)]
    # Requests are built before the clock starts: what is measured is the call.
    work = []
    for client, share in enumerate(shares):
        rng = random.Random(client)
        session = f"session-{client}"
        work.append(
            [
                ingest_pb2.CreateMessagesRequest(workspace_id=workspace, session_id=session, messages=batch)
                for batch in conversation(rng, share, args.size)
            ]
        )
    latencies = []
    lock = threading.Lock()
    errors = []

    def client_loop(requests):
        channel = grpc.insecure_channel(args.target)
        stub = ingest_pb2_grpc.IngestServiceStub(channel)
        mine = []
        try:
            for request in requests:
                start = time.perf_counter()
                stub.CreateMessages(request, metadata=metadata)
                mine.append((time.perf_counter() - start) * 1000)
        except grpc.RpcError as error:  # noqa: PERF203 - one failure ends the client
            errors.append(f"{error.code()}: {error.details()}")
        finally:
            channel.close()
        with lock:
            latencies.extend(mine)

    # Warm the connection and the server's session rows outside the clock.
    warm = grpc.insecure_channel(args.target)
    request = ingest_pb2.GetOrCreateWorkspaceRequest(id=workspace)
    if args.no_derivation:
        request.configuration.update({"reasoning": {"enabled": False}, "summary": {"enabled": False}})
    ingest_pb2_grpc.IngestServiceStub(warm).GetOrCreateWorkspace(request, metadata=metadata)
    warm.close()
    threads = [threading.Thread(target=client_loop, args=(requests,)) for requests in work]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if errors:
        raise SystemExit(f"CreateMessages failed: {errors[0]}")
    latencies.sort()
    messages = len(latencies) * args.size
    print(
        json.dumps(
            {
                "label": args.label,
                "client": "python",
                "clients": args.clients,
                "derivation": not args.no_derivation,
                "batches": len(latencies),
                "messages_per_s": round(messages / wall, 1),
                "p50_ms": round(percentile(latencies, 0.50), 2),
                "p99_ms": round(percentile(latencies, 0.99), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
