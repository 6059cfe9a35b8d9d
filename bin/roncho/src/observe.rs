//! What every gRPC request and LLM call leaves behind: a span (exported
//! when `otlp_endpoint` is set; the request's span continues the caller's
//! trace from its `traceparent` metadata) and, with `metrics_listen`, its
//! latency and outcome in the process's metrics.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use roncho_core::trace::TraceContext;
use tracing::Instrument;

use crate::metrics::Metrics;

/// Health checks come every few seconds from probes: counted, not traced.
const UNTRACED_SERVICES: [&str; 3] = [
    "grpc.health.v1.Health/",
    "grpc.reflection.v1.ServerReflection/",
    "grpc.reflection.v1alpha.ServerReflection/",
];

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
    known.get(path.trim_start_matches('/')).copied().unwrap_or("unknown")
}

/// Traces every gRPC request and records its latency and status code.
#[derive(Debug, Clone, Default)]
pub struct RpcLayer {
    metrics: Option<Arc<Metrics>>,
}

impl RpcLayer {
    pub fn new(metrics: Option<Arc<Metrics>>) -> Self {
        Self { metrics }
    }
}

impl<S> tower_layer::Layer<S> for RpcLayer {
    type Service = RpcService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RpcService {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct RpcService<S> {
    inner: S,
    metrics: Option<Arc<Metrics>>,
}

/// Returns the span of a request to `rpc` (`package.Service/Method`), a
/// child of the caller's span when its metadata carries one.
fn rpc_span<B>(rpc: &str, request: &http::Request<B>) -> tracing::Span {
    if UNTRACED_SERVICES.iter().any(|service| rpc.starts_with(service)) {
        return tracing::Span::none();
    }
    let (service, method) = rpc.split_once('/').unwrap_or((rpc, ""));
    let span = tracing::info_span!(
        "rpc",
        otel.name = rpc,
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        rpc.system = "grpc",
        rpc.service = service,
        rpc.method = method,
        rpc.grpc.status_code = tracing::field::Empty,
    );
    let headers = request.headers();
    if let Some(parent) = TraceContext::from_headers(|name| headers.get(name).and_then(|value| value.to_str().ok())) {
        parent.set_parent_of(&span);
    }
    span
}

/// Whether a status code is the server's failure rather than the caller's
/// (OpenTelemetry's rule for gRPC server spans).
fn server_error(code: tonic::Code) -> bool {
    matches!(
        code,
        tonic::Code::Unknown
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Unimplemented
            | tonic::Code::Internal
            | tonic::Code::Unavailable
            | tonic::Code::DataLoss
    )
}

impl<S, B, R> tower_service::Service<http::Request<B>> for RpcService<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let rpc = known_method(request.uri().path());
        let span = rpc_span(rpc, &request);
        let started = Instant::now();
        let response = span.in_scope(|| self.inner.call(request));
        let metrics = self.metrics.clone();
        Box::pin(
            async move {
                let result = response.await;
                // Errors come back trailers-only: the status is in the headers.
                // A reply's own status comes in its trailers, after this: Ok here.
                let code = match &result {
                    Ok(response) => Some(
                        response
                            .headers()
                            .get("grpc-status")
                            .and_then(|value| value.to_str().ok())
                            .and_then(|value| value.parse::<i32>().ok())
                            .map_or(tonic::Code::Ok, tonic::Code::from),
                    ),
                    Err(_) => None,
                };
                let span = tracing::Span::current();
                match code {
                    Some(code) => {
                        span.record("rpc.grpc.status_code", code as i32);
                        if server_error(code) {
                            span.record("otel.status_code", "error");
                        }
                    }
                    None => {
                        span.record("otel.status_code", "error");
                    }
                }
                if let Some(metrics) = metrics {
                    let label = code.map_or_else(|| "transport_error".to_owned(), |code| format!("{code:?}"));
                    metrics.record_rpc(rpc, &label, started.elapsed());
                }
                result
            }
            .instrument(span),
        )
    }
}

/// An LLM whose calls are spans (`llm.chat`, with the model and tokens)
/// and, with metrics, counted by model and outcome.
pub struct ObservedLlm {
    inner: Arc<dyn roncho_llm::Llm>,
    metrics: Option<Arc<Metrics>>,
}

impl ObservedLlm {
    pub fn wrap(inner: Arc<dyn roncho_llm::Llm>, metrics: Option<Arc<Metrics>>) -> Arc<dyn roncho_llm::Llm> {
        Arc::new(Self { inner, metrics })
    }

    fn span(&self, operation: &'static str) -> tracing::Span {
        tracing::info_span!(
            "llm",
            otel.name = operation,
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            gen_ai.request.model = %self.inner.model_id(),
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            error.type = tracing::field::Empty,
        )
    }

    fn record(&self, span: &tracing::Span, outcome: Result<roncho_llm::Usage, &roncho_core::Error>) {
        let model = self.inner.model_id();
        match outcome {
            Ok(usage) => {
                span.record("gen_ai.usage.input_tokens", usage.input_tokens);
                span.record("gen_ai.usage.output_tokens", usage.output_tokens);
                if let Some(metrics) = &self.metrics {
                    metrics.record_llm(&model, "ok", usage);
                }
            }
            Err(error) => {
                span.record("otel.status_code", "error");
                span.record("error.type", llm_outcome(error));
                if let Some(metrics) = &self.metrics {
                    metrics.record_llm(&model, llm_outcome(error), roncho_llm::Usage::default());
                }
            }
        }
    }
}

/// The outcome label of a failed LLM call.
fn llm_outcome(error: &roncho_core::Error) -> &'static str {
    match error {
        roncho_core::Error::ResourceExhausted(_) | roncho_core::Error::Throttled { .. } => "rate_limited",
        roncho_core::Error::Unavailable(_) => "unavailable",
        roncho_core::Error::FailedPrecondition(_) => "refused",
        roncho_core::Error::DeadlineExceeded(_) => "timeout",
        _ => "error",
    }
}

#[async_trait::async_trait]
impl roncho_llm::Llm for ObservedLlm {
    async fn chat(&self, request: &roncho_llm::ChatRequest) -> roncho_core::Result<roncho_llm::ChatResponse> {
        let span = self.span("chat");
        let result = self.inner.chat(request).instrument(span.clone()).await;
        self.record(&span, result.as_ref().map(|response| response.usage));
        result
    }

    /// Records the call when the stream starts (its tokens are not counted).
    async fn chat_stream(&self, request: &roncho_llm::ChatRequest) -> roncho_core::Result<roncho_llm::EventStream> {
        let span = self.span("chat_stream");
        let result = self.inner.chat_stream(request).instrument(span.clone()).await;
        self.record(&span, result.as_ref().map(|_| roncho_llm::Usage::default()));
        result
    }

    fn model_id(&self) -> String {
        self.inner.model_id()
    }
}
