//! The gRPC edge: every `roncho.v1` service is one generated table of
//! methods over [`call`], which takes the caller the [`DoorLayer`]
//! authenticated, converts the request, authorizes it through the gate's
//! [`CallPolicy`], calls the domain service and converts its reply.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::StreamExt;
use futures::stream::BoxStream;
use roncho_core::{Caller, Error};
use roncho_proto::v1 as pb;
use tonic::{Request, Response, Status};

use roncho_gate::authz::Authorize;
use roncho_gate::keys::KeyIssuer;
use roncho_gate::{BoxError, CallPolicy, DeadlineBody, Door, Peer, SlotBody, StatusClass, Wire};
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use tracing::Instrument;

use crate::convert::{FromWire, IntoWire};
use crate::error::status;

/// Runs one gRPC call through `policy`: the caller the [`DoorLayer`]
/// authenticated, the request in domain terms, its authorization and rate
/// (see [`CallPolicy::run`]), the service (`op`), the reply in wire terms. A
/// refused call has done nothing.
pub async fn call<W, D, R, O, F, Fut>(policy: &CallPolicy, request: Request<W>, op: F) -> Result<Response<O>, Status>
where
    D: FromWire<W> + Authorize + Sync,
    R: IntoWire<O>,
    F: FnOnce(D) -> Fut,
    Fut: Future<Output = roncho_core::Result<R>>,
{
    let caller = request
        .extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| Status::unauthenticated("no authenticated caller"))?;
    let request = D::from_wire(request.into_inner());
    let reply = policy.run(caller, request, op).await.map_err(status)?;
    Ok(Response::new(reply.into_wire()))
}

/// A streamed reply on the wire.
pub type WireStream<T> = BoxStream<'static, Result<T, Status>>;

impl<D: IntoWire<W> + 'static, W: 'static> IntoWire<WireStream<W>> for BoxStream<'static, roncho_core::Result<D>> {
    fn into_wire(self) -> WireStream<W> {
        Box::pin(self.map(|item| item.map(IntoWire::into_wire).map_err(status)))
    }
}

/// Generates a service's gRPC server over its domain trait: each method
/// is [`call`] through the [`CallPolicy`] on the method of the same name.
macro_rules! grpc_service {
    (
        $(#[$doc:meta])*
        $name:ident: $server:path, over $api:ty {
            $(type $assoc:ident = $assoc_ty:ty;)*
            $(rpc $method:ident($request:ident) -> $response:ty;)*
        }
    ) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            policy: CallPolicy,
            api: Arc<$api>,
        }

        impl $name {
            /// Returns the server calling `api` through `policy`.
            pub fn new(policy: CallPolicy, api: Arc<$api>) -> Self {
                Self { policy, api }
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }

        #[tonic::async_trait]
        impl $server for $name {
            $(type $assoc = $assoc_ty;)*
            $(
                async fn $method(&self, request: Request<pb::$request>) -> Result<Response<$response>, Status> {
                    let api = self.api.clone();
                    call(&self.policy, request, |request| async move { api.$method(request).await }).await
                }
            )*
        }
    };
}

pub use pb::deriver_service_server::{DeriverService, DeriverServiceServer};
pub use pb::dialectic_service_server::{DialecticService, DialecticServiceServer};
pub use pb::dreamer_service_server::{DreamerService, DreamerServiceServer};
pub use pb::ingest_service_server::{IngestService, IngestServiceServer};
pub use pb::key_service_server::{KeyService, KeyServiceServer};
pub use pb::recall_service_server::{RecallService, RecallServiceServer};

grpc_service! {
    /// `roncho.v1.IngestService`: every write.
    GrpcIngest: IngestService, over dyn roncho_ingest::IngestApi {
        rpc get_or_create_workspace(GetOrCreateWorkspaceRequest) -> pb::GetOrCreateWorkspaceResponse;
        rpc update_workspace(UpdateWorkspaceRequest) -> pb::Workspace;
        rpc delete_workspace(DeleteWorkspaceRequest) -> pb::DeleteWorkspaceResponse;
        rpc get_or_create_peer(GetOrCreatePeerRequest) -> pb::GetOrCreatePeerResponse;
        rpc update_peer(UpdatePeerRequest) -> pb::Peer;
        rpc delete_peer(DeletePeerRequest) -> pb::DeletePeerResponse;
        rpc get_or_create_session(GetOrCreateSessionRequest) -> pb::GetOrCreateSessionResponse;
        rpc update_session(UpdateSessionRequest) -> pb::Session;
        rpc delete_session(DeleteSessionRequest) -> pb::DeleteSessionResponse;
        rpc clone_session(CloneSessionRequest) -> pb::Session;
        rpc add_session_peers(AddSessionPeersRequest) -> pb::Session;
        rpc set_session_peers(SetSessionPeersRequest) -> pb::Session;
        rpc remove_session_peers(RemoveSessionPeersRequest) -> pb::Session;
        rpc set_session_peer_config(SetSessionPeerConfigRequest) -> pb::SetSessionPeerConfigResponse;
        rpc create_messages(CreateMessagesRequest) -> pb::CreateMessagesResponse;
        rpc upload_file(UploadFileRequest) -> pb::UploadFileResponse;
        rpc update_message(UpdateMessageRequest) -> pb::Message;
        rpc delete_message(DeleteMessageRequest) -> pb::DeleteMessageResponse;
        rpc create_conclusions(CreateConclusionsRequest) -> pb::CreateConclusionsResponse;
        rpc delete_conclusion(DeleteConclusionRequest) -> pb::DeleteConclusionResponse;
        rpc set_peer_card(SetPeerCardRequest) -> pb::PeerCardResponse;
        rpc create_webhook(CreateWebhookRequest) -> pb::CreateWebhookResponse;
        rpc delete_webhook(DeleteWebhookRequest) -> pb::DeleteWebhookResponse;
        rpc test_webhook(TestWebhookRequest) -> pb::TestWebhookResponse;
        rpc get_or_create_scope(GetOrCreateScopeRequest) -> pb::GetOrCreateScopeResponse;
        rpc add_scope_sessions(AddScopeSessionsRequest) -> pb::AddScopeSessionsResponse;
        rpc remove_scope_session(RemoveScopeSessionRequest) -> pb::RemoveScopeSessionResponse;
        rpc import_records(ImportRecordsRequest) -> pb::ImportRecordsResponse;
    }
}

grpc_service! {
    /// `roncho.v1.RecallService`: every read.
    GrpcRecall: RecallService, over dyn roncho_recall::RecallApi {
        type ExportWorkspaceStream = WireStream<pb::ExportRecord>;
        rpc list_workspaces(ListWorkspacesRequest) -> pb::ListWorkspacesResponse;
        rpc list_peers(ListPeersRequest) -> pb::ListPeersResponse;
        rpc list_sessions(ListSessionsRequest) -> pb::ListSessionsResponse;
        rpc list_peer_sessions(ListPeerSessionsRequest) -> pb::ListSessionsResponse;
        rpc list_session_peers(ListSessionPeersRequest) -> pb::ListPeersResponse;
        rpc get_session_peer_config(GetSessionPeerConfigRequest) -> pb::SessionPeerConfig;
        rpc list_messages(ListMessagesRequest) -> pb::ListMessagesResponse;
        rpc get_message(GetMessageRequest) -> pb::Message;
        rpc search_messages(SearchMessagesRequest) -> pb::SearchMessagesResponse;
        rpc get_session_context(GetSessionContextRequest) -> pb::SessionContext;
        rpc get_session_summaries(GetSessionSummariesRequest) -> pb::SessionSummaries;
        rpc get_peer_context(GetPeerContextRequest) -> pb::PeerContext;
        rpc get_representation(GetRepresentationRequest) -> pb::GetRepresentationResponse;
        rpc get_peer_card(GetPeerCardRequest) -> pb::PeerCardResponse;
        rpc get_erasure_receipt(GetErasureReceiptRequest) -> pb::ErasureReceipt;
        rpc list_conclusions(ListConclusionsRequest) -> pb::ListConclusionsResponse;
        rpc get_conclusion(GetConclusionRequest) -> pb::Conclusion;
        rpc query_conclusions(QueryConclusionsRequest) -> pb::QueryConclusionsResponse;
        rpc list_webhooks(ListWebhooksRequest) -> pb::ListWebhooksResponse;
        rpc list_scopes(ListScopesRequest) -> pb::ListScopesResponse;
        rpc get_scope(GetScopeRequest) -> pb::Scope;
        rpc list_scope_sessions(ListScopeSessionsRequest) -> pb::ListSessionsResponse;
        rpc get_scope_status(GetScopeRequest) -> pb::ScopeStatus;
        rpc export_workspace(ExportWorkspaceRequest) -> WireStream<pb::ExportRecord>;
    }
}

grpc_service! {
    /// `roncho.v1.DialecticService`: answers about peers.
    GrpcDialectic: DialecticService, over dyn roncho_dialectic::DialecticApi {
        type ChatStreamStream = WireStream<pb::ChatStreamResponse>;
        type WorkspaceChatStreamStream = WireStream<pb::ChatStreamResponse>;
        rpc chat(ChatRequest) -> pb::ChatResponse;
        rpc chat_stream(ChatRequest) -> WireStream<pb::ChatStreamResponse>;
        rpc workspace_chat(ChatRequest) -> pb::ChatResponse;
        rpc workspace_chat_stream(ChatRequest) -> WireStream<pb::ChatStreamResponse>;
        rpc get_reasoning_trace(GetReasoningTraceRequest) -> pb::ReasoningTrace;
    }
}

grpc_service! {
    /// `roncho.v1.DeriverService`: queue status.
    GrpcDeriver: DeriverService, over dyn roncho_deriver::DeriverApi {
        rpc get_queue_status(GetQueueStatusRequest) -> pb::QueueStatus;
        rpc retry_failed_work(RetryFailedWorkRequest) -> pb::RetryFailedWorkResponse;
    }
}

grpc_service! {
    /// `roncho.v1.DreamerService`: dreams on request.
    GrpcDreamer: DreamerService, over dyn roncho_dreamer::DreamerApi {
        rpc schedule_dream(ScheduleDreamRequest) -> pb::ScheduleDreamResponse;
    }
}

grpc_service! {
    /// `roncho.v1.KeyService`: API keys.
    GrpcKeys: KeyService, over KeyIssuer {
        rpc create_key(CreateKeyRequest) -> pb::CreateKeyResponse;
        rpc assign_workspace(AssignWorkspaceRequest) -> pb::AssignWorkspaceResponse;
    }
}

/// The package whose calls need an authenticated caller; health and
/// reflection stay open (probes, tooling).
const AUTHENTICATED_PREFIX: &str = "/roncho.v1.";

/// Methods served besides roncho.v1's.
const OTHER_METHODS: [&str; 4] = [
    "grpc.health.v1.Health/Check",
    "grpc.health.v1.Health/Watch",
    "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

/// Returns the method a request path names when the server has it, else
/// `unknown`: labels and span names never carry what a client made up.
pub fn known_method(path: &str) -> &'static str {
    static KNOWN: std::sync::OnceLock<std::collections::HashSet<&'static str>> = std::sync::OnceLock::new();
    let known = KNOWN.get_or_init(|| {
        use prost::Message as _;
        let descriptors = prost_types::FileDescriptorSet::decode(roncho_proto::FILE_DESCRIPTOR_SET)
            .expect("the compiled-in descriptors decode");
        let roncho = descriptors.file.iter().flat_map(|file| {
            file.service.iter().flat_map(move |service| {
                service
                    .method
                    .iter()
                    .map(move |method| format!("{}.{}/{}", file.package(), service.name(), method.name()))
            })
        });
        // Leaked once: the set lives as long as the process.
        roncho
            .map(|name| &*Box::leak(name.into_boxed_str()))
            .chain(OTHER_METHODS)
            .collect()
    });
    path.strip_prefix('/')
        .and_then(|method| known.get(method).copied())
        .unwrap_or("unknown")
}

/// Whose failure a reply of `code` to `method` is (OpenTelemetry's rule
/// for gRPC server spans): a method the server does not have is the
/// caller's mistake whatever it is answered, and so is a request prost
/// could not decode (answered `INTERNAL` by the services outside
/// roncho.v1, whose codec is tonic's: `message`).
fn class_of(method: &str, code: tonic::Code, message: Option<&str>) -> StatusClass {
    let undecodable = || message.is_some_and(|message| message.starts_with("failed%20to%20decode"));
    match code {
        tonic::Code::Ok => StatusClass::Ok,
        _ if method == "unknown" => StatusClass::ClientError,
        tonic::Code::Internal if undecodable() => StatusClass::ClientError,
        tonic::Code::Unknown
        | tonic::Code::DeadlineExceeded
        | tonic::Code::Unimplemented
        | tonic::Code::Internal
        | tonic::Code::Unavailable
        | tonic::Code::DataLoss => StatusClass::ServerError,
        _ => StatusClass::ClientError,
    }
}

/// The code a reply's head carries, and its message: errors come back
/// trailers-only, with the status in the headers; a reply's own status
/// comes in its trailers, after this: `Ok` here.
fn code_of<R>(response: &http::Response<R>) -> (tonic::Code, Option<&str>) {
    status_in(response.headers()).unwrap_or((tonic::Code::Ok, None))
}

/// The gRPC status `headers` (a head or trailers) carry, if they carry one.
fn status_in(headers: &http::HeaderMap) -> Option<(tonic::Code, Option<&str>)> {
    let code = headers
        .get("grpc-status")?
        .to_str()
        .ok()
        .and_then(|value| value.parse::<i32>().ok())
        .map_or(tonic::Code::Unknown, tonic::Code::from);
    Some((code, headers.get("grpc-message").and_then(|value| value.to_str().ok())))
}

/// Ends a call's visit with the status its reply carried (`None`: the
/// transport failed).
type Finish = Box<dyn FnOnce(Option<(tonic::Code, Option<&str>)>) + Send>;

/// A reply body that ends its call's visit when the reply ends: with the
/// status its trailers carry (a stream's error comes there, after a head
/// that said nothing), or cancelled when the client goes away first (the
/// visit is dropped unfinished).
pub struct Finishing<B> {
    body: B,
    finish: Option<Finish>,
}

impl<B> Finishing<B> {
    /// The body itself.
    pub fn get_ref(&self) -> &B {
        &self.body
    }

    fn end(&mut self, status: Option<(tonic::Code, Option<&str>)>) {
        if let Some(finish) = self.finish.take() {
            finish(status);
        }
    }
}

impl<B> http_body::Body for Finishing<B>
where
    B: http_body::Body + Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let frame = std::task::ready!(Pin::new(&mut this.body).poll_frame(context));
        match &frame {
            Some(Ok(frame)) => {
                if let Some(trailers) = frame.trailers_ref() {
                    this.end(Some(status_in(trailers).unwrap_or((tonic::Code::Ok, None))));
                }
            }
            Some(Err(_)) => this.end(None),
            None => this.end(Some((tonic::Code::Ok, None))),
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl<B: Default> Default for Finishing<B> {
    fn default() -> Self {
        Self {
            body: B::default(),
            finish: None,
        }
    }
}

/// The door's layer on the gRPC wire, before any body is read: the call's visit (its span,
/// continuing the caller's `traceparent`, and its count by method and
/// status), then the [`Door`] (authentication of `roncho.v1` calls, then
/// admission), the request's deadline and its body's, each refusal a gRPC
/// status.
#[derive(Debug, Clone)]
pub struct DoorLayer {
    door: Door,
}

impl DoorLayer {
    /// Returns the layer passing every call through `door`.
    pub fn new(door: Door) -> Self {
        Self { door }
    }
}

impl<S> tower_layer::Layer<S> for DoorLayer {
    type Service = DoorService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DoorService {
            inner,
            door: self.door.clone(),
        }
    }
}

/// A service behind [`DoorLayer`].
#[derive(Debug, Clone)]
pub struct DoorService<S> {
    inner: S,
    door: Door,
}

/// The peer address tonic's listener gave a request, for the door.
fn peer_of<B>(request: &http::Request<B>) -> Option<Peer> {
    let extensions = request.extensions();
    extensions
        .get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .or_else(|| {
            extensions
                .get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|info| info.get_ref().remote_addr())
        })
        .map(Peer)
}

/// A body error in gRPC's terms: the status the call ends with.
fn grpc_body_error(error: Error) -> BoxError {
    Box::new(status(error))
}

impl<S, B, R> tower_service::Service<http::Request<B>> for DoorService<S>
where
    S: tower_service::Service<http::Request<DeadlineBody<B>>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = http::Response<SlotBody<Finishing<R>>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let refused = |error: Error| {
            status(error)
                .into_http::<R>()
                .map(|body| SlotBody::new(Finishing { body, finish: None }, None))
        };
        let method = known_method(request.uri().path());
        let authenticate = request.uri().path().starts_with(AUTHENTICATED_PREFIX);
        // Probes and tooling come every few seconds: counted, not traced.
        let visit = self
            .door
            .visit(Wire::Grpc, method.to_owned(), None, request.headers(), authenticate);
        let span = visit.span().clone();
        let (service, name) = method.split_once('/').unwrap_or((method, ""));
        span.record("rpc.system", "grpc");
        span.record("rpc.service", service);
        span.record("rpc.method", name);
        let finish: Finish = Box::new(move |reply: Option<(tonic::Code, Option<&str>)>| match reply {
            Some((code, message)) => {
                visit.span().record("rpc.grpc.status_code", code as i32);
                visit.finish(class_of(method, code, message), &format!("{code:?}"));
            }
            None => visit.finish(StatusClass::ServerError, "transport_error"),
        });
        if let Some(peer) = peer_of(&request) {
            request.extensions_mut().insert(peer);
        }
        let pass = match self.door.enter(&request, authenticate) {
            Ok(pass) => pass,
            Err(error) => {
                let response = refused(error);
                finish(Some(code_of(&response)));
                return Box::pin(async move { Ok(response) });
            }
        };
        let (mut parts, body) = request.into_parts();
        if let Some(caller) = pass.caller {
            parts.extensions.insert(caller);
        }
        let request = http::Request::from_parts(parts, DeadlineBody::new(body, pass.body_timeout, grpc_body_error));
        let response = span.in_scope(|| self.inner.call(request));
        let (door, slot) = (self.door.clone(), pass.slot);
        Box::pin(
            async move {
                let response = match pass.timeout {
                    None => response.await,
                    Some(timeout) => match tokio::time::timeout(timeout, response).await {
                        Ok(response) => response,
                        Err(_) => {
                            let response = refused(door.timed_out(timeout));
                            finish(Some(code_of(&response)));
                            return Ok(response);
                        }
                    },
                };
                let response = match response {
                    Ok(response) => response,
                    Err(error) => {
                        finish(None);
                        return Err(error);
                    }
                };
                // An error comes in the head (trailers-only); a reply's own
                // status in its trailers, when its body ends.
                let finish = match status_in(response.headers()) {
                    Some(status) => {
                        finish(Some(status));
                        None
                    }
                    None => Some(finish),
                };
                // The place is held until the reply's body ends.
                Ok(response.map(|body| SlotBody::holding(Finishing { body, finish }, slot)))
            }
            .instrument(span),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use roncho_gate::admission::{Admission, Limits};

    /// A reply body of `frames`, then its end.
    struct Frames(std::collections::VecDeque<http_body::Frame<bytes::Bytes>>);

    impl http_body::Body for Frames {
        type Data = bytes::Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
            Poll::Ready(self.get_mut().0.pop_front().map(Ok))
        }
    }

    /// A reply of a data frame and `trailers`, and what its visit was told.
    fn finishing(trailers: Option<(&str, &str)>) -> (Finishing<Frames>, Arc<std::sync::Mutex<Vec<String>>>) {
        let mut frames = std::collections::VecDeque::from([http_body::Frame::data(bytes::Bytes::from_static(b"x"))]);
        if let Some((code, message)) = trailers {
            let mut headers = http::HeaderMap::new();
            headers.insert("grpc-status", code.parse().unwrap());
            headers.insert("grpc-message", message.parse().unwrap());
            frames.push_back(http_body::Frame::trailers(headers));
        }
        let told = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = told.clone();
        let finish: Finish = Box::new(move |status| {
            seen.lock().unwrap().push(format!("{status:?}"));
        });
        (
            Finishing {
                body: Frames(frames),
                finish: Some(finish),
            },
            told,
        )
    }

    /// The next frame of `body`.
    async fn next_frame(body: &mut Finishing<Frames>) -> Option<http_body::Frame<bytes::Bytes>> {
        std::future::poll_fn(|context| http_body::Body::poll_frame(Pin::new(&mut *body), context))
            .await
            .map(|frame| frame.unwrap())
    }

    /// Reads `body` to its end.
    async fn read_out(mut body: Finishing<Frames>) {
        while next_frame(&mut body).await.is_some() {}
    }

    #[tokio::test]
    async fn a_reply_ends_its_visit_with_the_status_its_trailers_carry() {
        // A stream that fails after its head: the error is in the trailers.
        let (body, told) = finishing(Some(("13", "the model went away")));
        read_out(body).await;
        assert_eq!(
            *told.lock().unwrap(),
            [r#"Some((Internal, Some("the model went away")))"#]
        );
        // A reply that ends well.
        let (body, told) = finishing(Some(("0", "")));
        read_out(body).await;
        assert_eq!(*told.lock().unwrap(), ["Some((Ok, Some(\"\")))"]);
        // A body that ends without trailers.
        let (body, told) = finishing(None);
        read_out(body).await;
        assert_eq!(*told.lock().unwrap(), ["Some((Ok, None))"]);
        // A client that goes away before the end: the visit is dropped
        // unfinished (and so counted cancelled), never told it went well.
        let (mut body, told) = finishing(Some(("0", "")));
        next_frame(&mut body).await.unwrap();
        drop(body);
        assert!(told.lock().unwrap().is_empty());
    }

    #[test]
    fn methods_are_named_only_when_the_server_has_them_at_that_exact_path() {
        assert_eq!(
            known_method("/roncho.v1.IngestService/CreateMessages"),
            "roncho.v1.IngestService/CreateMessages"
        );
        assert_eq!(
            known_method("/grpc.health.v1.Health/Check"),
            "grpc.health.v1.Health/Check"
        );
        for path in [
            "//roncho.v1.IngestService/CreateMessages",
            "roncho.v1.IngestService/CreateMessages",
            "/roncho.v1.IngestService/CreateMessages/",
            "/roncho.v1.IngestService/MadeUp",
            "/",
            "",
        ] {
            assert_eq!(known_method(path), "unknown", "{path}");
        }
    }

    #[test]
    fn a_caller_cannot_make_its_mistakes_the_servers() {
        use tonic::Code;
        let method = "roncho.v1.IngestService/CreateMessages";
        assert_eq!(class_of(method, Code::Ok, None), StatusClass::Ok);
        assert_eq!(class_of(method, Code::InvalidArgument, None), StatusClass::ClientError);
        assert_eq!(
            class_of(method, Code::Internal, Some("internal%20error")),
            StatusClass::ServerError
        );
        assert_eq!(class_of(method, Code::Unavailable, None), StatusClass::ServerError);
        // A method the server does not have, or a body it cannot decode.
        assert_eq!(class_of("unknown", Code::Unimplemented, None), StatusClass::ClientError);
        assert_eq!(class_of("unknown", Code::Internal, None), StatusClass::ClientError);
        let health = "grpc.health.v1.Health/Check";
        let undecodable = "failed%20to%20decode%20Protobuf%20message:%20invalid%20varint";
        assert_eq!(
            class_of(health, Code::Internal, Some(undecodable)),
            StatusClass::ClientError
        );
    }
    use roncho_gate::body::Silent;

    /// A service that answers after `delay`.
    #[derive(Clone)]
    struct Slow(Duration);

    impl<B> tower_service::Service<http::Request<B>> for Slow {
        type Response = http::Response<()>;
        type Error = std::convert::Infallible;
        type Future = Pin<Box<dyn Future<Output = std::result::Result<Self::Response, Self::Error>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::result::Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<B>) -> Self::Future {
            let delay = self.0;
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok(http::Response::new(()))
            })
        }
    }

    fn grpc_status<B>(response: &http::Response<B>) -> Option<&str> {
        response
            .headers()
            .get("grpc-status")
            .and_then(|value| value.to_str().ok())
    }

    /// A service that reads its request's body to the end and says how that went.
    #[derive(Clone)]
    struct Reads;

    impl<B> tower_service::Service<http::Request<B>> for Reads
    where
        B: http_body::Body + Send + 'static,
        B::Error: std::fmt::Display,
    {
        type Response = http::Response<String>;
        type Error = std::convert::Infallible;
        type Future = Pin<Box<dyn Future<Output = std::result::Result<Self::Response, Self::Error>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::result::Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: http::Request<B>) -> Self::Future {
            let mut body = Box::pin(request.into_body());
            Box::pin(async move {
                loop {
                    match std::future::poll_fn(|context| body.as_mut().poll_frame(context)).await {
                        None => return Ok(http::Response::new("whole".to_owned())),
                        Some(Ok(_)) => continue,
                        Some(Err(error)) => return Ok(http::Response::new(error.to_string())),
                    }
                }
            })
        }
    }

    #[tokio::test]
    async fn a_body_that_does_not_arrive_gives_its_place_back() {
        use tower_layer::Layer as _;
        use tower_service::Service as _;
        let admission = Admission::new(Limits {
            body_timeout: Duration::from_millis(50),
            ..Limits::default()
        });
        let mut service =
            DoorLayer::new(Door::new(roncho_gate::Authenticator::new(None), admission.clone())).layer(Reads);
        let request = http::Request::builder()
            .uri("/roncho.v1.DialecticService/Chat")
            .body(Silent)
            .unwrap();
        let response = tokio::time::timeout(Duration::from_secs(5), service.call(request))
            .await
            .expect("the deadline ends the read")
            .unwrap();
        assert!(
            response.body().get_ref().get_ref().contains("did not arrive within"),
            "{}",
            response.body().get_ref().get_ref()
        );
        drop(response);
        assert_eq!(admission.stats().in_flight(), 0);
    }

    #[tokio::test]
    async fn calls_past_the_request_timeout_end_deadline_exceeded_except_the_dialectics() {
        use tower_layer::Layer as _;
        use tower_service::Service as _;
        let admission = Admission::new(Limits {
            request_timeout: Duration::from_millis(50),
            ..Limits::default()
        });
        let layer = DoorLayer::new(Door::new(roncho_gate::Authenticator::new(None), admission.clone()));
        let mut service = layer.layer(Slow(Duration::from_millis(300)));
        let request = |path: &str| http::Request::builder().uri(path).body(()).unwrap();
        let ended = service
            .call(request("/roncho.v1.RecallService/ListPeers"))
            .await
            .unwrap();
        assert_eq!(grpc_status(&ended), Some("4"), "DEADLINE_EXCEEDED");
        let answered = service.call(request("/roncho.v1.DialecticService/Chat")).await.unwrap();
        assert_eq!(
            grpc_status(&answered),
            None,
            "the dialectic has its levels' longer limit"
        );
        assert_eq!(
            admission.stats().in_flight(),
            1,
            "a reply holds its place until its body is gone"
        );
        drop((ended, answered));
        assert_eq!(admission.stats().timed_out(), 1);
        assert_eq!(admission.stats().in_flight(), 0, "slots come back after time-outs too");
    }
}
