//! W3C trace context (`traceparent`, `tracestate`) carried from a request to
//! the background work it causes: read from gRPC metadata, stored with each
//! queued task, sent as NATS message headers, and made the parent of the
//! worker's span — so one trace shows CreateMessages → queue → deriver →
//! store across processes.
//!
//! Spans carry an OpenTelemetry context only when the process exports traces
//! (`otlp_endpoint`): without that layer [`TraceContext::of`] finds nothing,
//! no context is stored or sent, and attaching one is a no-op.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C header naming the trace and the parent span.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C header with vendor-specific trace state.
pub const TRACESTATE: &str = "tracestate";

/// One span's W3C trace context, as headers carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// `00-{trace id}-{span id}-{flags}`.
    pub traceparent: String,
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// Returns the context of the current span, when it is traced.
    pub fn current() -> Option<Self> {
        Self::of(&tracing::Span::current())
    }

    /// Returns the context of `span`, when it is traced.
    pub fn of(span: &tracing::Span) -> Option<Self> {
        let context = span.context();
        let span_context = context.span().span_context().clone();
        if !span_context.is_valid() {
            return None;
        }
        let state = span_context.trace_state().header();
        Some(Self {
            traceparent: format!(
                "00-{}-{}-{:02x}",
                span_context.trace_id(),
                span_context.span_id(),
                span_context.trace_flags().to_u8()
            ),
            tracestate: (!state.is_empty()).then_some(state),
        })
    }

    /// Reads a context from headers (`get` returns a header's value); `None`
    /// when there is no valid `traceparent`.
    pub fn from_headers<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Option<Self> {
        let traceparent = get(TRACEPARENT)?.trim();
        parse_traceparent(traceparent)?;
        Some(Self {
            traceparent: traceparent.to_owned(),
            tracestate: get(TRACESTATE)
                .map(str::trim)
                .filter(|state| !state.is_empty())
                .map(str::to_owned),
        })
    }

    /// The headers that carry this context, as `(name, value)`.
    pub fn headers(&self) -> Vec<(&'static str, &str)> {
        let mut headers = vec![(TRACEPARENT, self.traceparent.as_str())];
        if let Some(state) = &self.tracestate {
            headers.push((TRACESTATE, state.as_str()));
        }
        headers
    }

    /// Returns the context as stored with a task: the `traceparent`, then a
    /// newline and the `tracestate` when there is one.
    pub fn encode(&self) -> String {
        match &self.tracestate {
            Some(state) => format!("{}\n{state}", self.traceparent),
            None => self.traceparent.clone(),
        }
    }

    /// Reads a context [`TraceContext::encode`] wrote; `None` if it is not one.
    pub fn decode(text: &str) -> Option<Self> {
        let (traceparent, tracestate) = match text.split_once('\n') {
            Some((parent, state)) => (parent, Some(state)),
            None => (text, None),
        };
        Self::from_headers(|name| match name {
            TRACEPARENT => Some(traceparent),
            TRACESTATE => tracestate,
            _ => None,
        })
    }

    /// The remote span this context names.
    fn span_context(&self) -> Option<SpanContext> {
        let (trace_id, span_id, flags) = parse_traceparent(&self.traceparent)?;
        let state = self
            .tracestate
            .as_deref()
            .and_then(|state| state.parse::<TraceState>().ok())
            .unwrap_or_default();
        Some(SpanContext::new(trace_id, span_id, flags, true, state))
    }

    /// Makes the span this context names the parent of `span`, which must
    /// not have been entered yet.
    pub fn set_parent_of(&self, span: &tracing::Span) {
        if let Some(remote) = self.span_context() {
            let parent = opentelemetry::Context::new().with_remote_span_context(remote);
            if let Err(error) = span.set_parent(parent) {
                tracing::debug!(%error, "could not set a span's remote parent");
            }
        }
    }

    /// Links `span` to the span this context names (work that serves several
    /// requests has one parent and links to the others).
    pub fn link_from(&self, span: &tracing::Span) {
        if let Some(remote) = self.span_context() {
            span.add_link(remote);
        }
    }
}

/// Renames `span`, started or not, in what it exports (a handler named the
/// call after the span began).
pub fn rename(span: &tracing::Span, name: String) {
    span.context().span().update_name(name);
}

/// Parses `00-{32 hex}-{16 hex}-{2 hex}` (any later version's first four
/// fields, as the spec asks); `None` for zero ids or malformed text.
fn parse_traceparent(text: &str) -> Option<(TraceId, SpanId, TraceFlags)> {
    let mut parts = text.split('-');
    let version = parts.next()?;
    let (trace_id, span_id, flags) = (parts.next()?, parts.next()?, parts.next()?);
    // Lowercase only, as the W3C specification writes it.
    let hex = |part: &str, len: usize| {
        part.len() == len
            && part
                .bytes()
                .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
    };
    let valid = hex(version, 2)
        && version != "ff"
        && (version != "00" || parts.next().is_none())
        && hex(trace_id, 32)
        && hex(span_id, 16)
        && hex(flags, 2);
    if !valid {
        return None;
    }
    let trace_id = TraceId::from_hex(trace_id).ok()?;
    let span_id = SpanId::from_hex(span_id).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    (trace_id != TraceId::INVALID && span_id != SpanId::INVALID).then(|| (trace_id, span_id, TraceFlags::new(flags)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn reads_valid_headers_and_refuses_malformed_ones() {
        let context = TraceContext::from_headers(|name| match name {
            TRACEPARENT => Some(PARENT),
            TRACESTATE => Some("congo=t61rcWkgMzE"),
            _ => None,
        })
        .expect("a valid traceparent");
        assert_eq!(context.traceparent, PARENT);
        assert_eq!(context.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
            "0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(
                TraceContext::from_headers(|name| (name == TRACEPARENT).then_some(bad)).is_none(),
                "{bad}"
            );
        }
        // A later version may add fields after the four it shares with 00.
        assert!(
            TraceContext::from_headers(|_| Some("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")).is_some()
        );
    }

    #[test]
    fn encodes_for_storage_and_back() {
        let plain = TraceContext {
            traceparent: PARENT.into(),
            tracestate: None,
        };
        let with_state = TraceContext {
            traceparent: PARENT.into(),
            tracestate: Some("a=1,b=2".into()),
        };
        for context in [plain, with_state] {
            assert_eq!(TraceContext::decode(&context.encode()), Some(context.clone()));
        }
        assert_eq!(TraceContext::decode("not a context"), None);
    }

    /// Keeps what the tracer exports.
    #[derive(Debug, Clone, Default)]
    struct Collected(std::sync::Arc<std::sync::Mutex<Vec<opentelemetry_sdk::trace::SpanData>>>);

    impl opentelemetry_sdk::trace::SpanExporter for Collected {
        async fn export(
            &self,
            batch: Vec<opentelemetry_sdk::trace::SpanData>,
        ) -> opentelemetry_sdk::error::OTelSdkResult {
            self.0.lock().expect("lock").extend(batch);
            Ok(())
        }
    }

    #[test]
    fn a_traced_span_takes_its_parent_from_headers_and_hands_its_own_context_on() {
        use opentelemetry::trace::TracerProvider as _;
        use tracing_subscriber::layer::SubscriberExt as _;

        let collected = Collected::default();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_simple_exporter(collected.clone())
            .build();
        let subscriber =
            tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        let incoming = TraceContext::from_headers(|name| match name {
            TRACEPARENT => Some(PARENT),
            TRACESTATE => Some("congo=t61rcWkgMzE"),
            _ => None,
        })
        .expect("valid");
        let (handed_on, linked) = tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("work");
            incoming.set_parent_of(&span);
            let other = TraceContext {
                traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
                tracestate: None,
            };
            other.link_from(&span);
            let handed_on = span
                .in_scope(TraceContext::current)
                .expect("a traced span has a context");
            drop(span);
            (handed_on, other)
        });
        // The span's own context: same trace, its own span id, the state kept.
        let (trace_id, span_id, flags) = parse_traceparent(&handed_on.traceparent).expect("valid");
        assert_eq!(trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(span_id.to_string(), "00f067aa0ba902b7");
        assert!(flags.is_sampled());
        assert_eq!(handed_on.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
        let spans = collected.0.lock().expect("lock").clone();
        assert_eq!(spans.len(), 1);
        let span = &spans[0];
        assert_eq!(span.span_context.span_id(), span_id);
        assert_eq!(span.parent_span_id.to_string(), "00f067aa0ba902b7");
        let links: Vec<String> = span
            .links
            .iter()
            .map(|link| link.span_context.trace_id().to_string())
            .collect();
        assert_eq!(
            links,
            vec![parse_traceparent(&linked.traceparent).expect("valid").0.to_string()]
        );
    }

    #[test]
    fn an_untraced_span_has_no_context() {
        // No OpenTelemetry layer in unit tests: nothing is traced.
        assert_eq!(TraceContext::current(), None);
        let span = tracing::info_span!("work");
        TraceContext {
            traceparent: PARENT.into(),
            tracestate: None,
        }
        .set_parent_of(&span);
        assert_eq!(TraceContext::of(&span), None);
    }
}
