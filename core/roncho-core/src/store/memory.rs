//! Conclusions (observations, deductions, inductions) and peer cards: what the
//! deriver and dreamer write and recall reads.

use async_trait::async_trait;

use crate::Result;
use crate::filter::Filter;
use crate::idempotency::Once;
use crate::model::{CollectionQuery, Conclusion, NewConclusion, Page, PageRequest};

#[async_trait]
pub trait Memory: Send + Sync + 'static {
    /// Stores derived conclusions; observer, observed and session must
    /// exist. Sources erased since the conclusion was derived are dropped,
    /// and a conclusion left without any is not stored.
    async fn create_conclusions(&self, workspace_id: &str, conclusions: Vec<NewConclusion>) -> Result<Vec<Conclusion>>;
    /// Stores conclusions a client wrote, whose `source_ids` are messages it
    /// named: every one must be a message of the workspace when the write
    /// commits (`NOT_FOUND` naming the first that is not, and nothing is
    /// stored). With `once`, once per its key (see
    /// [`Messages::write_messages`]): a repeat returns what the first call
    /// stored, whatever was erased since.
    async fn write_conclusions(
        &self,
        workspace_id: &str,
        conclusions: Vec<NewConclusion>,
        once: Option<&Once>,
    ) -> Result<Vec<Conclusion>>;
    /// Live conclusions, newest first (`reverse`: oldest first).
    async fn list_conclusions(
        &self,
        workspace_id: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Conclusion>>;
    /// Live conclusions passing `filter` stored after the one at place
    /// `after` (0: from the first), in the order they were stored, at most
    /// `limit`: each with its place, the `after` of the next call. Rows
    /// erased or added meanwhile neither shift nor repeat the others (an
    /// export reads them so).
    async fn conclusions_in_order(
        &self,
        workspace_id: &str,
        filter: &Filter,
        after: i64,
        limit: i64,
    ) -> Result<Vec<(i64, Conclusion)>>;
    /// Counts one more derivation of live conclusions (a fact derived again).
    async fn increment_times_derived(&self, workspace_id: &str, ids: &[String]) -> Result<()>;
    /// Soft-deletes a conclusion: it disappears from every read but is kept.
    async fn delete_conclusion(&self, workspace_id: &str, id: &str) -> Result<()>;
    /// Replaces conclusion `old_id` with `new` in one transaction: the old one
    /// is soft-deleted (its vector tombstoned) and the new one carries its
    /// `times_derived` plus one. Honcho's semantic dedup keeps the better
    /// worded of two near-identical facts this way.
    async fn supersede_conclusion(&self, workspace_id: &str, old_id: &str, new: NewConclusion) -> Result<Conclusion>;
    /// The newest and the most derived live conclusions of one collection.
    async fn collection_conclusions(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        query: &CollectionQuery,
    ) -> Result<Vec<Conclusion>>;
    /// Returns live conclusions of a workspace by public id, in no particular order.
    async fn conclusions_by_ids(&self, workspace_id: &str, ids: &[String]) -> Result<Vec<Conclusion>>;
    /// Returns the live conclusions that list conclusion `id` among their
    /// `source_ids` (what was derived from it), oldest first.
    async fn conclusions_citing(&self, workspace_id: &str, id: &str) -> Result<Vec<Conclusion>>;
    /// Returns the card `observer_id` holds about `observed_id`, `None` when
    /// there is none; `NOT_FOUND` when the observer does not exist.
    async fn get_peer_card(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
    ) -> Result<Option<Vec<String>>>;
    /// Every card of a workspace, by observer then observed: (observer,
    /// observed, card).
    async fn list_peer_cards(&self, workspace_id: &str) -> Result<Vec<(String, String, Vec<String>)>>;
    /// Sets a peer card, creating the peers when absent.
    async fn set_peer_card(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        card: Vec<String>,
    ) -> Result<()>;
}
