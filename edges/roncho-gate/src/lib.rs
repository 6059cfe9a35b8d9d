//! The gate every wire passes (gRPC, REST, and MCP through REST), and no
//! wire owns: nothing here knows a wire format.
//!
//! # Layout
//! - [`door`]: authentication and admission before a body is read, the
//!   request's deadlines, and what an internal error shows.
//! - [`observe`]: each call's span and its count, by wire, route and
//!   status class.
//! - [`admission`]: requests in flight and time-outs.
//! - [`rate`]: per-workspace rates of the calls that cost the most.
//! - [`authz`]: the authorization table and its decision.
//! - [`keys`]: API keys (HS256 JWTs), verification and minting.
//! - [`policy`]: each call authorized, metered, then run ([`CallPolicy`]).
//! - [`body`]: a request body's deadline; a reply body holding its place.
//! - [`browser`]: what a web page in the user's browser may call.

pub mod admission;
pub mod authz;
pub mod body;
pub mod browser;
pub mod door;
pub mod keys;
pub mod observe;
pub mod policy;
pub mod rate;

pub use body::{BODY_DEADLINE_REASON, BodyEnding, BoxError, DeadlineBody, SlotBody};
pub use browser::{BrowserPolicy, Verdict};
pub use door::{Authenticator, Door, Pass, Peer, Vouched, hide_internal};
pub use observe::{CallName, Finished, RequestMetrics, StatusClass, Visit, Wire};
pub use policy::CallPolicy;
