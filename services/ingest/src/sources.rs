//! The messages a conclusion written through the API names as what it was
//! learned from (Honcho 3.3's `source_message_ids`). Whether each is a
//! message of the workspace is the store's to check, inside the write
//! ([`roncho_core::store::Memory::write_conclusions`]): after an idempotent
//! repeat's replay, and in the transaction an erasure would race.

use roncho_core::{Error, Result, validate};

use crate::requests::ConclusionInput;

/// Most messages one conclusion names.
pub(crate) const MAX_SOURCE_MESSAGES: usize = validate::MAX_BATCH;

/// Longest message id named: ids roncho makes are 21 characters, Honcho's
/// imported ones about as long; a longer one names no message, and is not
/// echoed back in an error either.
const MAX_ID_CHARS: usize = 256;

/// Returns each conclusion's source messages, well formed: at most
/// [`MAX_SOURCE_MESSAGES`] named, none empty (NUL bytes stripped, as in
/// every id) or over [`MAX_ID_CHARS`], repeats folded.
pub(crate) fn checked(conclusions: &[ConclusionInput]) -> Result<Vec<Vec<String>>> {
    conclusions
        .iter()
        .enumerate()
        .map(|(index, conclusion)| {
            let field = || format!("conclusions[{index}].source_message_ids");
            let named = &conclusion.source_message_ids;
            if named.len() > MAX_SOURCE_MESSAGES {
                return Err(Error::invalid(
                    field(),
                    format!(
                        "names {} messages, at most {MAX_SOURCE_MESSAGES} are allowed",
                        named.len()
                    ),
                ));
            }
            let mut ids: Vec<String> = Vec::with_capacity(named.len());
            for id in named {
                let id = validate::strip_nul(id);
                if id.is_empty() || id.chars().count() > MAX_ID_CHARS {
                    return Err(Error::invalid(
                        field(),
                        format!("a message id is 1 to {MAX_ID_CHARS} characters"),
                    ));
                }
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            Ok(ids)
        })
        .collect()
}
