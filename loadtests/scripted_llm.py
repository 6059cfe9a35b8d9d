#!/usr/bin/env python3
"""A scripted OpenAI-compatible chat server for the derivation benchmark.

Answers POST /v1/chat/completions after a fixed latency (default 0.2 s):
structured requests get {"explicit": [one fact per transcript line]} (the
first five lines; every line with --all-lines), others a one-line summary.
With --answer, others get that text instead (the MCP scenario's chat);
with --search-first, a request offering the `search_messages` tool and
holding no tool result yet gets a call of it with the last user message as
the query (so a chat reads the message index); with --log, each request's body is appended to the file as a JSON line.
GET / reports the calls answered; GET /outage/on makes every call answer
503 until GET /outage/off (the chaos run's model outage). Standard library
only; prints its port.

    python3 loadtests/scripted_llm.py [--latency 0.2] [--port 0] [--all-lines] [--answer TEXT]
        [--search-first] [--log FILE]
"""
import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

calls = 0
refused = 0
outage = False
lock = threading.Lock()


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A client that went away mid-answer (a deriver killed by the chaos run) is not an error here.
        pass


class Handler(BaseHTTPRequestHandler):
    latency = 0.2
    all_lines = False
    answer = None
    search_first = False
    log = None

    def log_message(self, *args):
        pass

    def do_POST(self):
        global calls, refused
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        if self.log:
            with lock, open(self.log, "a") as log:
                log.write(json.dumps(body) + "\n")
        if outage:
            with lock:
                refused += 1
            data = b'{"error": {"message": "scripted outage"}}'
            self.send_response(503)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        time.sleep(self.latency)
        with lock:
            calls += 1
        transcript = body["messages"][-1]["content"] or ""
        offered = {tool.get("function", {}).get("name") for tool in body.get("tools", [])}
        searched = any(message.get("role") == "tool" for message in body["messages"])
        if self.search_first and "search_messages" in offered and not searched:
            question = next(m["content"] for m in reversed(body["messages"]) if m.get("role") == "user")
            call = {"id": "call_search", "type": "function",
                    "function": {"name": "search_messages", "arguments": json.dumps({"query": question})}}
            self.reply({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls", transcript, "")
            return
        if "response_format" in body:
            lines = [line for line in transcript.splitlines() if line.strip()]
            chosen = lines if self.all_lines else lines[:5]
            content = json.dumps({"explicit": [{"content": f"fact: {line[-80:]}"} for line in chosen]})
        elif self.answer is not None:
            content = self.answer
        else:
            content = f"Summary of {len(transcript.splitlines())} lines."
        self.reply({"role": "assistant", "content": content}, "stop", transcript, content)

    def reply(self, message, finish_reason, transcript, content):
        reply = {
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": len(transcript) // 4, "completion_tokens": len(content) // 4},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        global outage
        if self.path in ("/outage/on", "/outage/off"):
            outage = self.path == "/outage/on"
        data = json.dumps({"calls": calls, "refused": refused, "outage": outage}).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--all-lines", action="store_true")
    parser.add_argument("--answer")
    parser.add_argument("--search-first", action="store_true")
    parser.add_argument("--log")
    args = parser.parse_args()
    Handler.latency = args.latency
    Handler.all_lines = args.all_lines
    Handler.answer = args.answer
    Handler.search_first = args.search_first
    Handler.log = args.log
    server = Server(("127.0.0.1", args.port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
