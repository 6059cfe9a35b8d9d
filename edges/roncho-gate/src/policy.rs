//! The call policy: every call, whatever its wire, is authorized by the table in
//! [`crate::authz`], confined to its caller's tenant, metered by its
//! workspace's rates, then run.

use std::future::Future;
use std::sync::Arc;

use roncho_core::Caller;

use crate::authz::{Authorize, Authorizer};
use crate::rate::RateLimiter;

/// Calls domain services on behalf of authenticated callers.
#[derive(Debug, Clone)]
pub struct CallPolicy {
    authorizer: Authorizer,
    rates: Arc<RateLimiter>,
}

impl CallPolicy {
    /// Returns the policy deciding with `authorizer` and metering with `rates`.
    pub fn new(authorizer: Authorizer, rates: Arc<RateLimiter>) -> Self {
        Self { authorizer, rates }
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
        let mut request = request;
        self.authorizer.check(&caller, &request).await?;
        if let Some(tenant) = caller.tenant() {
            request.confine(tenant)?;
        }
        self.rates.admit_all(&request.rates())?;
        // A workspace the call creates is checked again, in its
        // transaction, to be under an id the caller holds.
        roncho_core::store::creating_as(self.authorizer.creator(&caller), op(request)).await
    }
}
