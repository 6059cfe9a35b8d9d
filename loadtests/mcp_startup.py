#!/usr/bin/env python3
"""How fast `roncho mcp` with no flags is usable: starts it on a fresh
$XDG_DATA_HOME each run (embedded: a new SQLite store, migrations, the
tokenizer) and times, from the spawn, its answer to `initialize` and to the
first tool call (`create_session`, which waits for the embedded server).
Standard library only: JSON-RPC lines on stdio.

    python3 loadtests/mcp_startup.py path/to/roncho [--runs 10]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time


def request(process, message):
    process.stdin.write(json.dumps(message) + "\n")
    process.stdin.flush()
    if "id" not in message:
        return None
    while True:
        reply = json.loads(process.stdout.readline())
        if reply.get("id") == message["id"]:
            return reply


def run(binary):
    with tempfile.TemporaryDirectory() as data:
        env = dict(os.environ, XDG_DATA_HOME=data)
        started = time.perf_counter()
        process = subprocess.Popen([binary, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True, env=env)
        try:
            request(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "mcp_startup", "version": "1"}}})
            initialized = time.perf_counter() - started
            request(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            reply = request(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "create_session", "arguments": {"workspace_id": "w", "session_id": "s"}}})
            first_call = time.perf_counter() - started
            assert not reply["result"].get("isError"), reply
        finally:
            process.stdin.close()
            process.wait(timeout=30)
        return initialized, first_call


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    runs = [run(args.binary) for _ in range(args.runs)]
    for name, values in (("initialize", [r[0] for r in runs]), ("first tool call", [r[1] for r in runs])):
        values = [v * 1000 for v in values]
        print(f"{name}: p50 {statistics.median(values):.1f} ms, max {max(values):.1f} ms ({len(values)} runs)")


if __name__ == "__main__":
    main()
