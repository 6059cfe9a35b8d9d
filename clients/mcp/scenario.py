"""Drives roncho's MCP server with the official Python MCP client (PyPI
`mcp`), over stdio (`roncho mcp`) or Streamable HTTP (`/mcp` on the REST
edge), and checks what the tools did against the gRPC API's view of the
same data.

    python scenario.py --stdio "roncho mcp --data-dir D" [--grpc HOST:PORT] --part conversation
    python scenario.py --url http://127.0.0.1:8000/mcp --grpc HOST:PORT --part conversation
    python scenario.py --url .../mcp/memory --grpc ... --part memory
    python scenario.py --url .../mcp --key ALICE_KEY --part peer-key --workspace w
    python scenario.py --url .../mcp --write-fixture tools-honcho.json   (regenerates a fixture)

Parts:
- conversation: Honcho's tools end to end (workspace, peers, session,
  messages, search, context, chat with the scripted model, conclusions,
  cards, metadata, clone, delete), the tool list pinned by
  tools-honcho.json, and tool errors.
- memory: the memory profile (remember, recall, ask, forget), pinned by
  tools-memory.json.
- seed / peer-key: an admin writes two peers' sessions; then a key of
  alice's reads hers and is refused bob's through every tool that reads.
"""

import argparse
import asyncio
import json
import os
import shlex
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

HERE = Path(__file__).parent
ANSWER = "Alice adopted a kitten named Mochi from a shelter."
LINES = [
    ("alice", "I baked sourdough bread this weekend, the crust came out great."),
    ("assistant", "Nice! How long did the dough proof?"),
    ("alice", "I finally adopted a kitten from the shelter, a tiny grey one."),
    ("alice", "Now I have to fill in my tax forms before Friday."),
]
BOB_SECRET = "bob-only: the vault code is 4471"


class Failed(Exception):
    pass


def check(condition, what, detail=""):
    if not condition:
        raise Failed(f"{what}: {detail}")


@asynccontextmanager
async def connect(args, key=None):
    """An initialized client session, and the `initialize` result."""
    if args.url:
        headers = {}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        if args.default_workspace:
            headers["X-Honcho-Workspace-ID"] = args.default_workspace
        if args.default_peer:
            headers["X-Roncho-Peer-ID"] = args.default_peer
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(args.url, http_client=http) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    yield session, await session.initialize()
    else:
        command = shlex.split(args.stdio)
        if key:
            command += ["--key", key]
        params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                yield session, await session.initialize()


class Tools:
    """Calls tools and records every text they returned."""

    def __init__(self, session):
        self.session = session
        self.texts = []

    async def call(self, name, arguments=None):
        result = await self.session.call_tool(name, arguments or {})
        text = "".join(block.text for block in result.content if getattr(block, "type", "") == "text")
        self.texts.append(text)
        return result.is_error, text

    async def ok(self, name, arguments=None):
        error, text = await self.call(name, arguments)
        check(not error, f"{name} failed", text)
        return text

    async def json(self, name, arguments=None):
        return json.loads(await self.ok(name, arguments))

    async def refused(self, name, arguments, *needles):
        error, text = await self.call(name, arguments)
        check(error, f"{name} should fail", text)
        for needle in needles:
            check(needle in text, f"{name}'s error should say `{needle}`", text)
        return text


def grpc_clients(target):
    import grpc
    from roncho.v1 import recall_pb2_grpc

    channel = grpc.insecure_channel(target)
    return recall_pb2_grpc.RecallServiceStub(channel)


def grpc_messages(recall, workspace, session):
    from roncho.v1 import recall_pb2

    reply = recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=workspace, session_id=session, size=100))
    return [(m.id, m.peer_id, m.content) for m in reply.items]


def grpc_conclusions(recall, workspace, observer, observed):
    from google.protobuf import struct_pb2
    from roncho.v1 import recall_pb2

    filters = struct_pb2.Struct()
    filters.update({"observer_id": observer, "observed_id": observed})
    reply = recall.ListConclusions(recall_pb2.ListConclusionsRequest(workspace_id=workspace, filters=filters))
    return [(c.id, c.content) for c in reply.items]


def grpc_not_found(call):
    import grpc

    try:
        call()
    except grpc.RpcError as error:
        return error.code() == grpc.StatusCode.NOT_FOUND
    return False


def pinned(listed, fixture):
    want = json.loads((HERE / fixture).read_text())
    got = [{"name": tool.name, "inputSchema": tool.input_schema} for tool in listed.tools]
    check(got == want, f"the tool list differs from {fixture}", json.dumps(got)[:2000])


async def conversation(args, tools, initialized):
    ws = args.workspace
    check("add_messages_to_session" in (initialized.instructions or ""), "instructions name the tools", initialized.instructions)
    pinned(await tools.session.list_tools(), "tools-honcho.json")

    made = await tools.json("create_workspace", {"workspace_id": ws, "metadata": {"purpose": "mcp scenario"}})
    check(made["id"] == ws and made["metadata"] == {"purpose": "mcp scenario"}, "create_workspace", made)
    peer = await tools.json("create_peer", {"workspace_id": ws, "peer_id": "alice"})
    check(peer["peer_id"] == "alice", "create_peer", peer)
    bot = await tools.json("create_peer", {"workspace_id": ws, "peer_id": "assistant", "configuration": {"observeMe": False}})
    check(bot == {"peer_id": "assistant", "configuration": {"observeMe": False}}, "create_peer with observeMe", bot)
    check(await tools.json("create_session", {"workspace_id": ws, "session_id": "s1"}) == {"session_id": "s1"}, "create_session")
    await tools.ok("add_peers_to_session", {
        "workspace_id": ws, "session_id": "s1",
        "peers": [{"peer_id": "alice", "observe_me": True, "observe_others": True}, {"peer_id": "assistant", "observe_me": False}],
    })
    check(sorted(await tools.json("get_session_peers", {"workspace_id": ws, "session_id": "s1"})) == ["alice", "assistant"], "get_session_peers")
    added = await tools.ok("add_messages_to_session", {
        "workspace_id": ws, "session_id": "s1",
        "messages": [{"peer_id": p, "content": c} for p, c in LINES],
    })
    check(added == "Messages added to session successfully", "add_messages_to_session", added)

    listed = await tools.json("get_session_messages", {"workspace_id": ws, "session_id": "s1"})
    check([(m["peer_id"], m["content"]) for m in listed["messages"]] == LINES, "get_session_messages", listed)
    check(listed["total"] == 4 and listed["page"] == 1 and "size" not in listed, "page keys", listed)
    check(list(listed["messages"][0]) == ["id", "content", "peer_id", "session_id", "metadata", "created_at"]
          or sorted(listed["messages"][0]) == sorted(["id", "content", "peer_id", "session_id", "metadata", "created_at"]),
          "a message's keys", listed["messages"][0])
    kitten = listed["messages"][2]
    one = await tools.json("get_session_message", {"workspace_id": ws, "session_id": "s1", "message_id": kitten["id"]})
    check(one == kitten, "get_session_message", one)
    alice_only = await tools.json("get_session_messages", {"workspace_id": ws, "session_id": "s1", "filters": {"peer_id": "assistant"}})
    check([m["content"] for m in alice_only["messages"]] == [LINES[1][1]], "filtered messages", alice_only)

    found = await tools.json("search", {"workspace_id": ws, "query": "kitten shelter"})
    check(found["messages"] and found["messages"][0]["id"] == kitten["id"], "search finds the kitten first", found)
    check(("degraded" in found) == args.expect_degraded, "search says when it runs without an embedder", found)
    found = await tools.json("search", {"workspace_id": ws, "query": "tax forms", "session_id": "s1", "message_limit": 2})
    check(found["messages"][0]["content"] == LINES[3][1] and len(found["messages"]) <= 2, "session search", found)

    context = await tools.json("get_session_context", {"workspace_id": ws, "session_id": "s1", "tokens": 2000})
    check(context["session_id"] == "s1" and [m["id"] for m in context["messages"]] == [m["id"] for m in listed["messages"]],
          "get_session_context", context)
    inspected = await tools.json("inspect_session", {"workspace_id": ws, "session_id": "s1"})
    check(inspected["message_count"] == 4 and sorted(p["id"] for p in inspected["peers"]) == ["alice", "assistant"]
          and set(inspected["summaries"]) == {"session_id", "short_summary", "long_summary"}, "inspect_session", inspected)
    overview = await tools.json("inspect_workspace", {"workspace_id": ws})
    check(overview["workspace_id"] == ws and overview["peer_count"] == 2 and overview["session_count"] == 1
          and overview["metadata"] == {"purpose": "mcp scenario"}, "inspect_workspace", overview)

    logged = len(Path(args.model_log).read_text().splitlines()) if args.model_log and Path(args.model_log).exists() else 0
    answer = await tools.ok("chat", {"workspace_id": ws, "peer_id": "assistant", "target_peer_id": "alice", "query": "What pet does alice have?"})
    check(answer == ANSWER, "chat answers with the scripted model", answer)
    if args.model_log:
        asked = Path(args.model_log).read_text()
        check("What pet does alice have?" in asked, "the model was asked the question", asked[-500:])
        # The model searched the messages first (scripted_llm.py --search-first): the tool read them.
        results = [m["content"] for line in asked.splitlines()[logged:] for m in json.loads(line)["messages"]
                   if m.get("role") == "tool"]
        check(any(r.startswith("Found") and "kitten" in r for r in results),
              "the dialectic's search_messages tool found the messages", results[-3:])

    made = await tools.ok("create_conclusions", {
        "workspace_id": ws, "peer_id": "assistant", "target_peer_id": "alice",
        "conclusions": ["Alice has a grey kitten named Mochi", "Alice bakes sourdough"],
    })
    check(made == "Created 2 conclusions successfully", "create_conclusions", made)
    held = await tools.json("list_conclusions", {"workspace_id": ws, "peer_id": "assistant", "target_peer_id": "alice"})
    check(held["total"] == 2 and all(set(c) == {"id", "content", "observer_id", "observed_id", "session_id", "created_at"} for c in held["conclusions"]),
          "list_conclusions", held)
    query = {"workspace_id": ws, "peer_id": "assistant", "target_peer_id": "alice", "query": "kitten", "top_k": 5}
    if args.expect_degraded:
        # Without an embedder, a query by meaning says why it cannot answer.
        await tools.refused("query_conclusions", query, "needs an embedder")
        queried = [c for c in held["conclusions"] if "kitten" in c["content"]]
    else:
        # Conclusions are embedded in the background: visible within seconds.
        for _ in range(50):
            queried = await tools.json("query_conclusions", query)
            if queried:
                break
            await asyncio.sleep(0.2)
        check(queried and queried[0]["content"] == "Alice has a grey kitten named Mochi" and queried[0]["level"] == "explicit",
              "query_conclusions", queried)
    searched = await tools.json("search", {"workspace_id": ws, "query": "kitten", "peer_id": "alice"})
    check(all(m["peer_id"] == "alice" for m in searched["messages"]), "search by peer", searched)
    gone = queried[0]["id"]
    check(await tools.ok("delete_conclusion", {"workspace_id": ws, "peer_id": "assistant", "target_peer_id": "alice", "conclusion_id": gone})
          == "Conclusion deleted successfully", "delete_conclusion")

    card = ["Name: Alice", "Has a kitten"]
    check(await tools.json("set_peer_card", {"workspace_id": ws, "peer_id": "alice", "peer_card": card}) == card, "set_peer_card")
    check(await tools.json("get_peer_card", {"workspace_id": ws, "peer_id": "alice"}) == card, "get_peer_card")
    check(await tools.ok("get_peer_card", {"workspace_id": ws, "peer_id": "assistant"}) == "No peer card found.", "no card")
    about = await tools.json("get_peer_context", {"workspace_id": ws, "peer_id": "alice"})
    check(about["peer_id"] == "alice" and about["peer_card"] == card, "get_peer_context", about)
    representation = await tools.ok("get_representation", {"workspace_id": ws, "peer_id": "assistant", "target_peer_id": "alice"})
    check("sourdough" in representation, "get_representation holds the kept conclusion", representation)

    check(await tools.ok("set_metadata", {"workspace_id": ws, "session_id": "s1", "metadata": {"topic": "life"}})
          == "Session metadata set successfully", "set_metadata")
    check(await tools.json("get_metadata", {"workspace_id": ws, "session_id": "s1"}) == {"topic": "life"}, "get_metadata")
    status = await tools.json("get_queue_status", {"workspace_id": ws})
    check("totalWorkUnits" in status and "pendingWorkUnits" in status, "get_queue_status in camelCase", status)
    peers = await tools.json("list_peers", {"workspace_id": ws})
    check(sorted(p["id"] for p in peers["peers"]) == ["alice", "assistant"], "list_peers", peers)

    clone = await tools.json("clone_session", {"workspace_id": ws, "session_id": "s1", "message_id": kitten["id"]})
    cloned = await tools.json("get_session_messages", {"workspace_id": ws, "session_id": clone["session_id"]})
    check([m["content"] for m in cloned["messages"]] == [c for _, c in LINES[:3]], "clone_session up to a message", cloned)

    # Tool errors: reasons, never a broken session.
    await tools.refused("get_session_message", {"workspace_id": ws, "session_id": "s1", "message_id": "nope"}, "Failed to get message:")
    await tools.refused("chat", {"workspace_id": ws, "query": "hi"}, "MCP error -32602", "peer_id")
    await tools.refused("create_peer", {"workspace_id": ws, "peer_id": "not valid!"}, "Failed to create peer:", "letters")
    await tools.refused("search", {"workspace_id": ws, "query": "   "}, "Search failed:")
    await tools.refused("get_session_context", {"workspace_id": ws, "session_id": "s1", "tokens": 1.5}, "Failed to get context:")
    await tools.refused("no_such_tool", {}, "not found")
    if not args.default_workspace:
        await tools.refused("list_peers", {}, "Failed to list peers: Missing workspace_id")

    if args.grpc:
        recall = grpc_clients(args.grpc)
        check(grpc_messages(recall, ws, "s1") == [(m["id"], m["peer_id"], m["content"]) for m in listed["messages"]],
              "gRPC sees the messages the tools wrote")
        check([c for _, c in grpc_conclusions(recall, ws, "assistant", "alice")] == ["Alice bakes sourdough"],
              "gRPC sees the conclusions left")
        check(len(grpc_messages(recall, ws, clone["session_id"])) == 3, "gRPC sees the clone")

    check(await tools.ok("delete_session", {"workspace_id": ws, "session_id": "s1"}) == "Session deleted successfully", "delete_session")
    sessions = await tools.json("list_sessions", {"workspace_id": ws})
    check([s["id"] for s in sessions["sessions"]] == [clone["session_id"]], "the deleted session is gone", sessions)
    if args.grpc:
        from roncho.v1 import recall_pb2

        recall = grpc_clients(args.grpc)
        check(grpc_not_found(lambda: recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=ws, session_id="s1"))),
              "gRPC no longer finds the deleted session")


async def memory(args, tools, initialized):
    ws = args.workspace
    check("remember" in (initialized.instructions or ""), "memory instructions", initialized.instructions)
    pinned(await tools.session.list_tools(), "tools-memory.json")
    saved = await tools.json("remember", {"workspace_id": ws, "messages": [
        {"peer_id": "alice", "content": "My sister Jo lives in Lisbon and teaches piano."},
        {"peer_id": "assistant", "content": "Lisbon is lovely; does Jo play concerts?"},
        {"peer_id": "alice", "content": "My dentist appointment is on Tuesday."},
    ]})
    check(saved["session_id"] == "memory" and len(saved["message_ids"]) == 3, "remember", saved)
    text = await tools.ok("recall", {"workspace_id": ws, "query": "sister piano Lisbon", "peer_id": "alice"})
    check("Jo lives in Lisbon" in text and saved["message_ids"][0] in text, "recall finds the message", text)
    check(("matched by words only" in text) == args.expect_degraded, "recall says when it matched by words only", text)
    short = await tools.ok("recall", {"workspace_id": ws, "query": "sister piano Lisbon", "max_tokens": 50})
    check("left out to stay within max_tokens" in short or len(short) < 400, "recall keeps to its budget", short)
    answer = await tools.ok("ask", {"workspace_id": ws, "peer_id": "assistant", "target_peer_id": "alice", "query": "Who is Jo?"})
    check(answer == ANSWER, "ask", answer)
    receipt = await tools.json("forget", {"workspace_id": ws, "session_id": "memory", "message_id": saved["message_ids"][2]})
    check(receipt["scope"]["kind"] == "message" and receipt["counts"]["messages"] == 1, "forget returns the receipt", receipt)
    text = await tools.ok("recall", {"workspace_id": ws, "query": "dentist appointment Tuesday"})
    check("dentist" not in text, "a forgotten message is not recalled", text)
    await tools.refused("forget", {"workspace_id": ws}, "MCP error -32602", "name one thing")
    if args.grpc:
        recall = grpc_clients(args.grpc)
        check([m[0] for m in grpc_messages(recall, ws, "memory")] == saved["message_ids"][:2], "gRPC sees what is remembered")
    receipt = await tools.json("forget", {"workspace_id": ws, "session_id": "memory"})
    check(receipt["scope"] == {"kind": "session", "session_id": "memory"} and receipt["counts"]["messages"] == 2,
          "forgetting a session", receipt)


async def seed(args, tools, _initialized):
    """As admin: alice in s-alice, bob alone in s-bob with a secret."""
    ws = args.workspace
    for session, lines in (("s-alice", [("alice", "I like green tea.")]), ("s-bob", [("bob", BOB_SECRET)])):
        await tools.ok("add_messages_to_session", {"workspace_id": ws, "session_id": session,
                                                   "messages": [{"peer_id": p, "content": c} for p, c in lines]})
    await tools.ok("create_conclusions", {"workspace_id": ws, "peer_id": "bob", "target_peer_id": "bob", "conclusions": [BOB_SECRET]})
    await tools.ok("set_peer_card", {"workspace_id": ws, "peer_id": "bob", "peer_card": [BOB_SECRET]})


async def peer_key(args, tools, _initialized):
    """With alice's key: her own reads work; bob's data is out of reach of every tool."""
    ws = args.workspace
    mine = await tools.json("get_session_messages", {"session_id": "s-alice"})
    check([m["content"] for m in mine["messages"]] == ["I like green tea."], "alice reads her session", mine)
    found = await tools.json("search", {"query": "green tea", "peer_id": "alice"})
    check(found["messages"][0]["content"] == "I like green tea.", "alice searches her messages", found)
    await tools.ok("get_peer_card", {"peer_id": "alice"})
    bob_message = "x"
    denied = [
        ("get_session_messages", {"session_id": "s-bob"}),
        ("get_session_message", {"session_id": "s-bob", "message_id": bob_message}),
        ("get_session_context", {"session_id": "s-bob"}),
        ("inspect_session", {"session_id": "s-bob"}),
        ("get_session_peers", {"session_id": "s-bob"}),
        ("search", {"query": "vault code", "session_id": "s-bob"}),
        ("search", {"query": "vault code", "peer_id": "bob"}),
        ("search", {"query": "vault code"}),
        ("chat", {"peer_id": "bob", "query": "what is the vault code?"}),
        ("get_peer_card", {"peer_id": "bob"}),
        ("get_peer_context", {"peer_id": "bob"}),
        ("get_representation", {"peer_id": "bob"}),
        ("list_conclusions", {"peer_id": "bob"}),
        ("query_conclusions", {"peer_id": "bob", "query": "vault"}),
        ("get_metadata", {"session_id": "s-bob"}),
        ("inspect_workspace", {}),
        ("list_peers", {}),
        ("list_sessions", {}),
        ("list_workspaces", {}),
        ("get_queue_status", {}),
        ("clone_session", {"session_id": "s-bob"}),
        ("delete_session", {"session_id": "s-bob"}),
        ("add_messages_to_session", {"session_id": "s-bob", "messages": [{"peer_id": "alice", "content": "hi"}]}),
        ("create_conclusions", {"peer_id": "bob", "target_peer_id": "bob", "conclusions": ["x"]}),
        ("set_peer_card", {"peer_id": "bob", "peer_card": ["x"]}),
    ]
    for name, arguments in denied:
        error, text = await tools.call(name, {"workspace_id": ws, **arguments})
        check(error, f"{name} {arguments} is refused to alice's key", text)
        check("ermission" in text or "not allowed" in text or "only possible with an admin" in text or "403" in text,
              f"{name} says why", text)
    leaked = [text for text in tools.texts if "vault code is" in text]
    check(not leaked, "nothing of bob's reached alice", leaked)


async def memory_peer_key(args, tools, _initialized):
    """The memory profile with alice's key: recall finds hers, never bob's; forget is refused."""
    text = await tools.ok("recall", {"workspace_id": args.workspace, "query": "green tea vault code", "peer_id": "alice"})
    check("I like green tea." in text, "alice recalls her message", text)
    check("vault code is" not in text, "alice does not recall bob's", text)
    await tools.refused("recall", {"workspace_id": args.workspace, "query": "vault", "session_id": "s-bob"}, "Recall failed:")
    await tools.refused("ask", {"workspace_id": args.workspace, "peer_id": "bob", "query": "vault code?"}, "Ask failed:")
    await tools.refused("forget", {"workspace_id": args.workspace, "session_id": "s-bob"}, "Failed to forget:")


PARTS = {"conversation": conversation, "memory": memory, "seed": seed, "peer-key": peer_key, "memory-peer-key": memory_peer_key}


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url")
    parser.add_argument("--stdio")
    parser.add_argument("--grpc")
    parser.add_argument("--key")
    parser.add_argument("--part", choices=sorted(PARTS))
    parser.add_argument("--workspace", default="mcp")
    parser.add_argument("--default-workspace")
    parser.add_argument("--default-peer")
    parser.add_argument("--model-log")
    parser.add_argument("--write-fixture")
    parser.add_argument("--expect-degraded", action="store_true", help="the server has no embedder")
    args = parser.parse_args()
    started = time.perf_counter()
    async with connect(args, args.key) as (session, initialized):
        initialize_seconds = time.perf_counter() - started
        if args.write_fixture:
            listed = await session.list_tools()
            tools = [{"name": tool.name, "inputSchema": tool.input_schema} for tool in listed.tools]
            (HERE / args.write_fixture).write_text(json.dumps(tools, indent=2) + "\n")
            return
        tools = Tools(session)
        await PARTS[args.part](args, tools, initialized)
    print(f"  {args.part}: ok ({len(tools.texts)} tool calls; initialize answered in {initialize_seconds * 1000:.0f} ms)")


def failure_in(error):
    """The scenario's failure inside anyio's exception groups, if any."""
    if isinstance(error, Failed):
        return error
    for inner in getattr(error, "exceptions", ()):
        found = failure_in(inner)
        if found:
            return found
    return None


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except BaseException as error:  # noqa: BLE001 - anyio wraps the failure in groups
        failure = failure_in(error)
        if failure is None:
            raise
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
