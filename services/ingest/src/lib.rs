//! The ingest role: `roncho.v1.IngestService`, every write.
//!
//! Requests are validated here (Honcho v3 limits, field names in errors) and
//! turned into `Store` calls; nothing derived is computed on this path.

use std::sync::Arc;

use roncho_core::convert::micros;
use roncho_core::files::file_chunks;
use roncho_core::json::struct_to_json;
use roncho_core::model::{JsonObject, NewConclusion, NewMessage};
use roncho_core::rpc::{RpcResult, reply};
use roncho_core::store::{SessionPeers, Store};
use roncho_core::{Error, Result, tokens, validate};
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_server::IngestService;
use serde_json::json;
use tonic::Request;

/// Called after a write that changes what needs vectors (the reconciler's nudge).
pub type AfterWrite = Arc<dyn Fn() + Send + Sync>;

/// Serves `IngestService` over a store.
#[derive(Clone)]
pub struct Ingest {
    store: Arc<dyn Store>,
    after_write: Option<AfterWrite>,
}

impl std::fmt::Debug for Ingest {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Ingest").finish_non_exhaustive()
    }
}

impl Ingest {
    /// Returns the ingest service over `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            after_write: None,
        }
    }

    /// Returns the service calling `after_write` after each write that adds or removes vectors.
    pub fn with_after_write(mut self, after_write: AfterWrite) -> Self {
        self.after_write = Some(after_write);
        self
    }

    fn wrote<T>(&self, result: Result<T>) -> Result<T> {
        if let (Ok(_), Some(after_write)) = (&result, &self.after_write) {
            after_write();
        }
        result
    }
}

/// Returns validated metadata, `None` when the field is unset.
fn metadata_arg(field: &str, value: Option<prost_types::Struct>) -> Result<Option<JsonObject>> {
    value
        .map(|fields| validate::metadata(field, struct_to_json(&fields)))
        .transpose()
}

/// Returns validated configuration, `None` when unset.
fn configuration_arg(field: &str, value: Option<prost_types::Struct>) -> Result<Option<JsonObject>> {
    metadata_arg(field, value)
}

fn session_peers(field: &str, peers: std::collections::HashMap<String, pb::SessionPeerConfig>) -> Result<SessionPeers> {
    let mut validated: SessionPeers = peers
        .into_iter()
        .map(|(peer_id, config)| {
            Ok((
                validate::resource_id(&format!("{field}.{peer_id}"), &peer_id)?,
                config.into(),
            ))
        })
        .collect::<Result<_>>()?;
    // Maps arrive in no particular order; sort so joins are deterministic.
    validated.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(validated)
}

/// Counts tokens of every text off the async runtime.
async fn count_tokens(texts: Vec<String>) -> Result<(Vec<String>, Vec<i64>)> {
    tokio::task::spawn_blocking(move || {
        let counts = texts.iter().map(|text| tokens::count(text)).collect();
        (texts, counts)
    })
    .await
    .map_err(|error| Error::Internal(format!("token counting task failed: {error}")))
}

impl Ingest {
    async fn create_messages(&self, request: pb::CreateMessagesRequest) -> Result<Vec<pb::Message>> {
        let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::resource_id("session_id", &request.session_id)?;
        validate::batch_len("messages", request.messages.len())?;
        let mut drafts = Vec::with_capacity(request.messages.len());
        let mut contents = Vec::with_capacity(request.messages.len());
        for (index, message) in request.messages.into_iter().enumerate() {
            let field = |name: &str| format!("messages[{index}].{name}");
            let peer_id = validate::resource_id(&field("peer_id"), &message.peer_id)?;
            contents.push(validate::message_content(&field("content"), &message.content)?);
            let metadata = metadata_arg(&field("metadata"), message.metadata)?.unwrap_or_default();
            let configuration = configuration_arg(&field("configuration"), message.configuration)?.unwrap_or_default();
            drafts.push((
                peer_id,
                metadata,
                configuration,
                message.created_at.as_ref().map(micros),
            ));
        }
        let (contents, counts) = count_tokens(contents).await?;
        let messages = drafts
            .into_iter()
            .zip(contents.into_iter().zip(counts))
            .map(
                |((peer_id, metadata, configuration, created_at), (content, token_count))| NewMessage {
                    peer_id,
                    content,
                    metadata,
                    configuration,
                    created_at,
                    token_count,
                },
            )
            .collect();
        let created = self.wrote(self.store.create_messages(&workspace_id, &session_id, messages).await)?;
        Ok(created.into_iter().map(pb::Message::from).collect())
    }

    async fn create_conclusions(&self, request: pb::CreateConclusionsRequest) -> Result<Vec<pb::Conclusion>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        validate::batch_len("conclusions", request.conclusions.len())?;
        // Token counting of up to 100 long texts is CPU work: off the runtime.
        let conclusions = tokio::task::spawn_blocking(move || {
            request
                .conclusions
                .into_iter()
                .enumerate()
                .map(|(index, conclusion)| {
                    let field = |name: &str| format!("conclusions[{index}].{name}");
                    Ok(NewConclusion {
                        observer_id: validate::reference_id(&field("observer_id"), &conclusion.observer_id)?,
                        observed_id: validate::reference_id(&field("observed_id"), &conclusion.observed_id)?,
                        session_id: conclusion
                            .session_id
                            .as_deref()
                            .map(|id| validate::reference_id(&field("session_id"), id))
                            .transpose()?,
                        // Conclusions written through the API are explicit, as in Honcho.
                        level: "explicit".to_owned(),
                        content: validate::conclusion_content(&field("content"), &conclusion.content)?,
                        premises: Vec::new(),
                        source_ids: Vec::new(),
                        metadata: JsonObject::new(),
                    })
                })
                .collect::<Result<Vec<_>>>()
        })
        .await
        .map_err(|error| Error::Internal(format!("validation task failed: {error}")))??;
        let created = self.wrote(self.store.create_conclusions(&workspace_id, conclusions).await)?;
        Ok(created.into_iter().map(pb::Conclusion::from).collect())
    }

    async fn upload_file(&self, request: pb::UploadFileRequest) -> Result<Vec<pb::Message>> {
        let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::resource_id("session_id", &request.session_id)?;
        let peer_id = validate::resource_id("peer_id", &request.peer_id)?;
        let metadata = metadata_arg("metadata", request.metadata)?.unwrap_or_default();
        let configuration = configuration_arg("configuration", request.configuration)?.unwrap_or_default();
        let created_at = request.created_at.as_ref().map(micros);
        let filename = validate::strip_nul(&request.filename);
        let content_type = request.content_type;
        let file = request.file;
        let file_size = file.len();
        // PDF parsing and tokenising 5 MiB are CPU work: keep them off the runtime.
        let chunks = tokio::task::spawn_blocking(move || {
            file_chunks(&content_type, &file).map(|chunks| {
                let counts: Vec<i64> = chunks.iter().map(|chunk| tokens::count(&chunk.content)).collect();
                (chunks, counts, content_type)
            })
        })
        .await
        .map_err(|error| Error::Internal(format!("file processing task failed: {error}")))?;
        let (chunks, counts, content_type) = chunks?;
        let file_id = roncho_core::model::new_public_id();
        let messages = chunks
            .into_iter()
            .zip(counts)
            .map(|(chunk, token_count)| {
                let mut chunk_metadata = metadata.clone();
                chunk_metadata.insert(
                    "file".to_owned(),
                    json!({
                        "file_id": file_id,
                        "filename": filename,
                        "content_type": content_type,
                        "original_file_size": file_size,
                        "chunk_index": chunk.chunk_index,
                        "total_chunks": chunk.total_chunks,
                        "chunk_character_range": [chunk.start, chunk.end],
                    }),
                );
                NewMessage {
                    peer_id: peer_id.clone(),
                    content: chunk.content,
                    metadata: chunk_metadata,
                    configuration: configuration.clone(),
                    created_at,
                    token_count,
                }
            })
            .collect();
        let created = self.wrote(self.store.create_messages(&workspace_id, &session_id, messages).await)?;
        Ok(created.into_iter().map(pb::Message::from).collect())
    }
}

#[tonic::async_trait]
impl IngestService for Ingest {
    async fn get_or_create_workspace(
        &self,
        request: Request<pb::GetOrCreateWorkspaceRequest>,
    ) -> RpcResult<pb::GetOrCreateWorkspaceResponse> {
        let request = request.into_inner();
        reply(
            async {
                let id = validate::resource_id("id", &request.id)?;
                let metadata = metadata_arg("metadata", request.metadata)?.unwrap_or_default();
                let configuration = configuration_arg("configuration", request.configuration)?.unwrap_or_default();
                let (workspace, created) = self.store.get_or_create_workspace(&id, metadata, configuration).await?;
                Ok(pb::GetOrCreateWorkspaceResponse {
                    workspace: Some(workspace.into()),
                    created,
                })
            }
            .await,
        )
    }

    async fn update_workspace(&self, request: Request<pb::UpdateWorkspaceRequest>) -> RpcResult<pb::Workspace> {
        let request = request.into_inner();
        reply(
            async {
                let id = validate::resource_id("workspace_id", &request.workspace_id)?;
                let metadata = metadata_arg("metadata", request.metadata)?;
                let configuration = configuration_arg("configuration", request.configuration)?;
                Ok(self.store.update_workspace(&id, metadata, configuration).await?.into())
            }
            .await,
        )
    }

    async fn delete_workspace(
        &self,
        request: Request<pb::DeleteWorkspaceRequest>,
    ) -> RpcResult<pb::DeleteWorkspaceResponse> {
        let request = request.into_inner();
        reply(
            async {
                let id = validate::reference_id("workspace_id", &request.workspace_id)?;
                self.wrote(self.store.delete_workspace(&id).await)?;
                Ok(pb::DeleteWorkspaceResponse {})
            }
            .await,
        )
    }

    async fn get_or_create_peer(
        &self,
        request: Request<pb::GetOrCreatePeerRequest>,
    ) -> RpcResult<pb::GetOrCreatePeerResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
                let id = validate::resource_id("id", &request.id)?;
                let metadata = metadata_arg("metadata", request.metadata)?;
                let configuration = configuration_arg("configuration", request.configuration)?;
                let (peer, created) = self
                    .store
                    .get_or_create_peer(&workspace_id, &id, metadata, configuration)
                    .await?;
                Ok(pb::GetOrCreatePeerResponse {
                    peer: Some(peer.into()),
                    created,
                })
            }
            .await,
        )
    }

    async fn update_peer(&self, request: Request<pb::UpdatePeerRequest>) -> RpcResult<pb::Peer> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
                let id = validate::resource_id("peer_id", &request.peer_id)?;
                let metadata = metadata_arg("metadata", request.metadata)?;
                let configuration = configuration_arg("configuration", request.configuration)?;
                Ok(self
                    .store
                    .get_or_create_peer(&workspace_id, &id, metadata, configuration)
                    .await?
                    .0
                    .into())
            }
            .await,
        )
    }

    async fn delete_peer(&self, request: Request<pb::DeletePeerRequest>) -> RpcResult<pb::DeletePeerResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let id = validate::reference_id("peer_id", &request.peer_id)?;
                self.wrote(self.store.delete_peer(&workspace_id, &id).await)?;
                Ok(pb::DeletePeerResponse {})
            }
            .await,
        )
    }

    async fn get_or_create_session(
        &self,
        request: Request<pb::GetOrCreateSessionRequest>,
    ) -> RpcResult<pb::GetOrCreateSessionResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
                let id = validate::resource_id("id", &request.id)?;
                let metadata = metadata_arg("metadata", request.metadata)?;
                let configuration = configuration_arg("configuration", request.configuration)?;
                let peers = session_peers("peers", request.peers)?;
                let (session, created) = self
                    .store
                    .get_or_create_session(&workspace_id, &id, metadata, configuration, peers)
                    .await?;
                Ok(pb::GetOrCreateSessionResponse {
                    session: Some(session.into()),
                    created,
                })
            }
            .await,
        )
    }

    async fn update_session(&self, request: Request<pb::UpdateSessionRequest>) -> RpcResult<pb::Session> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
                let id = validate::resource_id("session_id", &request.session_id)?;
                let metadata = metadata_arg("metadata", request.metadata)?;
                let configuration = configuration_arg("configuration", request.configuration)?;
                let (session, _) = self
                    .store
                    .get_or_create_session(&workspace_id, &id, metadata, configuration, Vec::new())
                    .await?;
                Ok(session.into())
            }
            .await,
        )
    }

    async fn delete_session(&self, request: Request<pb::DeleteSessionRequest>) -> RpcResult<pb::DeleteSessionResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let id = validate::reference_id("session_id", &request.session_id)?;
                self.wrote(self.store.delete_session(&workspace_id, &id).await)?;
                Ok(pb::DeleteSessionResponse {})
            }
            .await,
        )
    }

    async fn clone_session(&self, request: Request<pb::CloneSessionRequest>) -> RpcResult<pb::Session> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let id = validate::reference_id("session_id", &request.session_id)?;
                let cutoff = request
                    .message_id
                    .as_deref()
                    .map(|id| validate::reference_id("message_id", id))
                    .transpose()?;
                Ok(self
                    .wrote(self.store.clone_session(&workspace_id, &id, cutoff.as_deref()).await)?
                    .into())
            }
            .await,
        )
    }

    async fn add_session_peers(&self, request: Request<pb::AddSessionPeersRequest>) -> RpcResult<pb::Session> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let peers = session_peers("peers", request.peers)?;
                Ok(self
                    .store
                    .add_session_peers(&workspace_id, &session_id, peers)
                    .await?
                    .into())
            }
            .await,
        )
    }

    async fn set_session_peers(&self, request: Request<pb::SetSessionPeersRequest>) -> RpcResult<pb::Session> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let peers = session_peers("peers", request.peers)?;
                Ok(self
                    .store
                    .set_session_peers(&workspace_id, &session_id, peers)
                    .await?
                    .into())
            }
            .await,
        )
    }

    async fn remove_session_peers(&self, request: Request<pb::RemoveSessionPeersRequest>) -> RpcResult<pb::Session> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let peer_ids = request
                    .peer_ids
                    .iter()
                    .enumerate()
                    .map(|(index, id)| validate::reference_id(&format!("peer_ids[{index}]"), id))
                    .collect::<Result<Vec<_>>>()?;
                Ok(self
                    .store
                    .remove_session_peers(&workspace_id, &session_id, &peer_ids)
                    .await?
                    .into())
            }
            .await,
        )
    }

    async fn set_session_peer_config(
        &self,
        request: Request<pb::SetSessionPeerConfigRequest>,
    ) -> RpcResult<pb::SetSessionPeerConfigResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let peer_id = validate::reference_id("peer_id", &request.peer_id)?;
                let config = roncho_core::model::SessionPeerConfig {
                    observe_me: request.observe_me,
                    observe_others: request.observe_others,
                };
                self.store
                    .set_session_peer_config(&workspace_id, &session_id, &peer_id, config)
                    .await?;
                Ok(pb::SetSessionPeerConfigResponse {})
            }
            .await,
        )
    }

    async fn create_messages(
        &self,
        request: Request<pb::CreateMessagesRequest>,
    ) -> RpcResult<pb::CreateMessagesResponse> {
        reply(
            self.create_messages(request.into_inner())
                .await
                .map(|messages| pb::CreateMessagesResponse { messages }),
        )
    }

    async fn upload_file(&self, request: Request<pb::UploadFileRequest>) -> RpcResult<pb::UploadFileResponse> {
        reply(
            self.upload_file(request.into_inner())
                .await
                .map(|messages| pb::UploadFileResponse { messages }),
        )
    }

    async fn update_message(&self, request: Request<pb::UpdateMessageRequest>) -> RpcResult<pb::Message> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let id = validate::reference_id("message_id", &request.message_id)?;
                let metadata = metadata_arg("metadata", request.metadata)?.unwrap_or_default();
                Ok(self
                    .store
                    .update_message(&workspace_id, &session_id, &id, metadata)
                    .await?
                    .into())
            }
            .await,
        )
    }

    async fn delete_message(&self, request: Request<pb::DeleteMessageRequest>) -> RpcResult<pb::DeleteMessageResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let id = validate::reference_id("message_id", &request.message_id)?;
                self.wrote(self.store.delete_message(&workspace_id, &session_id, &id).await)?;
                Ok(pb::DeleteMessageResponse {})
            }
            .await,
        )
    }

    async fn create_conclusions(
        &self,
        request: Request<pb::CreateConclusionsRequest>,
    ) -> RpcResult<pb::CreateConclusionsResponse> {
        reply(
            self.create_conclusions(request.into_inner())
                .await
                .map(|conclusions| pb::CreateConclusionsResponse { conclusions }),
        )
    }

    async fn delete_conclusion(
        &self,
        request: Request<pb::DeleteConclusionRequest>,
    ) -> RpcResult<pb::DeleteConclusionResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let id = validate::reference_id("conclusion_id", &request.conclusion_id)?;
                self.wrote(self.store.delete_conclusion(&workspace_id, &id).await)?;
                Ok(pb::DeleteConclusionResponse {})
            }
            .await,
        )
    }

    async fn set_peer_card(&self, request: Request<pb::SetPeerCardRequest>) -> RpcResult<pb::PeerCardResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
                let observer = validate::resource_id("peer_id", &request.peer_id)?;
                let observed = match &request.target {
                    Some(target) => validate::resource_id("target", target)?,
                    None => observer.clone(),
                };
                let card: Vec<String> = request
                    .peer_card
                    .iter()
                    .map(|entry| validate::strip_nul(entry))
                    .collect();
                self.store
                    .set_peer_card(&workspace_id, &observer, &observed, card.clone())
                    .await?;
                Ok(pb::PeerCardResponse {
                    peer_card: card,
                    exists: true,
                })
            }
            .await,
        )
    }

    async fn create_webhook(&self, request: Request<pb::CreateWebhookRequest>) -> RpcResult<pb::CreateWebhookResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
                let url = validate::webhook_url("url", &request.url)?;
                let (webhook, created) = self.store.create_webhook(&workspace_id, &url).await?;
                Ok(pb::CreateWebhookResponse {
                    webhook: Some(webhook.into()),
                    created,
                })
            }
            .await,
        )
    }

    async fn delete_webhook(&self, request: Request<pb::DeleteWebhookRequest>) -> RpcResult<pb::DeleteWebhookResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let id = validate::reference_id("endpoint_id", &request.endpoint_id)?;
                self.store.delete_webhook(&workspace_id, &id).await?;
                Ok(pb::DeleteWebhookResponse {})
            }
            .await,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn session_peer_ids_are_validated_and_sorted() {
        let peers = [
            ("b".to_owned(), pb::SessionPeerConfig::default()),
            ("a".to_owned(), pb::SessionPeerConfig::default()),
        ];
        let validated = session_peers("peers", peers.into_iter().collect()).unwrap();
        assert_eq!(
            validated.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let bad = [("a b".to_owned(), pb::SessionPeerConfig::default())];
        let error = session_peers("peers", bad.into_iter().collect()).unwrap_err();
        assert!(matches!(error, Error::InvalidArgument { field, .. } if field == "peers.a b"));
    }

    #[test]
    fn unset_metadata_stays_unset() {
        assert_eq!(metadata_arg("metadata", None).unwrap(), None);
        let value = Value::Object(
            metadata_arg("m", Some(prost_types::Struct::default()))
                .unwrap()
                .unwrap(),
        );
        assert_eq!(value, json!({}));
    }
}
