//! Honcho's working representation: which conclusions of a collection to
//! show (honcho-v3 §3.3) and their markdown format.

use crate::model::Conclusion;

/// How many conclusions each source contributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub semantic: i64,
    pub most_derived: i64,
    pub recent: i64,
}

/// Returns Honcho's split of `max_conclusions` between semantic matches, the
/// most derived and the newest conclusions. Without a semantic source
/// (`semantic_available` false) its share goes to the newest, so a
/// representation is never smaller for lack of an embedder.
pub fn budget(
    max_conclusions: i64,
    search_query: bool,
    top_k: Option<i64>,
    include_most_derived: bool,
    semantic_available: bool,
) -> Budget {
    let total = max_conclusions.max(0);
    let semantic = if search_query {
        top_k.unwrap_or(total / 3).max(1).min(total)
    } else {
        0
    };
    let most_derived = match (search_query, include_most_derived) {
        (true, true) => (total / 3).min(total - semantic),
        (false, true) => (total / 2).min(total - semantic),
        _ => 0,
    };
    let recent = total - semantic - most_derived;
    if semantic_available {
        Budget {
            semantic,
            most_derived,
            recent,
        }
    } else {
        Budget {
            semantic: 0,
            most_derived,
            recent: recent + semantic,
        }
    }
}

/// Formats microseconds since the epoch as `YYYY-MM-DD HH:MM:SS` (UTC).
pub fn format_time(micros: i64) -> String {
    let format = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    time::OffsetDateTime::from_unix_timestamp(micros.div_euclid(1_000_000))
        .ok()
        .and_then(|time| time.format(&format).ok())
        .unwrap_or_default()
}

/// Most sources listed under an inductive pattern.
const MAX_LISTED_SOURCES: usize = 5;

/// Returns the representation as Honcho's markdown: sections per level in the
/// order explicit, deductive, inductive, contradiction, each oldest first;
/// empty sections are left out, so no conclusions give `""`.
pub fn to_markdown(conclusions: &[Conclusion]) -> String {
    let mut sorted: Vec<&Conclusion> = conclusions.iter().collect();
    sorted.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
    let mut sections = Vec::new();
    for (level, title) in [
        ("explicit", "Explicit Observations"),
        ("deductive", "Deductive Observations"),
        ("inductive", "Inductive Observations"),
        ("contradiction", "Contradictions"),
    ] {
        let entries: Vec<String> = sorted.iter().filter(|c| c.level == level).map(|c| entry(c)).collect();
        if !entries.is_empty() {
            sections.push(format!("## {title}\n\n{}", entries.join("\n")));
        }
    }
    sections.join("\n\n")
}

fn entry(conclusion: &Conclusion) -> String {
    let listed = |items: &[String]| items.iter().map(|item| format!("\n   - {item}")).collect::<String>();
    match conclusion.level.as_str() {
        "deductive" if !conclusion.premises.is_empty() => format!(
            "[{}] {}\n   Premises:{}",
            format_time(conclusion.created_at),
            conclusion.content,
            listed(&conclusion.premises)
        ),
        "inductive" => {
            let confidence = conclusion
                .metadata
                .get("confidence")
                .and_then(|v| v.as_str())
                .unwrap_or("medium");
            let mut text = format!(" **Pattern** [{confidence}]: {}", conclusion.content);
            if let Some(pattern_type) = conclusion.metadata.get("pattern_type").and_then(|v| v.as_str()) {
                text.push_str(&format!("\n   **Type**: {pattern_type}"));
            }
            if !conclusion.source_ids.is_empty() {
                let shown = conclusion.source_ids.len().min(MAX_LISTED_SOURCES);
                text.push_str(&format!("\n   **Sources**:{}", listed(&conclusion.source_ids[..shown])));
                if conclusion.source_ids.len() > shown {
                    text.push_str(&format!("\n   - ... and {} more", conclusion.source_ids.len() - shown));
                }
            }
            text
        }
        "contradiction" => {
            let mut text = format!(" **CONTRADICTION**: {}", conclusion.content);
            if !conclusion.premises.is_empty() {
                text.push_str(&format!(
                    "\n   **Conflicting statements**:{}",
                    listed(&conclusion.premises)
                ));
            }
            text
        }
        _ => format!("[{}] {}", format_time(conclusion.created_at), conclusion.content),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conclusion(id: &str, level: &str, content: &str, created_at: i64) -> Conclusion {
        Conclusion {
            id: id.into(),
            workspace_id: "w".into(),
            observer_id: "a".into(),
            observed_id: "b".into(),
            session_id: None,
            level: level.into(),
            content: content.into(),
            premises: vec![],
            source_ids: vec![],
            times_derived: 1,
            metadata: Default::default(),
            created_at,
        }
    }

    #[test]
    fn budget_follows_honchos_split() {
        assert_eq!(
            budget(100, false, None, false, true),
            Budget {
                semantic: 0,
                most_derived: 0,
                recent: 100
            }
        );
        assert_eq!(
            budget(100, false, None, true, true),
            Budget {
                semantic: 0,
                most_derived: 50,
                recent: 50
            }
        );
        assert_eq!(
            budget(100, true, None, true, true),
            Budget {
                semantic: 33,
                most_derived: 33,
                recent: 34
            }
        );
        assert_eq!(
            budget(25, true, Some(10), false, true),
            Budget {
                semantic: 10,
                most_derived: 0,
                recent: 15
            }
        );
        assert_eq!(
            budget(25, true, Some(10), false, false),
            Budget {
                semantic: 0,
                most_derived: 0,
                recent: 25
            }
        );
        assert_eq!(
            budget(3, true, Some(50), true, true),
            Budget {
                semantic: 3,
                most_derived: 0,
                recent: 0
            }
        );
    }

    #[test]
    fn markdown_groups_levels_and_omits_empty_sections() {
        assert_eq!(to_markdown(&[]), "");
        let mut deduction = conclusion("d", "deductive", "Bob drinks coffee daily", 2_000_000);
        deduction.premises = vec!["Bob has espresso each morning".into()];
        let mut pattern = conclusion("i", "inductive", "Bob plans trips in spring", 3_000_000);
        pattern.metadata.insert("confidence".into(), "high".into());
        pattern.metadata.insert("pattern_type".into(), "preference".into());
        pattern.source_ids = (0..7).map(|i| format!("s{i}")).collect();
        let markdown = to_markdown(&[pattern, deduction, conclusion("e", "explicit", "Bob likes espresso", 0)]);
        assert_eq!(
            markdown,
            "## Explicit Observations\n\n[1970-01-01 00:00:00] Bob likes espresso\n\n\
             ## Deductive Observations\n\n[1970-01-01 00:00:02] Bob drinks coffee daily\n   Premises:\n   - Bob has espresso each morning\n\n\
             ## Inductive Observations\n\n **Pattern** [high]: Bob plans trips in spring\n   **Type**: preference\n   **Sources**:\n   - s0\n   - s1\n   - s2\n   - s3\n   - s4\n   - ... and 2 more"
        );
    }
}
