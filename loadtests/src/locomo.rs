//! The LoCoMo format (conversations of sessions of turns with `dia_id`s, and
//! questions with `evidence` dia_ids), and the retrieval metrics of the
//! project: recall@k and any-hit@10 per question category.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One conversation with its questions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    #[serde(default)]
    pub sample_id: String,
    pub conversation: Map<String, Value>,
    pub qa: Vec<Question>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Question {
    pub question: String,
    #[serde(default)]
    pub answer: Value,
    #[serde(default)]
    pub evidence: Vec<String>,
    pub category: u8,
}

/// One turn of a session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Turn {
    pub speaker: String,
    pub dia_id: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blip_caption: Option<String>,
}

/// A session: its number, its date text and its turns.
#[derive(Debug, Clone)]
pub struct SessionTurns {
    pub number: u32,
    pub date_time: String,
    pub turns: Vec<Turn>,
}

impl Sample {
    /// Returns the sessions in order.
    pub fn sessions(&self) -> Vec<SessionTurns> {
        let mut sessions = Vec::new();
        for (key, value) in &self.conversation {
            let Some(number) = key.strip_prefix("session_").and_then(|rest| rest.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(turns) = serde_json::from_value::<Vec<Turn>>(value.clone()) else {
                continue;
            };
            let date_time = self
                .conversation
                .get(&format!("session_{number}_date_time"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            sessions.push(SessionTurns {
                number,
                date_time,
                turns,
            });
        }
        sessions.sort_by_key(|session| session.number);
        sessions
    }

    /// Returns every dia_id of the conversation.
    pub fn dia_ids(&self) -> HashSet<String> {
        self.sessions()
            .into_iter()
            .flat_map(|session| session.turns.into_iter().map(|turn| turn.dia_id))
            .collect()
    }
}

/// Returns the message text of a turn: its words and any shared photo's caption.
pub fn turn_content(turn: &Turn) -> String {
    match &turn.blip_caption {
        Some(caption) if !caption.is_empty() => format!("{} [shares a photo: {caption}]", turn.text),
        _ => turn.text.clone(),
    }
}

/// Normalises evidence entries to `D<session>:<turn>` ids that name a turn:
/// "D:11:26" → "D11:26"; "D8:6; D9:17" → two ids; unknown ids are dropped.
pub fn normalize_evidence(evidence: &[String], known: &HashSet<String>) -> Vec<String> {
    let mut ids = Vec::new();
    for entry in evidence {
        for piece in entry.split([';', ',', ' ']).filter(|piece| !piece.is_empty()) {
            let digits: Vec<&str> = piece
                .trim_start_matches('D')
                .split(':')
                .filter(|part| !part.is_empty())
                .collect();
            if let [session, turn] = digits.as_slice() {
                let id = format!("D{session}:{turn}");
                if known.contains(&id) && !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
    }
    ids
}

/// Parses LoCoMo's "1:56 pm on 8 May, 2023" into RFC 3339 (UTC).
pub fn parse_date_time(text: &str) -> Option<String> {
    let (clock, date) = text.split_once(" on ")?;
    let (hour_minute, meridiem) = clock.trim().split_once(' ')?;
    let (hour, minute) = hour_minute.split_once(':')?;
    let mut hour: u32 = hour.parse().ok()?;
    let minute: u32 = minute.parse().ok()?;
    match meridiem.to_ascii_lowercase().as_str() {
        "pm" if hour < 12 => hour += 12,
        "am" if hour == 12 => hour = 0,
        _ => {}
    }
    let date = date.replace(',', "");
    let parts: Vec<&str> = date.split_whitespace().collect();
    let [day, month, year] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    let month = MONTHS
        .iter()
        .position(|name| name.starts_with(&month.to_ascii_lowercase()))?
        + 1;
    let day: u32 = day.parse().ok()?;
    let year: u32 = year.parse().ok()?;
    Some(format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:00Z"))
}

/// Recall of one question at several cut-offs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Scores {
    pub questions: usize,
    pub recall_at_5: f64,
    pub recall_at_10: f64,
    pub recall_at_20: f64,
    pub any_at_10: f64,
}

/// Sums of per-question scores, by category.
#[derive(Debug, Default)]
pub struct Tally {
    by_category: BTreeMap<u8, Scores>,
}

fn recall(evidence: &[String], ranked: &[String], k: usize) -> f64 {
    let top: HashSet<&String> = ranked.iter().take(k).collect();
    evidence.iter().filter(|id| top.contains(id)).count() as f64 / evidence.len() as f64
}

impl Tally {
    /// Adds one question's ranked dia_ids against its evidence.
    pub fn add(&mut self, category: u8, evidence: &[String], ranked: &[String]) {
        if evidence.is_empty() {
            return;
        }
        let scores = self.by_category.entry(category).or_default();
        scores.questions += 1;
        scores.recall_at_5 += recall(evidence, ranked, 5);
        scores.recall_at_10 += recall(evidence, ranked, 10);
        scores.recall_at_20 += recall(evidence, ranked, 20);
        scores.any_at_10 += if recall(evidence, ranked, 10) > 0.0 { 1.0 } else { 0.0 };
    }

    /// Returns averages per category and over the categories with answers
    /// (key 0): LoCoMo's 1–4 and the long conversations' 11–19.
    pub fn averages(&self) -> BTreeMap<u8, Scores> {
        let mut averages = BTreeMap::new();
        let mut overall = Scores::default();
        for (category, sums) in &self.by_category {
            let n = sums.questions.max(1) as f64;
            averages.insert(
                *category,
                Scores {
                    questions: sums.questions,
                    recall_at_5: sums.recall_at_5 / n,
                    recall_at_10: sums.recall_at_10 / n,
                    recall_at_20: sums.recall_at_20 / n,
                    any_at_10: sums.any_at_10 / n,
                },
            );
            if (1..=4).contains(category) || (11..=19).contains(category) {
                overall.questions += sums.questions;
                overall.recall_at_5 += sums.recall_at_5;
                overall.recall_at_10 += sums.recall_at_10;
                overall.recall_at_20 += sums.recall_at_20;
                overall.any_at_10 += sums.any_at_10;
            }
        }
        let n = overall.questions.max(1) as f64;
        overall.recall_at_5 /= n;
        overall.recall_at_10 /= n;
        overall.recall_at_20 /= n;
        overall.any_at_10 /= n;
        averages.insert(0, overall);
        averages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_is_normalised_and_unknown_ids_dropped() {
        let known: HashSet<String> = ["D11:26", "D8:6", "D9:17", "D1:3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let raw = vec![
            "D:11:26".to_owned(),
            "D8:6; D9:17".to_owned(),
            "D1:3".to_owned(),
            "D99:1".to_owned(),
            "D1:3".to_owned(),
        ];
        assert_eq!(normalize_evidence(&raw, &known), ["D11:26", "D8:6", "D9:17", "D1:3"]);
    }

    #[test]
    fn locomo_dates_parse() {
        assert_eq!(
            parse_date_time("1:56 pm on 8 May, 2023").as_deref(),
            Some("2023-05-08T13:56:00Z")
        );
        assert_eq!(
            parse_date_time("12:04 am on 1 January, 2024").as_deref(),
            Some("2024-01-01T00:04:00Z")
        );
        assert_eq!(parse_date_time("yesterday"), None);
    }

    #[test]
    fn recall_averages_by_category_and_overall() {
        let mut tally = Tally::default();
        let ranked: Vec<String> = (0..20).map(|i| format!("D1:{i}")).collect();
        tally.add(1, &["D1:0".into(), "D1:15".into()], &ranked);
        tally.add(4, &["D1:7".into()], &ranked);
        tally.add(5, &["D1:0".into()], &ranked);
        let averages = tally.averages();
        assert_eq!(averages[&1].recall_at_10, 0.5);
        assert_eq!(averages[&1].recall_at_20, 1.0);
        assert_eq!(averages[&4].recall_at_5, 0.0);
        assert_eq!(averages[&0].questions, 2, "category 5 is not in the overall score");
        assert_eq!(averages[&0].recall_at_10, 0.75);
        assert_eq!(averages[&0].any_at_10, 1.0);
    }
}
