"""Honcho's official Python SDK (honcho-ai, pinned in run-scenario.sh)
against roncho's REST edge: a conversation written and read back through
the SDK's public API alone, each step checked. Prints one line per step and
exits non-zero at the first that fails.

    python scenario.py --base-url http://127.0.0.1:8000 [--api-key KEY]
"""

import argparse
import time
import uuid

from honcho import Honcho
from honcho.api_types import SessionPeerConfig
from steps import step, summary


def main(more_steps=lambda honcho, state, args: []):
    """Runs the scenario; `more_steps(honcho, state, args)` adds (name, check)
    steps after chat, while the conversation is still there (newer.py)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key")
    parser.add_argument("--semantic", action="store_true", help="the server embeds (conclusions are queried by meaning)")
    args = parser.parse_args()
    workspace = f"sdk-{uuid.uuid4().hex[:8]}"
    honcho = Honcho(base_url=args.base_url, api_key=args.api_key, workspace_id=workspace)
    state = {}

    def peers():
        state["alice"] = honcho.peer("alice", metadata={"role": "user"})
        state["bot"] = honcho.peer("bot", configuration={"observe_me": False})
        assert state["alice"].get_metadata() == {"role": "user"}, state["alice"].get_metadata()
        ids = sorted(peer.id for peer in honcho.peers())
        assert ids == ["alice", "bot"], ids

    def session():
        state["session"] = honcho.session("chat-1", metadata={"topic": "pets"})
        state["session"].add_peers([state["alice"], state["bot"]])
        members = sorted(peer.id for peer in state["session"].peers())
        assert members == ["alice", "bot"], members

    def messages():
        alice, bot = state["alice"], state["bot"]
        created = state["session"].add_messages(
            [
                alice.message("I adopted a grey kitten from the shelter last week"),
                bot.message("What did you name the kitten?"),
                alice.message("Her name is Mochi and she only eats salmon", metadata={"mood": "happy"}),
            ]
        )
        assert len(created) == 3, created
        listed = list(state["session"].messages())
        assert [m.content for m in listed] == [m.content for m in created], listed
        state["messages"] = created

    def upload():
        session, alice = state["session"], state["alice"]
        notes = session.upload_file(("notes.json", b'{"vet":"Dr. Okafor","visits":[1,2]}', "application/json"), peer=alice)
        assert [m.content for m in notes] == ['{"vet": "Dr. Okafor", "visits": [1, 2]}'], notes
        assert notes[0].peer_id == "alice"
        state["messages"].extend(notes)

    def get_and_update_message():
        first = state["messages"][0]
        fetched = state["session"].get_message(first.id)
        assert fetched.content == first.content
        updated = state["session"].update_message(first, metadata={"pinned": True})
        assert updated.metadata == {"pinned": True}, updated.metadata

    def search():
        found = honcho.search("salmon")
        assert any("salmon" in m.content for m in found), found
        in_session = state["session"].search("kitten")
        assert in_session, in_session
        by_peer = state["alice"].search("Mochi")
        assert all(m.peer_id == "alice" for m in by_peer), by_peer

    def context():
        ctx = state["session"].context(tokens=2000)
        assert len(ctx.messages) == 4, ctx
        openai = ctx.to_openai(assistant=state["bot"])
        assert openai[0]["role"] == "user", openai

    def cards_and_conclusions():
        alice, bot = state["alice"], state["bot"]
        bot.set_card(["Has a cat named Mochi"], target=alice)
        assert bot.get_card(target=alice) == ["Has a cat named Mochi"]
        scope = bot.conclusions_of(alice)
        made = scope.create([{"content": "Alice has a cat named Mochi", "session_id": "chat-1"}])
        assert made and made[0].content == "Alice has a cat named Mochi", made
        listed = list(scope.list())
        assert [c.content for c in listed] == ["Alice has a cat named Mochi"], listed
        if args.semantic:
            # Embedded by the reconciler within seconds, then found by meaning.
            for _ in range(100):
                near = scope.query("What pet does Alice have?", top_k=3)
                if near:
                    break
                time.sleep(0.1)
            assert near and near[0].content == "Alice has a cat named Mochi", near
        else:
            try:
                scope.query("What pet does Alice have?")
                refused = None
            except Exception as error:  # the SDK's API error: a query by meaning needs an embedder
                refused = str(error)
            assert refused and "embedder" in refused, refused
        representation = bot.representation(target=alice)
        assert "Mochi" in representation, representation
        scope.delete(made[0].id)
        assert list(scope.list()) == []

    def chat():
        # Extractive without a model (the messages it found, quoted), the
        # model's answer with one: either way the memory is read.
        answer = state["bot"].chat("What is the name of alice's cat?", target=state["alice"])
        assert isinstance(answer, str) and "Mochi" in answer, answer
        pieces = list(state["bot"].chat_stream("What does Mochi eat?", target=state["alice"]))
        assert all(isinstance(piece, str) for piece in pieces), pieces
        assert "salmon" in "".join(pieces), pieces

    def queue():
        status = honcho.queue_status()
        assert status.total_work_units >= 0, status

    def configuration_and_memberships():
        session, alice, bot = state["session"], state["alice"], state["bot"]
        session.set_peer_configuration(bot, SessionPeerConfig(observe_others=True))
        assert session.get_peer_configuration(bot).observe_others is True
        session.set_metadata({"topic": "cats"})
        assert session.get_metadata() == {"topic": "cats"}
        assert [s.id for s in alice.sessions()] == ["chat-1"]
        context = bot.context(target=alice)
        assert context.peer_card == ["Has a cat named Mochi"], context
        summaries = session.summaries()
        assert summaries.short_summary is None and summaries.long_summary is None, summaries

    def clone_and_delete():
        copy = state["session"].clone()
        assert len(list(copy.messages())) == 4
        copy.delete()
        assert copy.id not in [s.id for s in honcho.sessions()]

    def delete_workspace():
        state["session"].remove_peers([state["bot"]])
        assert [peer.id for peer in state["session"].peers()] == ["alice"]
        try:
            honcho.delete_workspace(workspace)
        except Exception as error:  # noqa: BLE001 - Honcho refuses while sessions are active
            assert "409" in str(error) or "active session" in str(error), error
        else:
            raise AssertionError("a workspace with an active session was deleted")
        state["session"].delete()
        honcho.delete_workspace(workspace)
        assert workspace not in list(honcho.workspaces())

    step("peers: get-or-create with metadata and configuration, list", peers)
    step("session: metadata, members", session)
    step("messages: a batch written, listed in order", messages)
    step("upload: a JSON file becomes a message, re-serialised as Python writes it", upload)
    step("message: get and update", get_and_update_message)
    step("search: workspace, session and peer", search)
    step("context: messages under a budget, as OpenAI messages", context)
    step("peer cards and conclusions: set, list, representation, delete", cards_and_conclusions)
    step("chat: an answer, and a stream", chat)
    for name, check in more_steps(honcho, state, args):
        step(name, check)
    step("queue status", queue)
    step("session peer configuration, metadata, peer sessions, peer context, summaries", configuration_and_memberships)
    step("clone a session, delete the copy", clone_and_delete)
    step("workspace delete: refused while a session is active, then done", delete_workspace)
    summary("honcho-sdk")


if __name__ == "__main__":
    main()
