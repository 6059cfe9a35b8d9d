//! What a query says its answers are like, beside its words and meaning:
//! the peers it asks about and the days it names ([`crate::days`]). Search
//! fuses each preference's candidates by rank with the fused list
//! ([`crate::messages`]): they move ahead; none is added or dropped.

use roncho_core::filter::Filter;
use roncho_core::model::{Message, MessageQuery, PageRequest, PeerKind};
use roncho_core::{Error, Result};

use crate::SearchStore;

/// Peers a workspace may have for [`named_peers`] to look for them in queries.
const NAMED_PEER_SCAN: i64 = 100;

/// What a query says its answers are like.
#[derive(Debug, Default)]
pub(crate) struct Preferred {
    /// The peers it asks about ([`Named::asked_about`]): their own
    /// messages. In conversations, what a question asks about a person is
    /// nearly always in what that person said (on the LoCoMo development
    /// set, 92–100 % of evidence turns per question category), yet a name
    /// is a weak term for BM25 and a weak signal in an embedding.
    pub(crate) peers: Vec<String>,
    /// The calendar days and ranges of days it names
    /// ([`crate::days::named_days`]): messages written on one of them.
    pub(crate) days: Vec<std::ops::Range<i64>>,
}

impl Preferred {
    /// The fused candidates of each preference (empty: none asked), in their fused order.
    pub(crate) fn subsets(&self, fused: &[Message]) -> Vec<Vec<Message>> {
        let by = |keep: &dyn Fn(&Message) -> bool| fused.iter().filter(|message| keep(message)).cloned().collect();
        let mut subsets = Vec::new();
        if !self.peers.is_empty() {
            subsets.push(by(&|message| self.peers.contains(&message.peer_id)));
        }
        if !self.days.is_empty() {
            subsets.push(by(&|message| {
                self.days.iter().any(|day| day.contains(&message.created_at))
            }));
        }
        subsets
    }
}

/// The peers a query names, and those it asks about.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Named {
    /// Every peer whose id the query names.
    pub(crate) mentioned: Vec<String>,
    /// The peers whose own messages answer it: the first peer named other
    /// than as an owner ("Gina's store"), with any joined to it by "and"
    /// or "or"; every peer named when all are owners. "What does Gina say
    /// to Jon about the opening?" asks what Gina said; "What did Jon say
    /// about Gina's store?" what Jon said; "How do Jon and Gina both
    /// unwind?" both. Before, every peer named was asked about, so a query
    /// naming both speakers of a two-person conversation favoured neither:
    /// on the development set this moved one conversation's recall@10 /
    /// any@10 from 0.761 / 0.802 to 0.786 / 0.827 and left the other's
    /// unchanged (with `REPLY_SHARE`: 0.767 / 0.815 to 0.792 / 0.840,
    /// and 0.792 / 0.840 to 0.789 / 0.840; docs/benchmarks.md, "Questions
    /// and their replies").
    pub(crate) asked_about: Vec<String>,
}

/// Returns the peers of the workspace that `query` names (their id's
/// words, split at `-` and `_`, appear in it in order, ignoring case);
/// none where the search is of one peer's messages. Workspaces of more
/// than [`NAMED_PEER_SCAN`] peers are not scanned.
pub(crate) async fn named_peers(
    store: &dyn SearchStore,
    workspace_id: &str,
    query: &str,
    search: &MessageQuery,
) -> Result<Named> {
    if search.peer_id.is_some() {
        return Ok(Named::default());
    }
    let page = PageRequest::from_wire(1, NAMED_PEER_SCAN as i32, false)?;
    let peers = match store.list_peers(workspace_id, PeerKind::Peer, &Filter::All, page).await {
        Ok(peers) => peers,
        // Searching a workspace that does not exist finds nothing; not an error here.
        Err(Error::NotFound { .. }) => return Ok(Named::default()),
        Err(error) => return Err(error),
    };
    if peers.total > NAMED_PEER_SCAN {
        return Ok(Named::default());
    }
    Ok(names_in(query, peers.items.into_iter().map(|peer| peer.id)))
}

/// Which of `peers` `query` names, and which it asks about ([`Named`]).
fn names_in(query: &str, peers: impl Iterator<Item = String>) -> Named {
    let words = lower_words(query);
    // Each mention: where it starts and ends in `words`, and whose it is.
    let mut mentions: Vec<(usize, usize, String)> = Vec::new();
    let mut mentioned = Vec::new();
    for peer in peers {
        let id_words = lower_words(&peer);
        if id_words.is_empty() {
            continue;
        }
        let before = mentions.len();
        for start in (0..words.len()).filter(|&at| words[at..].starts_with(&id_words)) {
            mentions.push((start, start + id_words.len(), peer.clone()));
        }
        if mentions.len() > before {
            mentioned.push(peer);
        }
    }
    mentions.sort();
    // "Gina's" is the words "gina" and "s".
    let owner = |end: usize| words.get(end).is_some_and(|word| word == "s");
    let mut subjects = mentions.iter().filter(|(_, end, _)| !owner(*end));
    let Some(&(_, mut end, ref first)) = subjects.next() else {
        return Named {
            asked_about: mentioned.clone(),
            mentioned,
        };
    };
    let mut asked_about = vec![first.clone()];
    for (start, next_end, peer) in subjects {
        if *start == end + 1 && matches!(words[end].as_str(), "and" | "or") {
            if !asked_about.contains(peer) {
                asked_about.push(peer.clone());
            }
            end = *next_end;
        }
    }
    Named { mentioned, asked_about }
}

/// Lowercase alphanumeric words of `text`.
fn lower_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_names_are_matched_as_whole_words() {
        assert_eq!(
            lower_words("What did Caroline-Smith say?"),
            ["what", "did", "caroline", "smith", "say"]
        );
        let peers = || ["Caroline_Smith", "Carol"].map(String::from).into_iter();
        let named = names_in("When did caroline smith paint?", peers());
        assert_eq!(named.mentioned, ["Caroline_Smith"]);
        assert_eq!(named.asked_about, ["Caroline_Smith"]);
        assert_eq!(names_in("When did Caro paint?", peers()), Named::default());
    }

    #[test]
    fn a_query_asks_about_the_peer_it_names_first_not_an_owner_or_an_addressee() {
        let asked = |query: &str| {
            let named = names_in(query, ["Jon", "Gina", "Mary-Ann"].map(String::from).into_iter());
            let mut mentioned = named.mentioned.clone();
            mentioned.sort();
            (mentioned, named.asked_about)
        };
        let both = || vec!["Gina".to_owned(), "Jon".to_owned()];
        assert_eq!(
            asked("What does Gina say to Jon about the opening?"),
            (both(), vec!["Gina".into()])
        );
        assert_eq!(
            asked("What did Jon say about Gina's store?"),
            (both(), vec!["Jon".into()])
        );
        assert_eq!(
            asked("What did Jon say about Gina’s store?").1,
            ["Jon"],
            "a curly apostrophe"
        );
        assert_eq!(
            asked("How do Jon and Gina both unwind?"),
            (both(), vec!["Jon".into(), "Gina".into()])
        );
        assert_eq!(asked("Did gina or jon open first?").1, ["Gina", "Jon"]);
        // Owners alone: every peer named is asked about.
        assert_eq!(asked("Where is Gina's store?").1, ["Gina"]);
        assert_eq!(asked("Is Jon's studio near Gina's store?").1.len(), 2);
        assert_eq!(asked("What did Mary-Ann tell Jon?").1, ["Mary-Ann"]);
        assert_eq!(asked("What did Mary Ann and Gina bake?").1, ["Mary-Ann", "Gina"]);
        assert_eq!(asked("What did you bake?"), (vec![], vec![]));
    }
}
