"""A roncho.v1 client scenario in Python, from code generated out of proto/.

Exercises every workspace, peer, session, message, file and webhook operation
against a running server and writes a transcript in which generated ids and
server timestamps are replaced by stable placeholders, so the transcripts of
two backends can be compared byte for byte.

    python scenario.py --target 127.0.0.1:50051 --phase write --out t.json
    python scenario.py --target 127.0.0.1:50051 --phase verify --out t.json

`write` runs the scenario; `verify` (after a restart) checks that what
`write` stored is still there, unchanged.

Against a server with TLS and API keys, give the CA that signed its
certificate and a key:

    python scenario.py --target 127.0.0.1:50051 --ca-file ca.pem --key "$KEY" ...

and `write` first checks that a plain-text client and a client without a key
are refused.
"""

import argparse
import json
import re
import sys
import time
import uuid
import zlib

import grpc
from google.protobuf import json_format, struct_pb2, timestamp_pb2
from google.rpc import error_details_pb2, status_pb2  # noqa: F401  (shipped with grpcio-tools' protobuf)

from roncho.v1 import dialectic_pb2, dialectic_pb2_grpc, ingest_pb2, ingest_pb2_grpc, recall_pb2, recall_pb2_grpc, types_pb2

WS = "py-scenario"
OTHER_WS = "py-scenario-other"
NANOID = re.compile(r"^[A-Za-z0-9_-]{21}$")
REPRESENTATION_TIME = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\]")


class Transcript:
    """Records results with generated ids and server times made stable."""

    def __init__(self):
        self.entries = []
        self.ids = {}

    def _stable(self, value, key=None):
        if isinstance(value, dict):
            return {k: self._stable(v, k) for k, v in sorted(value.items())}
        if isinstance(value, list):
            return [self._stable(v) for v in value]
        if isinstance(value, str) and key == "uid":
            return self.ids.setdefault(value, f"<uid{len(self.ids)}>")
        if isinstance(value, str) and NANOID.match(value) and key in ("id", "file_id", "session_id", "message_id"):
            return self.ids.setdefault(value, f"<id{len(self.ids)}>")
        if key == "created_at" and isinstance(value, str) and not value.startswith("2020-"):
            return "<server-time>"
        if key in ("representation", "peer_representation") and isinstance(value, str):
            return REPRESENTATION_TIME.sub("[<server-time>]", value)
        return value

    def record(self, name, message):
        if not hasattr(message, "DESCRIPTOR"):
            value = [json_format.MessageToDict(m, preserving_proto_field_name=True) for m in message]
        else:
            value = json_format.MessageToDict(message, preserving_proto_field_name=True)
        self.entries.append({"step": name, "result": self._stable(value)})
        return message

    def record_error(self, name, error):
        self.entries.append({"step": name, "error": error})


def struct(value):
    s = struct_pb2.Struct()
    s.update(value)
    return s


def ts(text):
    t = timestamp_pb2.Timestamp()
    t.FromJsonString(text)
    return t


# Failures after which a write may or may not have landed, or that pass
# (CANCELLED: the server cut the call off at its deadline).
RETRYABLE = {grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED}


def create_messages(ingest, request, attempts=5, timeout=10):
    """CreateMessages the safe way: one idempotency key per request, the same
    for each retry, so a call that timed out can be sent again without
    writing its messages twice."""
    if not request.HasField("idempotency_key"):
        request.idempotency_key = str(uuid.uuid4())
    for attempt in range(attempts):
        try:
            return ingest.CreateMessages(request, timeout=timeout)
        except grpc.RpcError as error:
            if error.code() not in RETRYABLE or attempt == attempts - 1:
                raise
            time.sleep(0.2 * 2 ** attempt)


def retries_phase(ingest, recall, transcript):
    """A client that gave up waiting retries with its key: stored once."""
    request = ingest_pb2.CreateMessagesRequest(workspace_id=WS, session_id="retries", idempotency_key=str(uuid.uuid4()), messages=[
        types_pb2.MessageCreate(peer_id="alice", content="Did my message land?"),
        types_pb2.MessageCreate(peer_id="bob", content="Send it again and see."),
    ])
    # The client stops waiting at once; the call goes on at the server.
    abandoned = ingest.CreateMessages.future(request)
    try:
        abandoned.result(timeout=0.001)
        gave_up = False
    except grpc.FutureTimeoutError:
        gave_up = True
    retried = create_messages(ingest, request).messages
    first = abandoned.result(timeout=30).messages
    assert [m.id for m in retried] == [m.id for m in first], "the retry returns the first call's messages"
    # A deadline the server sees: the first try may be cut off before or after it wrote.
    deadline_request = ingest_pb2.CreateMessagesRequest(workspace_id=WS, session_id="retries", idempotency_key=str(uuid.uuid4()), messages=[
        types_pb2.MessageCreate(peer_id="alice", content="And with a deadline?"),
    ])
    try:
        ingest.CreateMessages(deadline_request, timeout=0.001)
    except grpc.RpcError as error:
        assert error.code() in RETRYABLE, error
    create_messages(ingest, deadline_request)
    create_messages(ingest, deadline_request)
    stored = transcript.record("retries.stored", recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="retries")))
    assert [m.content for m in stored.items] == ["Did my message land?", "Send it again and see.", "And with a deadline?"], stored
    changed = ingest_pb2.CreateMessagesRequest()
    changed.CopyFrom(request)
    changed.messages[0].content = "Something else"
    expect_error(transcript, "retries.same_key_other_body", grpc.StatusCode.FAILED_PRECONDITION, lambda: ingest.CreateMessages(changed))
    print(f"retries: stored once (the first call {'was abandoned' if gave_up else 'answered at once'})")


def expect_error(transcript, name, code, call, field=None):
    """Calls `call`, requires gRPC `code`, and checks the BadRequest field when given."""
    try:
        call()
    except grpc.RpcError as error:
        assert error.code() == code, f"{name}: expected {code}, got {error.code()}: {error.details()}"
        violation_field = None
        for key, value in error.trailing_metadata() or ():
            if key == "grpc-status-details-bin":
                status = status_pb2.Status.FromString(value)
                for detail in status.details:
                    bad_request = error_details_pb2.BadRequest()
                    if detail.Unpack(bad_request):
                        violation_field = bad_request.field_violations[0].field
        if field is not None:
            assert violation_field == field, f"{name}: BadRequest field {violation_field!r}, expected {field!r}"
        transcript.record_error(name, {"code": error.code().name, "field": violation_field})
        return
    raise AssertionError(f"{name}: expected {code}, but the call succeeded")


def minimal_pdf(text):
    """Returns a one-page PDF showing `text` in Helvetica."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def write_phase(channel, transcript, semantic):
    """`semantic`: the server embeds with the local model (search is hybrid)."""
    ingest = ingest_pb2_grpc.IngestServiceStub(channel)
    recall = recall_pb2_grpc.RecallServiceStub(channel)
    dialectic = dialectic_pb2_grpc.DialecticServiceStub(channel)
    INVALID = grpc.StatusCode.INVALID_ARGUMENT
    NOT_FOUND = grpc.StatusCode.NOT_FOUND

    # Workspaces: get-or-create, metadata replaced, configuration merged.
    first = transcript.record("workspace.create", ingest.GetOrCreateWorkspace(ingest_pb2.GetOrCreateWorkspaceRequest(
        id=WS, metadata=struct({"team": "py"}), configuration=struct({"reasoning": {"enabled": True}}))))
    assert first.created
    again = transcript.record("workspace.again", ingest.GetOrCreateWorkspace(ingest_pb2.GetOrCreateWorkspaceRequest(id=WS, metadata=struct({"team": "other"}))))
    assert not again.created and again.workspace.metadata["team"] == "py"
    updated = transcript.record("workspace.update", ingest.UpdateWorkspace(ingest_pb2.UpdateWorkspaceRequest(
        workspace_id=WS, metadata=struct({"team": "py2"}), configuration=struct({"summary": {"enabled": False}}))))
    assert set(updated.configuration.keys()) == {"reasoning", "summary"}
    expect_error(transcript, "workspace.bad_id", INVALID, lambda: ingest.GetOrCreateWorkspace(ingest_pb2.GetOrCreateWorkspaceRequest(id="bad id")), "id")

    # Peers.
    for peer in ("alice", "bob"):
        transcript.record(f"peer.{peer}", ingest.GetOrCreatePeer(ingest_pb2.GetOrCreatePeerRequest(workspace_id=WS, id=peer, metadata=struct({"name": peer.title()}))))
    transcript.record("peer.update", ingest.UpdatePeer(ingest_pb2.UpdatePeerRequest(workspace_id=WS, peer_id="bob", configuration=struct({"observe_me": False}))))
    deep = {"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}}
    expect_error(transcript, "peer.deep_metadata", INVALID, lambda: ingest.GetOrCreatePeer(ingest_pb2.GetOrCreatePeerRequest(workspace_id=WS, id="x", metadata=struct(deep))), "metadata")

    # Sessions and membership.
    session = transcript.record("session.create", ingest.GetOrCreateSession(ingest_pb2.GetOrCreateSessionRequest(
        workspace_id=WS, id="chat", metadata=struct({"topic": "coffee"}), configuration=struct({"a": 1}),
        peers={"alice": types_pb2.SessionPeerConfig(observe_others=True), "bob": types_pb2.SessionPeerConfig()})))
    assert session.created
    transcript.record("session.update", ingest.UpdateSession(ingest_pb2.UpdateSessionRequest(workspace_id=WS, session_id="chat", configuration=struct({"b": 2}))))
    transcript.record("session.add_peers", ingest.AddSessionPeers(ingest_pb2.AddSessionPeersRequest(workspace_id=WS, session_id="chat", peers={"carol": types_pb2.SessionPeerConfig(observe_me=False)})))
    ingest.SetSessionPeerConfig(ingest_pb2.SetSessionPeerConfigRequest(workspace_id=WS, session_id="chat", peer_id="bob", observe_others=True))
    transcript.record("session.peer_config", recall.GetSessionPeerConfig(recall_pb2.GetSessionPeerConfigRequest(workspace_id=WS, session_id="chat", peer_id="bob")))
    transcript.record("session.peers", recall.ListSessionPeers(recall_pb2.ListSessionPeersRequest(workspace_id=WS, session_id="chat")))
    transcript.record("session.remove_peers", ingest.RemoveSessionPeers(ingest_pb2.RemoveSessionPeersRequest(workspace_id=WS, session_id="chat", peer_ids=["carol"])))
    transcript.record("session.set_peers", ingest.SetSessionPeers(ingest_pb2.SetSessionPeersRequest(workspace_id=WS, session_id="chat", peers={"alice": types_pb2.SessionPeerConfig(observe_others=True), "bob": types_pb2.SessionPeerConfig()})))
    transcript.record("session.peers_after", recall.ListSessionPeers(recall_pb2.ListSessionPeersRequest(workspace_id=WS, session_id="chat")))
    expect_error(transcript, "session.config_of_non_member", NOT_FOUND, lambda: recall.GetSessionPeerConfig(recall_pb2.GetSessionPeerConfigRequest(workspace_id=WS, session_id="chat", peer_id="carol")))

    # Messages: atomic batches, order, token counts, explicit timestamps.
    created = ingest.CreateMessages(ingest_pb2.CreateMessagesRequest(workspace_id=WS, session_id="chat", messages=[
        types_pb2.MessageCreate(peer_id="alice", content="I love a flat white in the morning.", metadata=struct({"mood": "happy", "n": 1})),
        types_pb2.MessageCreate(peer_id="bob", content="Espresso for me, always.", metadata=struct({"mood": "calm", "n": 2, "tags": ["coffee"]})),
        types_pb2.MessageCreate(peer_id="alice", content="Dated message", created_at=ts("2020-01-02T03:04:05Z")),
    ])).messages
    transcript.record("messages.create", created)
    assert [m.seq_in_session for m in created] == [1, 2, 3]
    assert all(m.token_count > 0 for m in created)
    too_many = [types_pb2.MessageCreate(peer_id="alice", content="x")] * 101
    expect_error(transcript, "messages.batch_too_large", INVALID, lambda: ingest.CreateMessages(ingest_pb2.CreateMessagesRequest(workspace_id=WS, session_id="chat", messages=too_many)), "messages")
    half_bad = [types_pb2.MessageCreate(peer_id="alice", content="fine"), types_pb2.MessageCreate(peer_id="alice", content="x" * 25001)]
    expect_error(transcript, "messages.content_too_long", INVALID, lambda: ingest.CreateMessages(ingest_pb2.CreateMessagesRequest(workspace_id=WS, session_id="chat", messages=half_bad)), "messages[1].content")
    expect_error(transcript, "messages.bad_peer", INVALID, lambda: ingest.CreateMessages(ingest_pb2.CreateMessagesRequest(workspace_id=WS, session_id="fresh", messages=[types_pb2.MessageCreate(peer_id="al ice", content="x")])), "messages[0].peer_id")
    listed = recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="chat"))
    assert listed.total == 3, "a rejected batch writes nothing"
    expect_error(transcript, "messages.rejected_session_not_created", NOT_FOUND, lambda: recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="fresh")))

    transcript.record("messages.page2", recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="chat", page=2, size=2)))
    transcript.record("messages.reverse", recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="chat", reverse=True, size=2)))
    transcript.record("messages.filter_metadata", recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="chat", filters=struct({"metadata": {"n": {"gte": 2}}}))))
    transcript.record("messages.filter_or", recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="chat", filters=struct({"OR": [{"peer_id": "bob"}, {"metadata": {"mood": "happy"}}]}))))
    transcript.record("messages.filter_tags", recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="chat", filters=struct({"metadata": {"tags": {"contains": "coffee"}}}))))
    transcript.record("messages.filter_time", recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="chat", filters=struct({"created_at": {"lt": "2021-01-01"}}))))
    expect_error(transcript, "messages.bad_filter_key", INVALID, lambda: recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="chat", filters=struct({"content": "x"}))), "filters.content")
    expect_error(transcript, "messages.page_too_big", INVALID, lambda: recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="chat", size=101)), "size")

    transcript.record("message.get", recall.GetMessage(recall_pb2.GetMessageRequest(workspace_id=WS, session_id="chat", message_id=created[0].id)))
    transcript.record("message.update", ingest.UpdateMessage(ingest_pb2.UpdateMessageRequest(workspace_id=WS, session_id="chat", message_id=created[0].id, metadata=struct({"edited": True}))))
    extra = ingest.CreateMessages(ingest_pb2.CreateMessagesRequest(workspace_id=WS, session_id="chat", messages=[types_pb2.MessageCreate(peer_id="bob", content="my password is hunter2")])).messages[0]
    ingest.DeleteMessage(ingest_pb2.DeleteMessageRequest(workspace_id=WS, session_id="chat", message_id=extra.id))
    expect_error(transcript, "message.deleted", NOT_FOUND, lambda: recall.GetMessage(recall_pb2.GetMessageRequest(workspace_id=WS, session_id="chat", message_id=extra.id)))

    # Files: text in several chunks, JSON, PDF; other types and sizes refused.
    long_text = "\n\n".join(f"Paragraph {i}. " + "words " * 800 for i in range(12))
    uploaded = ingest.UploadFile(ingest_pb2.UploadFileRequest(workspace_id=WS, session_id="docs", peer_id="alice", file=long_text.encode(), filename="notes.txt", content_type="text/plain")).messages
    assert len(uploaded) >= 2 and all(len(m.content) <= 25000 for m in uploaded)
    assert "".join(m.content for m in uploaded) == long_text
    transcript.record("file.text", uploaded)
    transcript.record("file.json", ingest.UploadFile(ingest_pb2.UploadFileRequest(workspace_id=WS, session_id="docs", peer_id="alice", file=b'{"b":[1,2],"a":"\\u00e9"}', filename="d.json", content_type="application/json")).messages)
    pdf = ingest.UploadFile(ingest_pb2.UploadFileRequest(workspace_id=WS, session_id="docs", peer_id="alice", file=minimal_pdf("Hello from a PDF"), filename="hello.pdf", content_type="application/pdf")).messages
    assert "Hello from a PDF" in pdf[0].content, pdf[0].content
    transcript.record("file.pdf", pdf)
    expect_error(transcript, "file.unsupported", INVALID, lambda: ingest.UploadFile(ingest_pb2.UploadFileRequest(workspace_id=WS, session_id="docs", peer_id="alice", file=b"\x89PNG", filename="x.png", content_type="image/png")), "content_type")
    expect_error(transcript, "file.too_large", INVALID, lambda: ingest.UploadFile(ingest_pb2.UploadFileRequest(workspace_id=WS, session_id="docs", peer_id="alice", file=b"a" * (5 * 1024 * 1024 + 1), filename="big.txt", content_type="text/plain")), "file")

    # Clone up to an inclusive cutoff.
    clone = transcript.record("session.clone", ingest.CloneSession(ingest_pb2.CloneSessionRequest(workspace_id=WS, session_id="chat", message_id=created[1].id)))
    transcript.record("session.clone_messages", recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id=clone.id)))

    # Isolation: the same names in another workspace never see this one's data.
    ingest.CreateMessages(ingest_pb2.CreateMessagesRequest(workspace_id=OTHER_WS, session_id="chat", messages=[types_pb2.MessageCreate(peer_id="alice", content="other workspace")]))
    other = transcript.record("isolation.list", recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=OTHER_WS, session_id="chat")))
    assert [m.content for m in other.items] == ["other workspace"]
    expect_error(transcript, "isolation.get", NOT_FOUND, lambda: recall.GetMessage(recall_pb2.GetMessageRequest(workspace_id=OTHER_WS, session_id="chat", message_id=created[0].id)))
    expect_error(transcript, "isolation.clone", NOT_FOUND, lambda: ingest.CloneSession(ingest_pb2.CloneSessionRequest(workspace_id=OTHER_WS, session_id="chat", message_id=created[0].id)))

    # Webhooks.
    hook = transcript.record("webhook.create", ingest.CreateWebhook(ingest_pb2.CreateWebhookRequest(workspace_id=WS, url="https://example.com/hook")))
    assert hook.created
    assert not ingest.CreateWebhook(ingest_pb2.CreateWebhookRequest(workspace_id=WS, url="https://example.com/hook")).created
    expect_error(transcript, "webhook.loopback", INVALID, lambda: ingest.CreateWebhook(ingest_pb2.CreateWebhookRequest(workspace_id=WS, url="http://127.0.0.1/x")), "url")
    transcript.record("webhook.list", recall.ListWebhooks(recall_pb2.ListWebhooksRequest(workspace_id=WS)))
    ingest.DeleteWebhook(ingest_pb2.DeleteWebhookRequest(workspace_id=WS, endpoint_id=hook.webhook.id))
    expect_error(transcript, "webhook.deleted", NOT_FOUND, lambda: ingest.DeleteWebhook(ingest_pb2.DeleteWebhookRequest(workspace_id=WS, endpoint_id=hook.webhook.id)))

    # Deletes: a peer with its messages, a session at once, a workspace only when idle.
    ingest.CreateMessages(ingest_pb2.CreateMessagesRequest(workspace_id=WS, session_id="chat", messages=[types_pb2.MessageCreate(peer_id="dave", content="forget me")]))
    ingest.DeletePeer(ingest_pb2.DeletePeerRequest(workspace_id=WS, peer_id="dave"))
    after_peer_delete = recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="chat", filters=struct({"peer_id": "dave"})))
    assert after_peer_delete.total == 0
    ingest.GetOrCreateSession(ingest_pb2.GetOrCreateSessionRequest(workspace_id=WS, id="scratch"))
    ingest.DeleteSession(ingest_pb2.DeleteSessionRequest(workspace_id=WS, session_id="scratch"))
    transcript.record("sessions.list", recall.ListSessions(recall_pb2.ListSessionsRequest(workspace_id=WS, filters=struct({"id": {"ne": clone.id}}))))
    transcript.record("peer_sessions.list", recall.ListPeerSessions(recall_pb2.ListPeerSessionsRequest(workspace_id=WS, peer_id="bob")))
    transcript.record("peers.list", recall.ListPeers(recall_pb2.ListPeersRequest(workspace_id=WS, filters=struct({"metadata": {"name": "Alice"}}))))
    expect_error(transcript, "workspace.delete_busy", grpc.StatusCode.FAILED_PRECONDITION, lambda: ingest.DeleteWorkspace(ingest_pb2.DeleteWorkspaceRequest(workspace_id=OTHER_WS)))
    ingest.DeleteSession(ingest_pb2.DeleteSessionRequest(workspace_id=OTHER_WS, session_id="chat"))
    ingest.DeleteWorkspace(ingest_pb2.DeleteWorkspaceRequest(workspace_id=OTHER_WS))
    transcript.record("workspaces.list", recall.ListWorkspaces(recall_pb2.ListWorkspacesRequest(filters=struct({"id": {"contains": "py-scenario"}}))))

    # Search: full text with stemming, scoped, never an error for odd queries.
    hits = recall.SearchMessages(recall_pb2.SearchMessagesRequest(workspace_id=WS, query="Who drinks espressos?", limit=5))
    if semantic:
        # By meaning too: the nearest messages fill the page after the matches.
        assert hits.mode == "hybrid" and not hits.degraded_reason, hits
        assert hits.messages[0].content == "Espresso for me, always.", hits
    else:
        assert {m.content for m in hits.messages} == {"Espresso for me, always."}, hits  # the original and its clone
        assert hits.mode == "full_text" and hits.degraded_reason
    transcript.record("search.workspace", hits)
    # The dialectic reads the same memory (extractively: no model is configured).
    answer = dialectic.Chat(dialectic_pb2.ChatRequest(workspace_id=WS, peer_id="alice", target="bob", query="What does bob drink?"))
    assert answer.HasField("content") and "Espresso" in answer.content, answer
    transcript.record("search.session_peer", recall.SearchMessages(recall_pb2.SearchMessagesRequest(workspace_id=WS, session_id="chat", peer_id="alice", query="flat white morning")))
    odd = recall.SearchMessages(recall_pb2.SearchMessagesRequest(workspace_id=WS, query="\"'); DROP TABLE messages; -- NEAR(*)"))
    transcript.record("search.hostile", odd)
    expect_error(transcript, "search.empty", INVALID, lambda: recall.SearchMessages(recall_pb2.SearchMessagesRequest(workspace_id=WS, query="  ")), "query")

    # Conclusions, peer cards, representation and context.
    made = ingest.CreateConclusions(ingest_pb2.CreateConclusionsRequest(workspace_id=WS, conclusions=[
        types_pb2.ConclusionCreate(observer_id="alice", observed_id="bob", content="Bob drinks espresso", session_id="chat"),
        types_pb2.ConclusionCreate(observer_id="bob", observed_id="bob", content="I always order espresso"),
    ])).conclusions
    transcript.record("conclusions.create", made)
    expect_error(transcript, "conclusions.unknown_peer", NOT_FOUND, lambda: ingest.CreateConclusions(ingest_pb2.CreateConclusionsRequest(workspace_id=WS, conclusions=[types_pb2.ConclusionCreate(observer_id="alice", observed_id="nobody", content="x")])))
    transcript.record("conclusions.list", recall.ListConclusions(recall_pb2.ListConclusionsRequest(workspace_id=WS, filters=struct({"observer_id": "alice"}))))
    ingest.DeleteConclusion(ingest_pb2.DeleteConclusionRequest(workspace_id=WS, conclusion_id=made[1].id))
    assert recall.ListConclusions(recall_pb2.ListConclusionsRequest(workspace_id=WS)).total == 1
    transcript.record("card.set", ingest.SetPeerCard(ingest_pb2.SetPeerCardRequest(workspace_id=WS, peer_id="alice", target="bob", peer_card=["ATTRIBUTE: drinks espresso"])))
    transcript.record("card.get", recall.GetPeerCard(recall_pb2.GetPeerCardRequest(workspace_id=WS, peer_id="alice", target="bob")))
    assert not recall.GetPeerCard(recall_pb2.GetPeerCardRequest(workspace_id=WS, peer_id="bob")).exists
    rep = recall.GetRepresentation(recall_pb2.GetRepresentationRequest(workspace_id=WS, peer_id="alice", target="bob"))
    assert rep.representation.startswith("## Explicit Observations\n\n[") and rep.representation.endswith("] Bob drinks espresso"), rep
    transcript.record("peer.context", recall.GetPeerContext(recall_pb2.GetPeerContextRequest(workspace_id=WS, peer_id="alice", target="bob")))
    # `tokens` bounds all of it: the card a quarter at most, the
    # representation the rest of half, the messages what is left.
    context = recall.GetSessionContext(recall_pb2.GetSessionContextRequest(workspace_id=WS, session_id="chat", tokens=30, peer_target="bob", peer_perspective="alice"))
    assert context.peer_card == ["ATTRIBUTE: drinks espresso"] and context.omitted_peer_card_lines == 0, context
    assert context.peer_representation == "" and context.omitted_conclusions == 1, "too large for what is left of half: left out, and said so"
    assert 0 < len(context.messages) < 4, "the budget keeps only the newest messages"
    roomy = recall.GetSessionContext(recall_pb2.GetSessionContextRequest(workspace_id=WS, session_id="chat", tokens=200, peer_target="bob", peer_perspective="alice"))
    assert "Bob drinks espresso" in roomy.peer_representation and roomy.omitted_conclusions == 0, roomy
    transcript.record("session.context", context)
    expect_error(transcript, "context.perspective_without_target", INVALID, lambda: recall.GetSessionContext(recall_pb2.GetSessionContextRequest(workspace_id=WS, session_id="chat", peer_perspective="alice")), "peer_perspective")

    expect_error(transcript, "query_conclusions.no_collection", INVALID, lambda: recall.QueryConclusions(recall_pb2.QueryConclusionsRequest(workspace_id=WS, query="coffee")), "filters")
    query = recall_pb2.QueryConclusionsRequest(workspace_id=WS, query="coffee", filters=struct({"observer_id": "alice", "observed_id": "bob"}))
    if semantic:
        # The conclusion's vector is synced by the reconciler within seconds.
        for _ in range(100):
            near = recall.QueryConclusions(query).conclusions
            if near:
                break
            time.sleep(0.1)
        assert [c.content for c in near] == ["Bob drinks espresso"], near
    else:
        # Without an embedder, semantic queries say so.
        expect_error(transcript, "query_conclusions.no_embedder", grpc.StatusCode.FAILED_PRECONDITION, lambda: recall.QueryConclusions(query))

    retries_phase(ingest, recall, transcript)


def verify_phase(channel, saved):
    """Checks that a restarted server still holds what the write phase stored."""
    recall = recall_pb2_grpc.RecallServiceStub(channel)
    transcript = Transcript()
    transcript.record("messages.all", recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="chat", size=100)))
    transcript.record("sessions.list", recall.ListSessions(recall_pb2.ListSessionsRequest(workspace_id=WS)))
    transcript.record("workspaces.list", recall.ListWorkspaces(recall_pb2.ListWorkspacesRequest(filters=struct({"id": {"contains": "py-scenario"}}))))
    written = saved["after_write"]
    assert transcript.entries == written, "data changed across the restart:\n" + json.dumps({"before": written, "after": transcript.entries}, indent=1)


def snapshot(channel):
    recall = recall_pb2_grpc.RecallServiceStub(channel)
    transcript = Transcript()
    transcript.record("messages.all", recall.ListMessages(recall_pb2.ListMessagesRequest(workspace_id=WS, session_id="chat", size=100)))
    transcript.record("sessions.list", recall.ListSessions(recall_pb2.ListSessionsRequest(workspace_id=WS)))
    transcript.record("workspaces.list", recall.ListWorkspaces(recall_pb2.ListWorkspacesRequest(filters=struct({"id": {"contains": "py-scenario"}}))))
    return transcript.entries


OPTIONS = [("grpc.max_send_message_length", 16 * 1024 * 1024)]


def check_refusals(target, tls):
    """A plain-text client gets no answer; a TLS client without a key is UNAUTHENTICATED."""
    plain = grpc.insecure_channel(target, options=OPTIONS)
    try:
        recall_pb2_grpc.RecallServiceStub(plain).ListWorkspaces(recall_pb2.ListWorkspacesRequest(), timeout=5)
        raise SystemExit("a plain-text client got an answer from the TLS server")
    except grpc.RpcError as error:
        assert error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), error
    keyless = grpc.secure_channel(target, tls, options=OPTIONS)
    try:
        recall_pb2_grpc.RecallServiceStub(keyless).ListWorkspaces(recall_pb2.ListWorkspacesRequest(), timeout=10)
        raise SystemExit("a client without a key got an answer")
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
    print("refusals: plain text unavailable, no key unauthenticated")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--phase", choices=["write", "verify"], required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--ca-file", help="CA of the server's TLS certificate: connect over TLS")
    parser.add_argument("--key", help="API key, sent as authorization: Bearer <key>")
    parser.add_argument("--semantic", action="store_true", help="the server embeds with the local model")
    args = parser.parse_args()
    if args.ca_file:
        with open(args.ca_file, "rb") as ca:
            tls = grpc.ssl_channel_credentials(root_certificates=ca.read())
        credentials = tls
        if args.key:
            credentials = grpc.composite_channel_credentials(tls, grpc.access_token_call_credentials(args.key))
        channel = grpc.secure_channel(args.target, credentials, options=OPTIONS)
    else:
        channel = grpc.insecure_channel(args.target, options=OPTIONS)
    grpc.channel_ready_future(channel).result(timeout=30)
    if args.ca_file and args.phase == "write":
        # The server is up now: what it refuses, it refuses for a reason.
        check_refusals(args.target, tls)
    if args.phase == "write":
        transcript = Transcript()
        write_phase(channel, transcript, args.semantic)
        with open(args.out, "w") as out:
            json.dump({"scenario": transcript.entries, "after_write": snapshot(channel)}, out, indent=1, sort_keys=True)
        print(f"scenario: {len(transcript.entries)} steps recorded, crc {zlib.crc32(json.dumps(transcript.entries, sort_keys=True).encode()):08x}")
    else:
        with open(args.out) as saved:
            verify_phase(channel, json.load(saved))
        print("verify: data survived the restart")


if __name__ == "__main__":
    sys.exit(main())
