//! Server-sent events over a streamed HTTP body: the framing every
//! provider's streaming API shares (`event:` / `data:` lines, a blank line
//! ends an event), and a driver that turns a provider's events into
//! [`StreamEvent`]s.

use std::collections::VecDeque;

use roncho_core::{Error, Result};

use crate::{EventStream, StreamEvent};

/// One server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (empty when absent).
    pub event: String,
    /// The `data:` lines, joined by newlines.
    pub data: String,
}

/// Splits bytes into events as they arrive.
#[derive(Debug, Default)]
pub struct SseParser {
    pending: Vec<u8>,
    current: SseEvent,
    has_data: bool,
}

impl SseParser {
    /// Feeds bytes and returns the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = self.pending.iter().position(|byte| *byte == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if self.has_data || !self.current.event.is_empty() {
                    events.push(std::mem::take(&mut self.current));
                }
                self.has_data = false;
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => self.current.event = value.to_owned(),
                "data" => {
                    if self.has_data {
                        self.current.data.push('\n');
                    }
                    self.current.data.push_str(value);
                    self.has_data = true;
                }
                _ => {}
            }
        }
        events
    }

    /// The event left when the body ends without a final blank line.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let rest = self.feed(b"\n\n");
        rest.into_iter().next()
    }
}

/// Turns one provider's SSE events into stream events; it keeps whatever
/// state assembling them needs (partial tool calls, usage).
pub trait Decoder: Send + 'static {
    /// Handles one event; returns the stream events it completes.
    fn decode(&mut self, event: &SseEvent) -> Result<Vec<StreamEvent>>;
    /// Called when the body ends: the final events, or an error if the
    /// stream was cut short.
    fn finish(&mut self) -> Result<Vec<StreamEvent>>;
}

struct Driver<D> {
    response: reqwest::Response,
    parser: SseParser,
    decoder: D,
    ready: VecDeque<Result<StreamEvent>>,
    done: bool,
    model: String,
}

/// Streams `response`'s body through `decoder`. The stream ends after the
/// decoder's `Done` event or the first error.
pub fn stream<D: Decoder>(response: reqwest::Response, decoder: D, model: String) -> EventStream {
    let driver = Driver {
        response,
        parser: SseParser::default(),
        decoder,
        ready: VecDeque::new(),
        done: false,
        model,
    };
    Box::pin(futures::stream::unfold(driver, |mut driver| async move {
        loop {
            if let Some(event) = driver.ready.pop_front() {
                if matches!(event, Err(_) | Ok(StreamEvent::Done { .. })) {
                    driver.ready.clear();
                    driver.done = true;
                }
                return Some((event, driver));
            }
            if driver.done {
                return None;
            }
            let decoded = match driver.response.chunk().await {
                Ok(Some(bytes)) => driver
                    .parser
                    .feed(&bytes)
                    .iter()
                    .map(|event| driver.decoder.decode(event))
                    .collect::<Result<Vec<_>>>()
                    .map(|events| events.into_iter().flatten().collect()),
                Ok(None) => {
                    let tail = match driver.parser.finish() {
                        Some(event) => driver.decoder.decode(&event),
                        None => Ok(Vec::new()),
                    };
                    tail.and_then(|mut events| {
                        events.extend(driver.decoder.finish()?);
                        if !events.iter().any(|event| matches!(event, StreamEvent::Done { .. })) {
                            return Err(Error::Unavailable(format!(
                                "{}: the stream ended before its final event",
                                driver.model
                            )));
                        }
                        Ok(events)
                    })
                }
                Err(error) => Err(Error::Unavailable(format!(
                    "{}: the stream broke off: {error}",
                    driver.model
                ))),
            };
            match decoded {
                Ok(events) => driver.ready.extend(events.into_iter().map(Ok)),
                Err(error) => driver.ready.push_back(Err(error)),
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_and_lines() {
        let mut parser = SseParser::default();
        assert!(parser.feed(b"event: message_start\r\nda").is_empty());
        let events = parser.feed(b"ta: {\"a\":1}\r\n\r\n: keep-alive\n\ndata: one\ndata: two\n\ndata: [DONE]");
        assert_eq!(
            events,
            [
                SseEvent {
                    event: "message_start".into(),
                    data: "{\"a\":1}".into()
                },
                SseEvent {
                    event: String::new(),
                    data: "one\ntwo".into()
                }
            ]
        );
        assert_eq!(parser.finish().map(|event| event.data), Some("[DONE]".into()));
    }
}
