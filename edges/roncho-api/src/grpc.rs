//! The gRPC edge: every `roncho.v1` service is one generated table of
//! methods over [`Edge::call`], which takes the caller the [`AuthLayer`]
//! authenticated, converts the request, authorizes it by the table in
//! [`crate::authz`], calls the domain service and converts its reply.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::StreamExt;
use futures::stream::BoxStream;
use roncho_core::{Caller, Error};
use roncho_proto::v1 as pb;
use tonic::{Request, Response, Status};

use crate::admission::{Admission, RateLimiter};
use crate::authz::{Authorize, Authorizer};
use crate::convert::{FromWire, IntoWire};
use crate::error::status;
use crate::keys::{KeyIssuer, KeySet};

/// Calls domain services on behalf of authenticated callers.
#[derive(Debug, Clone)]
pub struct Edge {
    authorizer: Authorizer,
    rates: Arc<RateLimiter>,
}

impl Edge {
    /// Returns the edge deciding with `authorizer` and metering with `rates`.
    pub fn new(authorizer: Authorizer, rates: Arc<RateLimiter>) -> Self {
        Self { authorizer, rates }
    }

    /// Runs one call: the caller, the request in domain terms, its
    /// authorization, its workspace's rate, the service (`op`), the reply in
    /// wire terms. A refused call has done nothing.
    pub async fn call<W, D, R, O, F, Fut>(&self, request: Request<W>, op: F) -> Result<Response<O>, Status>
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
        let reply = self.run(caller, request, op).await.map_err(status)?;
        Ok(Response::new(reply.into_wire()))
    }

    /// Runs one call in domain terms, whatever its wire: its authorization,
    /// its workspace's rate, then the service (`op`). A refused call has
    /// done nothing.
    pub async fn run<D, R, F, Fut>(&self, caller: Caller, request: D, op: F) -> roncho_core::Result<R>
    where
        D: Authorize + Sync,
        F: FnOnce(D) -> Fut,
        Fut: Future<Output = roncho_core::Result<R>>,
    {
        self.authorizer.check(&caller, &request).await?;
        self.rates.admit_all(&request.rates())?;
        op(request).await
    }
}

/// A streamed reply on the wire.
pub type WireStream<T> = BoxStream<'static, Result<T, Status>>;

impl<D: IntoWire<W> + 'static, W: 'static> IntoWire<WireStream<W>> for BoxStream<'static, roncho_core::Result<D>> {
    fn into_wire(self) -> WireStream<W> {
        Box::pin(self.map(|item| item.map(IntoWire::into_wire).map_err(status)))
    }
}

/// Generates a service's gRPC server over its domain trait: each method
/// is `Edge::call` on the method of the same name.
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
            edge: Edge,
            api: Arc<$api>,
        }

        impl $name {
            /// Returns the server calling `api` through `edge`.
            pub fn new(edge: Edge, api: Arc<$api>) -> Self {
                Self { edge, api }
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
                    self.edge
                        .call(request, |request| async move { api.$method(request).await })
                        .await
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
    }
}

grpc_service! {
    /// `roncho.v1.RecallService`: every read.
    GrpcRecall: RecallService, over dyn roncho_recall::RecallApi {
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
        rpc query_conclusions(QueryConclusionsRequest) -> pb::QueryConclusionsResponse;
        rpc list_webhooks(ListWebhooksRequest) -> pb::ListWebhooksResponse;
        rpc list_scopes(ListScopesRequest) -> pb::ListScopesResponse;
        rpc get_scope(GetScopeRequest) -> pb::Scope;
        rpc list_scope_sessions(ListScopeSessionsRequest) -> pb::ListSessionsResponse;
        rpc get_scope_status(GetScopeRequest) -> pb::ScopeStatus;
    }
}

grpc_service! {
    /// `roncho.v1.DialecticService`: answers about peers.
    GrpcDialectic: DialecticService, over dyn roncho_dialectic::DialecticApi {
        type ChatStreamStream = WireStream<pb::ChatStreamResponse>;
        rpc chat(ChatRequest) -> pb::ChatResponse;
        rpc chat_stream(ChatRequest) -> WireStream<pb::ChatStreamResponse>;
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
    }
}

/// The package whose calls need an authenticated caller; health and
/// reflection stay open (probes, tooling).
const AUTHENTICATED_PREFIX: &str = "/roncho.v1.";

/// Authenticates calls: the `authorization: Bearer <key>` metadata becomes
/// the request's [`Caller`], or the call ends `UNAUTHENTICATED` with the
/// reason. Without keys (auth off) every caller is admin.
#[derive(Debug, Clone)]
pub struct Authenticator {
    keys: Option<Arc<KeySet>>,
}

impl Authenticator {
    /// Returns the authenticator verifying with `keys`; `None`: authentication is off.
    pub fn new(keys: Option<Arc<KeySet>>) -> Self {
        Self { keys }
    }

    /// Returns the caller the headers of a call authenticate.
    pub fn authenticate(&self, headers: &http::HeaderMap) -> roncho_core::Result<Caller> {
        let Some(keys) = &self.keys else {
            return Ok(Caller::Admin);
        };
        let value = headers
            .get(http::header::AUTHORIZATION)
            .ok_or_else(|| Error::Unauthenticated("no access token provided (authorization: Bearer <key>)".into()))?;
        let token = value
            .to_str()
            .ok()
            .and_then(|value| value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")))
            .map(str::trim)
            .ok_or_else(|| Error::Unauthenticated("the authorization metadata must be `Bearer <key>`".into()))?;
        let now = roncho_core::model::now_micros().div_euclid(1_000_000);
        keys.verify(token, now)
    }
}

/// The edge's layer, before any body is read: admission (shedding costs
/// nothing, so it comes first), the request timeout, then authentication.
#[derive(Debug, Clone)]
pub struct EdgeLayer {
    admission: Admission,
    authenticator: Authenticator,
}

impl EdgeLayer {
    /// Returns the layer admitting with `admission` and authenticating with `authenticator`.
    pub fn new(admission: Admission, authenticator: Authenticator) -> Self {
        Self {
            admission,
            authenticator,
        }
    }
}

impl<S> tower_layer::Layer<S> for EdgeLayer {
    type Service = EdgeService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        EdgeService {
            inner,
            layer: self.clone(),
        }
    }
}

/// A service behind [`EdgeLayer`].
#[derive(Debug, Clone)]
pub struct EdgeService<S> {
    inner: S,
    layer: EdgeLayer,
}

impl<S, B, R> tower_service::Service<http::Request<B>> for EdgeService<S>
where
    S: tower_service::Service<http::Request<DeadlineBody<B>>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = http::Response<SlotBody<R>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let refuse = |error: Error| -> Self::Future {
            let response = status(error).into_http::<R>().map(|body| SlotBody { body, slot: None });
            Box::pin(async move { Ok(response) })
        };
        // Authenticated first: a key bound to a workspace takes that
        // workspace's places, so one tenant cannot take every place.
        let caller = if request.uri().path().starts_with(AUTHENTICATED_PREFIX) {
            match self.layer.authenticator.authenticate(request.headers()) {
                Ok(caller) => Some(caller),
                Err(error) => return refuse(error),
            }
        } else {
            None
        };
        let slot = match self
            .layer
            .admission
            .admit(&request, caller.as_ref().and_then(Caller::workspace))
        {
            Ok(slot) => slot,
            Err(error) => return refuse(error),
        };
        let path = request.uri().path();
        let timeout = slot.as_ref().map(|_| self.layer.admission.timeout(path));
        let (mut parts, body) = request.into_parts();
        if let Some(caller) = caller {
            parts.extensions.insert(caller);
        }
        let body_deadline = slot.as_ref().map(|_| self.layer.admission.body_timeout());
        let request = http::Request::from_parts(parts, DeadlineBody::new(body, body_deadline));
        let response = self.inner.call(request);
        let admission = self.layer.admission.clone();
        Box::pin(async move {
            let Some(timeout) = timeout else {
                return response
                    .await
                    .map(|response| response.map(|body| SlotBody { body, slot }));
            };
            match tokio::time::timeout(timeout, response).await {
                // The place is held until the reply's body ends.
                Ok(response) => response.map(|response| response.map(|body| SlotBody { body, slot })),
                Err(_) => {
                    admission.timed_out();
                    let error = Error::DeadlineExceeded(format!(
                        "the request ran past the server's {} s limit",
                        timeout.as_secs_f32()
                    ));
                    Ok(status(error).into_http::<R>().map(|body| SlotBody { body, slot: None }))
                }
            }
        })
    }
}

/// A request body that must arrive whole within a deadline; past it, the
/// call ends `DEADLINE_EXCEEDED`.
pub struct DeadlineBody<B> {
    inner: Pin<Box<B>>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    limit: std::time::Duration,
}

/// Why a request ended when its body did not arrive in time (the start of
/// the body error's message, which the REST edge answers 408 for).
pub const BODY_DEADLINE_REASON: &str = "the request's body did not arrive within";

impl<B> DeadlineBody<B> {
    /// Returns `inner`, which must arrive whole within `limit` (`None`: no limit).
    pub fn new(inner: B, limit: Option<std::time::Duration>) -> Self {
        Self {
            inner: Box::pin(inner),
            deadline: limit.map(|limit| Box::pin(tokio::time::sleep(limit))),
            limit: limit.unwrap_or_default(),
        }
    }
}

impl<B> http_body::Body for DeadlineBody<B>
where
    B: http_body::Body<Data = bytes::Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = bytes::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = this.inner.as_mut().poll_frame(context) {
            if frame.is_none() {
                // Arrived whole: no deadline for whatever else is asked of it.
                this.deadline = None;
            }
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        if let Some(deadline) = &mut this.deadline
            && deadline.as_mut().poll(context).is_ready()
        {
            let status = status(Error::DeadlineExceeded(format!(
                "{BODY_DEADLINE_REASON} {} s",
                this.limit.as_secs_f32()
            )));
            return Poll::Ready(Some(Err(Box::new(status))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A reply body that holds its request's place in flight until it ends.
pub struct SlotBody<B> {
    body: B,
    slot: Option<crate::admission::Slot>,
}

impl<B> SlotBody<B> {
    /// Returns `body` holding `slot` until it ends.
    pub fn new(body: B, slot: Option<crate::admission::Slot>) -> Self {
        Self { body, slot }
    }
}

impl<B> http_body::Body for SlotBody<B>
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
        let frame = Pin::new(&mut this.body).poll_frame(context);
        if let Poll::Ready(None) = frame {
            this.slot = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::admission::Limits;

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

    /// A body that never sends anything.
    struct Silent;

    impl http_body::Body for Silent {
        type Data = bytes::Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
            Poll::Pending
        }
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
        let mut service = EdgeLayer::new(admission.clone(), Authenticator::new(None)).layer(Reads);
        let request = http::Request::builder()
            .uri("/roncho.v1.DialecticService/Chat")
            .body(Silent)
            .unwrap();
        let response = tokio::time::timeout(Duration::from_secs(5), service.call(request))
            .await
            .expect("the deadline ends the read")
            .unwrap();
        assert!(
            response.body().body.contains("did not arrive within"),
            "{}",
            response.body().body
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
        let layer = EdgeLayer::new(admission.clone(), Authenticator::new(None));
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
