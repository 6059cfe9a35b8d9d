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
        }
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
            if frame.is_none() {
                // Arrived whole: no deadline for whatever else is asked of it.
                this.deadline = None;
            }
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        if let Some(deadline) = &mut this.deadline
            && deadline.as_mut().poll(context).is_ready()
        {
            let error = Error::DeadlineExceeded(format!("{BODY_DEADLINE_REASON} {} s", this.limit.as_secs_f32()));
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
    slot: Option<H>,
}

impl<B, H> SlotBody<B, H> {
    /// Returns `body` holding `slot` until it ends.
    pub fn new(body: B, slot: Option<H>) -> Self {
        Self { body, slot }
    }

    /// The body itself.
    pub fn get_ref(&self) -> &B {
        &self.body
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
