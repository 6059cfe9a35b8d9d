//! Interned names for the in-memory indexes: a row's session, peer and
//! level as small integers, so a filter is checked per row by comparing
//! integers instead of strings (a million string comparisons took longer
//! than the vector scan they filtered).

use std::collections::HashMap;

use roncho_core::vector::VectorFilter;

/// A row without the field.
const NONE: u32 = u32::MAX;
/// A name the filter asks for that no row has.
const UNKNOWN: u32 = u32::MAX - 1;

/// Names seen so far, each with its number.
#[derive(Debug, Default)]
pub(crate) struct Names {
    numbers: HashMap<Box<str>, u32>,
}

impl Names {
    /// The number of `name` (`None`: the row has no such field), assigned on first sight.
    pub fn intern(&mut self, name: Option<&str>) -> u32 {
        let Some(name) = name else { return NONE };
        if let Some(&number) = self.numbers.get(name) {
            return number;
        }
        let number = self.numbers.len() as u32;
        self.numbers.insert(name.into(), number);
        number
    }

    fn number(&self, name: &str) -> u32 {
        self.numbers.get(name).copied().unwrap_or(UNKNOWN)
    }

    /// `filter` over these numbers.
    pub fn compile(&self, filter: &VectorFilter) -> Fields {
        let numbers = |names: &Option<Vec<String>>| {
            names
                .as_ref()
                .map(|names| names.iter().map(|name| self.number(name)).collect())
        };
        Fields {
            all: *filter == VectorFilter::default(),
            sessions: numbers(&filter.session_ids),
            peer: filter.peer_id.as_deref().map(|peer| self.number(peer)),
            levels: numbers(&filter.levels),
        }
    }
}

/// A [`VectorFilter`] compiled to interned numbers.
#[derive(Debug)]
pub(crate) struct Fields {
    all: bool,
    sessions: Option<Vec<u32>>,
    peer: Option<u32>,
    levels: Option<Vec<u32>>,
}

impl Fields {
    /// Whether every row passes (the filter is empty).
    pub fn passes_everything(&self) -> bool {
        self.all
    }

    /// Whether a row of `[session, peer, level]` passes, as [`VectorFilter::matches`].
    pub fn matches(&self, row: [u32; 3]) -> bool {
        let within = |allowed: &Option<Vec<u32>>, value: u32| {
            allowed
                .as_ref()
                .is_none_or(|allowed| value != NONE && allowed.contains(&value))
        };
        self.all
            || (within(&self.sessions, row[0])
                && self.peer.is_none_or(|peer| row[1] == peer)
                && within(&self.levels, row[2]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiled filters agree with `VectorFilter::matches` on every combination.
    #[test]
    fn compiled_filters_agree_with_the_string_filter() {
        let mut names = Names::default();
        let values = [None, Some("s1"), Some("s2"), Some("alice"), Some("summary")];
        for value in values {
            names.intern(value);
        }
        let lists = [
            None,
            Some(vec!["s1".to_owned()]),
            Some(vec!["s2".into(), "gone".into()]),
        ];
        let peers = [None, Some("alice".to_owned()), Some("nobody".to_owned())];
        for session_ids in &lists {
            for peer_id in &peers {
                for levels in [None, Some(vec!["summary".to_owned()])] {
                    let filter = VectorFilter {
                        session_ids: session_ids.clone(),
                        peer_id: peer_id.clone(),
                        levels,
                    };
                    let compiled = names.compile(&filter);
                    for session in values {
                        for peer in values {
                            for level in values {
                                let row = [names.intern(session), names.intern(peer), names.intern(level)];
                                assert_eq!(
                                    compiled.matches(row),
                                    filter.matches(session, peer, level),
                                    "{filter:?} {session:?} {peer:?} {level:?}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
