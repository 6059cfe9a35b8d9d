"""Reads back, through Honcho's official Python SDK, what `roncho import
--from-honcho` copied from the Honcho database of
bin/roncho/tests/honcho-v3-database.sql: a switched application finds
its workspaces, peers, sessions, messages (with Honcho's ids and times),
summary, peer cards, conclusions and webhooks. Prints one line per step and
exits non-zero at the first that fails.

    python imported.py --base-url http://127.0.0.1:8000 [--api-key KEY]
"""

import argparse
import json
import urllib.request

from honcho import Honcho
from steps import step, summary


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key")
    args = parser.parse_args()
    honcho = Honcho(base_url=args.base_url, api_key=args.api_key, workspace_id="acme")

    def workspaces():
        assert sorted(honcho.workspaces()) == ["acme", "sandbox"], list(honcho.workspaces())
        assert honcho.get_metadata() == {"plan": "pro"}, honcho.get_metadata()

    def peers():
        ids = sorted(peer.id for peer in honcho.peers())
        assert ids == ["alice", "bot", "carol"], ids
        assert honcho.peer("alice").get_metadata() == {"role": "user"}

    def sessions():
        ids = [session.id for session in honcho.sessions()]
        assert ids == ["chat-1"], ids
        session = honcho.session("chat-1")
        assert session.get_metadata() == {"topic": "pets"}, session.get_metadata()
        members = sorted(peer.id for peer in session.peers())
        assert members == ["alice", "bot"], members
        assert session.get_peer_configuration("bot").observe_me is False

    def messages():
        listed = list(honcho.session("chat-1").messages())
        assert [m.id for m in listed] == [
            "Ms1aaaaaaaaaaaaaaaaaa",
            "Ms2bbbbbbbbbbbbbbbbbb",
            "Ms3cccccccccccccccccc",
            "Ms4dddddddddddddddddd",
        ], [m.id for m in listed]
        assert listed[2].content == "Her name is Mochi and she only eats salmon"
        assert listed[2].metadata == {"mood": "happy"}, listed[2].metadata
        assert listed[0].created_at.isoformat().startswith("2026-03-01T10:01:00.123456"), listed[0].created_at
        fetched = honcho.session("chat-1").get_message("Ms3cccccccccccccccccc")
        assert fetched.peer_id == "alice"

    def search():
        found = honcho.search("salmon")
        assert [m.id for m in found][:1] == ["Ms3cccccccccccccccccc"], found

    def summary_and_context():
        session = honcho.session("chat-1")
        summaries = session.summaries()
        assert summaries.short_summary.content == "Alice adopted Mochi, a grey kitten who eats salmon.", summaries
        ctx = session.context(tokens=2000)
        assert ctx.summary is not None and "Mochi" in ctx.summary.content, ctx

    def cards_and_conclusions():
        alice = honcho.peer("alice")
        assert alice.get_card() == ["IDENTITY: Alice, a nurse in Lisbon", "ATTRIBUTE: adopted a grey kitten"]
        assert alice.get_card(target="bot") == ["IDENTITY: Alice's assistant"]
        contents = sorted(c.content for c in alice.conclusions.list())
        assert contents == ["Alice adopted a grey kitten named Mochi", "Alice is a cat owner"], contents
        representation = alice.representation()
        assert "Mochi" in representation, representation

    def webhooks():
        # The SDK has no webhook calls: Honcho's REST route, directly.
        request = urllib.request.Request(f"{args.base_url}/v3/workspaces/acme/webhooks")
        if args.api_key:
            request.add_header("Authorization", f"Bearer {args.api_key}")
        with urllib.request.urlopen(request) as response:
            page = json.load(response)
        urls = [hook["url"] for hook in page["items"]]
        assert urls == ["https://hooks.example.com/honcho"], page

    step("workspaces and workspace metadata", workspaces)
    step("peers", peers)
    step("sessions: active only, metadata, members and their configuration", sessions)
    step("messages: Honcho's ids, contents, metadata and times", messages)
    step("search finds imported messages", search)
    step("summary and session context", summary_and_context)
    step("peer cards, conclusions and representation", cards_and_conclusions)
    step("webhooks", webhooks)
    summary("honcho-sdk import")


if __name__ == "__main__":
    main()
