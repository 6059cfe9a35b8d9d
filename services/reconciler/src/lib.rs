//! The reconciler role: brings vector state in line with relational state
//! (`sync_state`). It has no gRPC service. Vectors arrive with the recall
//! milestone; until then the role has nothing to reconcile and reports so.

/// Returns why the reconciler has no work yet, for `roncho status` and logs.
pub fn status() -> &'static str {
    "idle: no vector store is configured in this version"
}
