//! What every LLM call leaves behind: a span (exported when
//! `otlp_endpoint` is set) and, with `metrics_listen`, its outcome and
//! tokens in the process's metrics. Calls on every wire are observed by
//! the gate (`roncho_gate::observe`), counted in [`Metrics`].

use std::sync::Arc;

use tracing::Instrument;

use crate::metrics::Metrics;

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
