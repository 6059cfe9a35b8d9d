#!/usr/bin/env python3
"""A scripted OpenAI-compatible chat server for the derivation benchmark.

Answers POST /v1/chat/completions after a fixed latency (default 0.2 s):
structured requests get {"explicit": [one fact per transcript line]},
others a one-line summary. Standard library only; prints its port.

    python3 loadtests/scripted_llm.py [--latency 0.2] [--port 0]
"""
import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

calls = 0
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    latency = 0.2

    def log_message(self, *args):
        pass

    def do_POST(self):
        global calls
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        time.sleep(self.latency)
        with lock:
            calls += 1
        transcript = body["messages"][-1]["content"]
        if "response_format" in body:
            lines = [line for line in transcript.splitlines() if line.strip()]
            content = json.dumps({"explicit": [{"content": f"fact: {line[-80:]}"} for line in lines[:5]]})
        else:
            content = f"Summary of {len(transcript.splitlines())} lines."
        reply = {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(transcript) // 4, "completion_tokens": len(content) // 4},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        data = json.dumps({"calls": calls}).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    Handler.latency = args.latency
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
