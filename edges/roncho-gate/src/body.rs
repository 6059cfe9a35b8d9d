//! Bodies that keep the door's terms: a request body that must arrive
//! within its deadline, and a reply body that holds its request's place in
//! flight until it ends.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use roncho_core::Error;

use crate::admission::Slot;

/// A body error, as every wire's body carries one.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request ended when its body did not arrive in time (the start of
/// the body error's message, which the REST edge answers 408 for).
pub const BODY_DEADLINE_REASON: &str = "the request's body did not arrive within";

/// A request body that must arrive whole within a deadline; past it, the
/// body fails with `DEADLINE_EXCEEDED` in the wire's terms.
pub struct DeadlineBody<B> {
    inner: Pin<Box<B>>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    limit: std::time::Duration,
    expired: fn(Error) -> BoxError,
    /// How the body ended when it did not arrive whole: what read it may
    /// have answered in its own terms (a 500), which the wire then says as
    /// the client's failure.
    ending: std::sync::Arc<BodyEnding>,
}

/// How a request body that did not arrive whole ended, if it did.
#[derive(Debug, Default)]
pub struct BodyEnding {
    deadline: std::sync::atomic::AtomicBool,
    broken: std::sync::atomic::AtomicBool,
}

impl BodyEnding {
    /// The deadline ended the body.
    pub fn deadline_fired(&self) -> bool {
        self.deadline.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The client's body failed: a malformed chunk, a connection closed
    /// before the end.
    pub fn broken(&self) -> bool {
        self.broken.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl<B> DeadlineBody<B> {
    /// Returns `inner`, which must arrive whole within `limit` (`None`: no
    /// limit); past it, the body fails with `expired` of the deadline error.
    pub fn new(inner: B, limit: Option<std::time::Duration>, expired: fn(Error) -> BoxError) -> Self {
        Self {
            inner: Box::pin(inner),
            deadline: limit.map(|limit| Box::pin(tokio::time::sleep(limit))),
            limit: limit.unwrap_or_default(),
            expired,
            ending: std::sync::Arc::default(),
        }
    }

    /// Returns what says how the body ended, if it did not arrive whole.
    pub fn ending(&self) -> std::sync::Arc<BodyEnding> {
        self.ending.clone()
    }
}

impl<B> http_body::Body for DeadlineBody<B>
where
    B: http_body::Body<Data = bytes::Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = bytes::Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = this.inner.as_mut().poll_frame(context) {
            match &frame {
                // Arrived whole: no deadline for whatever else is asked of it.
                None => this.deadline = None,
                Some(Err(_)) => this.ending.broken.store(true, std::sync::atomic::Ordering::Release),
                Some(Ok(_)) => {}
            }
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        if let Some(deadline) = &mut this.deadline
            && deadline.as_mut().poll(context).is_ready()
        {
            let error = Error::DeadlineExceeded(format!("{BODY_DEADLINE_REASON} {} s", this.limit.as_secs_f32()));
            this.ending.deadline.store(true, std::sync::atomic::Ordering::Release);
            return Poll::Ready(Some(Err((this.expired)(error))));
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

/// A body that holds something until it ends (or is dropped): a reply
/// holds its request's place in flight ([`Slot`]); a request body can hold
/// what marks its connection as having sent a whole request.
pub struct SlotBody<B, H = Slot> {
    body: B,
    /// What it holds; the reply deadline's watch takes it from here.
    slot: std::sync::Arc<std::sync::Mutex<Option<H>>>,
}

impl<B, H> SlotBody<B, H> {
    /// Returns `body` holding `slot` until it ends.
    pub fn new(body: B, slot: Option<H>) -> Self {
        Self {
            body,
            slot: std::sync::Arc::new(std::sync::Mutex::new(slot)),
        }
    }

    /// The body itself.
    pub fn get_ref(&self) -> &B {
        &self.body
    }

    fn release(&mut self) {
        self.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
    }
}

impl<B> SlotBody<B, Slot> {
    /// Returns `body` holding `slot` until it ends, and no longer than the
    /// slot's reply deadline ([`Slot::reply_within`]): a client that stops
    /// reading (an HTTP/2 window left at zero) gives the place back then,
    /// and its connection is closed ([`Slot::stalled`]).
    pub fn holding(body: B, slot: Option<Slot>) -> Self {
        let watch = slot
            .as_ref()
            .and_then(|slot| Some((slot.admission().clone(), slot.reply_within()?)));
        let this = Self::new(body, slot);
        if let Some((admission, within)) = watch {
            admission.hold_reply(&this.slot, within);
        }
        this
    }
}

impl<B, H: Unpin> http_body::Body for SlotBody<B, H>
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
            this.release();
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

/// A body that never sends anything: a client that sends its headers and
/// then nothing, or a reply nobody reads (hyper never polls a reply whose
/// window stays at zero). For the edges' tests of the deadlines.
#[doc(hidden)]
pub struct Silent;

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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::admission::{Admission, Limits};

    #[tokio::test(start_paused = true)]
    async fn a_reply_never_read_gives_its_place_back_at_its_deadline() {
        let admission = Admission::new(Limits {
            request_timeout: Duration::from_secs(5),
            ..Limits::default()
        });
        let slot = admission
            .admit("/roncho.v1.RecallService/ListPeers", None, None)
            .unwrap();
        // Never polled, as hyper never polls a reply whose window stays at zero.
        let reply = SlotBody::holding(Silent, Some(slot));
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(admission.stats().in_flight(), 1, "held while within its deadline");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(admission.stats().in_flight(), 0, "given back at its deadline");
        drop(reply);
        // A health Watch streams as long as it likes.
        let watch = admission.admit("/grpc.health.v1.Health/Watch", None, None).unwrap();
        let _stream = SlotBody::holding(Silent, Some(watch));
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(admission.stats().open_in_flight(), 1);
    }
}
