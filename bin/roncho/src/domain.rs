//! The domain services of a process's roles, each built once from its
//! [`Parts`] and mounted on every wire that serves it (gRPC and REST).

use std::sync::Arc;

use roncho_api::grpc::{
    DeriverServiceServer, DialecticServiceServer, DreamerServiceServer, GrpcDeriver, GrpcDialectic, GrpcDreamer,
    GrpcIngest, GrpcKeys, GrpcRecall, IngestServiceServer, KeyServiceServer, RecallServiceServer,
};
use roncho_core::queue::WorkQueue;
use roncho_gate::CallPolicy;
use roncho_gate::keys::{KeyIssuer, KeySet};
use roncho_store::SqlStore;
use tonic::server::NamedService;

use crate::config::Role;

/// Largest request accepted: a 5 MiB upload plus its envelope.
const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// What the domain services are built on.
#[derive(Clone)]
pub struct Parts {
    pub store: Arc<SqlStore>,
    pub semantic: Option<roncho_search::Semantic>,
    /// Nudges the workers beside this process after writes.
    pub after_write: Option<roncho_ingest::AfterWrite>,
    /// Marks client writes in flight for the reconciler beside them.
    pub write_activity: Option<Arc<roncho_core::activity::WriteActivity>>,
    /// The background work queue (queue status; the workers' source).
    pub queue: Option<Arc<dyn WorkQueue>>,
    /// How the deriver works, reported by queue status.
    pub derivation: roncho_deriver::Derivation,
    /// The dialectic with its models; `None`: every level extractive.
    pub dialectic: Option<roncho_dialectic::Dialectic>,
    /// The dream model's id; `None`: ScheduleDream is FAILED_PRECONDITION.
    pub dream_model: Option<String>,
    /// Where uploaded PDFs are read; `None`: in this process.
    pub pdf: Option<Arc<dyn roncho_core::files::PdfReader>>,
    /// Webhook URLs may point at private addresses.
    pub allow_private_webhooks: bool,
    /// How long idempotency keys of writes are remembered.
    pub idempotency_window: std::time::Duration,
}

impl Parts {
    /// Returns parts over a store alone: full-text search, no reconciler,
    /// no queue, every level of the dialectic extractive.
    pub fn store_only(store: Arc<SqlStore>) -> Self {
        Self {
            store,
            semantic: None,
            after_write: None,
            write_activity: None,
            queue: None,
            derivation: roncho_deriver::Derivation {
                observations: None,
                summaries: None,
            },
            dialectic: None,
            dream_model: None,
            pdf: None,
            allow_private_webhooks: false,
            idempotency_window: roncho_ingest::DEFAULT_IDEMPOTENCY_WINDOW,
        }
    }
}

/// The domain services of a process's roles, each built once and mounted
/// on every wire that serves it.
pub struct Domain {
    keys: Option<Arc<KeyIssuer>>,
    ingest: Option<Arc<roncho_ingest::Ingest>>,
    recall: Option<Arc<roncho_recall::Recall>>,
    dialectic: Option<Arc<roncho_dialectic::Dialectic>>,
    /// Served on gRPC by the deriver role; on REST by it or by ingest
    /// (Honcho serves every route at one address: where REST writes, it
    /// also answers queue status itself, reading the queue).
    deriver: Option<Arc<roncho_deriver::Deriver>>,
    /// Likewise for the dreamer role (REST schedules dreams where it writes).
    dreamer: Option<Arc<roncho_dreamer::Dreamer>>,
    roles: Vec<Role>,
}

impl Domain {
    /// Builds the services `roles` serve over `parts`; keys are issued
    /// with `keys` (`None`: keys are off).
    pub fn build(parts: &Parts, keys: Option<Arc<KeySet>>, roles: &[Role]) -> Self {
        let has = |role: Role| roles.contains(&role);
        let ingest = has(Role::Ingest).then(|| Arc::new(ingest(parts)));
        let recall = has(Role::Recall)
            .then(|| Arc::new(roncho_recall::Recall::new(parts.store.clone(), parts.semantic.clone())));
        let dialectic = has(Role::Dialectic).then(|| {
            Arc::new(
                parts
                    .dialectic
                    .clone()
                    .unwrap_or_else(|| roncho_dialectic::Dialectic::new(parts.store.clone(), parts.semantic.clone()))
                    .with_traces(parts.store.clone()),
            )
        });
        let deriver = (has(Role::Deriver) || has(Role::Ingest)).then(|| {
            Arc::new(
                roncho_deriver::Deriver::new(parts.queue.clone(), parts.derivation.clone())
                    .with_health(parts.store.clone()),
            )
        });
        let dreamer = (has(Role::Dreamer) || has(Role::Ingest)).then(|| {
            Arc::new(roncho_dreamer::Dreamer::new(
                parts.store.clone(),
                parts.queue.clone(),
                parts.dream_model.clone(),
            ))
        });
        Self {
            keys: roles
                .iter()
                .any(|role| role.serves_api())
                .then(|| Arc::new(KeyIssuer::new(keys, parts.store.clone()))),
            ingest,
            recall,
            dialectic,
            deriver,
            dreamer,
            roles: roles.to_vec(),
        }
    }

    /// The REST edge's routes over these services.
    pub fn rest(&self, policy: &CallPolicy) -> roncho_rest::Rest {
        let mut rest = roncho_rest::Rest::new(policy.clone());
        if let Some(keys) = &self.keys {
            rest = rest.with_keys(keys.clone());
        }
        if let Some(ingest) = &self.ingest {
            rest = rest.with_ingest(ingest.clone());
        }
        if let Some(recall) = &self.recall {
            rest = rest.with_recall(recall.clone());
        }
        if let Some(dialectic) = &self.dialectic {
            rest = rest.with_dialectic(dialectic.clone());
        }
        if let Some(deriver) = &self.deriver {
            rest = rest.with_deriver(deriver.clone());
        }
        if let Some(dreamer) = &self.dreamer {
            rest = rest.with_dreamer(dreamer.clone());
        }
        rest
    }

    /// Mounts the roles' gRPC services on `router`; returns it and the
    /// names served (for health).
    pub fn grpc<L>(
        &self,
        mut router: tonic::transport::server::Router<L>,
        policy: &CallPolicy,
    ) -> (tonic::transport::server::Router<L>, Vec<&'static str>) {
        let mut served = Vec::new();
        let serves = |role: Role| self.roles.contains(&role);
        if let Some(keys) = &self.keys {
            served.push(<KeyServiceServer<GrpcKeys> as NamedService>::NAME);
            router = router.add_service(KeyServiceServer::new(GrpcKeys::new(policy.clone(), keys.clone())));
        }
        if let Some(ingest) = &self.ingest {
            served.push(<IngestServiceServer<GrpcIngest> as NamedService>::NAME);
            let service = IngestServiceServer::new(GrpcIngest::new(policy.clone(), ingest.clone()))
                .max_decoding_message_size(MAX_REQUEST_BYTES);
            router = router.add_service(service);
        }
        if let Some(recall) = &self.recall {
            served.push(<RecallServiceServer<GrpcRecall> as NamedService>::NAME);
            router = router.add_service(RecallServiceServer::new(GrpcRecall::new(
                policy.clone(),
                recall.clone(),
            )));
        }
        if let Some(dialectic) = &self.dialectic {
            served.push(<DialecticServiceServer<GrpcDialectic> as NamedService>::NAME);
            router = router.add_service(DialecticServiceServer::new(GrpcDialectic::new(
                policy.clone(),
                dialectic.clone(),
            )));
        }
        if let Some(deriver) = self.deriver.as_ref().filter(|_| serves(Role::Deriver)) {
            served.push(<DeriverServiceServer<GrpcDeriver> as NamedService>::NAME);
            router = router.add_service(DeriverServiceServer::new(GrpcDeriver::new(
                policy.clone(),
                deriver.clone(),
            )));
        }
        if let Some(dreamer) = self.dreamer.as_ref().filter(|_| serves(Role::Dreamer)) {
            served.push(<DreamerServiceServer<GrpcDreamer> as NamedService>::NAME);
            router = router.add_service(DreamerServiceServer::new(GrpcDreamer::new(
                policy.clone(),
                dreamer.clone(),
            )));
        }
        // The reconciler is a worker without a service of its own.
        (router, served)
    }
}

/// The ingest service over `parts`.
fn ingest(parts: &Parts) -> roncho_ingest::Ingest {
    let mut ingest = roncho_ingest::Ingest::new(parts.store.clone())
        .allowing_private_webhooks(parts.allow_private_webhooks)
        .with_idempotency_window(parts.idempotency_window)
        // Unless wiring gives the sandboxed reader: in this process, bounded.
        .with_pdf_reader(
            parts
                .pdf
                .clone()
                .unwrap_or_else(|| Arc::new(roncho_pdf::InProcessPdf::default())),
        );
    if let Some(after_write) = &parts.after_write {
        ingest = ingest.with_after_write(after_write.clone());
    }
    if let Some(activity) = &parts.write_activity {
        ingest = ingest.with_activity(activity.clone());
    }
    ingest
}
