"""The newest Honcho Python SDK (HONCHO_SDK_VERSION=newest in
run-scenario.sh) against roncho's REST edge: the whole scenario.py, plus
every method the SDK added since 2.3.0 (Honcho 3.1): `uid` of workspaces,
peers and sessions; workspace-wide conclusions (`honcho.conclusions`: list,
get, get_many), a view's `get`, `get_many` and `derived`; workspace chat
(answer and stream); `include_evidence` on peer and workspace chat; scopes
from the client (`scope`, `get_scope`, `scopes`).

    python newer.py --base-url http://127.0.0.1:8000 [--api-key KEY] [--semantic]
"""

import scenario


def more_steps(honcho, state, args):
    def uids():
        alice, session = honcho.peer("alice"), state["session"]
        alice.get_metadata()
        assert alice.uid, alice.uid
        listed = {peer.id: peer.uid for peer in honcho.peers()}
        assert listed["alice"] == alice.uid, listed
        sessions = {s.id: s.uid for s in honcho.sessions()}
        assert sessions["chat-1"] and sessions["chat-1"] != alice.uid, sessions
        honcho.get_metadata()
        assert honcho.uid, honcho.uid
        del session

    def conclusions():
        alice, bot = state["alice"], state["bot"]
        view = bot.conclusions_of(alice)
        made = view.create([{"content": "Alice feeds Mochi salmon every morning", "session_id": "chat-1"}])[0]
        fetched = view.get(made.id)
        assert fetched.content == made.content and fetched.times_derived >= 1, fetched
        anywhere = honcho.conclusions.get(made.id)
        assert anywhere.observer_id == "bot" and anywhere.observed_id == "alice", anywhere
        many = honcho.conclusions.get_many([made.id, "no-such-conclusion"])
        assert [c.id for c in many] == [made.id], many
        assert made.id in [c.id for c in honcho.conclusions.list(filters={"observed_id": "alice"})]
        # Nothing was derived from a conclusion made by hand: an empty page, not an error.
        assert list(view.derived(made.id)) == [], "derived from a hand-made conclusion"
        try:
            honcho.conclusions.get("no-such-conclusion")
            missing = None
        except Exception as error:  # the SDK's NotFoundError
            missing = str(error)
        assert missing and ("404" in missing or "not found" in missing.lower()), missing
        state["conclusion"] = made

    def workspace_chat():
        answer = honcho.chat("Who has a cat that eats salmon?")
        assert isinstance(answer, str) and "salmon" in answer, answer
        pieces = list(honcho.chat_stream("Who is Mochi?"))
        assert "Mochi" in "".join(pieces), pieces

    def evidence():
        answered = state["bot"].chat("What does Mochi eat?", target=state["alice"], include_evidence=True)
        assert answered.content and "salmon" in answered.content, answered
        # Honcho 3.2: the trace of how the answer was reached, by id.
        assert isinstance(answered.evidence.reasoning_trace_id, str), answered.evidence
        read = [m.id for m in answered.evidence.messages]
        salmon = [m.id for m in state["messages"] if "salmon" in m.content]
        assert set(salmon) & set(read), (salmon, read)
        across = honcho.chat("Who feeds a cat salmon?", include_evidence=True)
        assert any(c.id == state["conclusion"].id for c in across.evidence.conclusions), across.evidence
        stream = state["bot"].chat_stream("What does Mochi eat?", target=state["alice"], include_evidence=True)
        text = "".join(stream)
        assert "salmon" in text, text
        assert stream.evidence is not None and stream.evidence.messages, stream.evidence
        assert isinstance(stream.evidence.reasoning_trace_id, str), stream.evidence

    def scopes():
        pets = honcho.scope("pets", metadata={"kind": "animals"})
        assert pets.id == "pets", pets
        pets.add_sessions([state["session"]])
        assert [s.id for s in pets.sessions()] == ["chat-1"]
        assert honcho.get_scope("pets").id == "pets"
        assert "pets" in [scope.id for scope in honcho.scopes()]

    return [
        ("uid: workspace, peers and sessions", uids),
        ("conclusions: get, get_many, workspace list, derived", conclusions),
        ("workspace chat: an answer, and a stream", workspace_chat),
        ("evidence: peer chat, workspace chat, a stream's", evidence),
        ("scopes from the client", scopes),
    ]


if __name__ == "__main__":
    scenario.main(more_steps)
