//! A seeded generator of long assistant conversations in the LoCoMo format:
//! a user and a coding or planning assistant over a dozen sessions of ~24
//! turns, replies of a few thousand characters (code, plans, schedules, up
//! to ~14,000), and the user's facts, updates, contradictions, dated
//! milestones, preferences and instructions planted at known turns, often
//! inside long pastes. Each question names its kind ([`Kind`]) as its
//! category and asks in words its evidence mostly does not use, while the
//! assistant's replies do use them: what the development set of issue 58
//! measures is finding a turn by what it means among long turns that share
//! the question's words.
//!
//! The same seed always gives the same data. Conversation `i` is a coding
//! assistant's when `i` is even, a planning assistant's when odd.

mod domains;

use serde_json::{Map, json};

use crate::locomo::{Question, Sample, Turn};
use crate::synth::{Rng, session_date};
use domains::{CODING, Domain, PLANNING};

/// The question kinds, as LoCoMo-style categories (11–19, beside LoCoMo's 1–5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Extraction = 11,
    Update = 12,
    Contradiction = 13,
    Temporal = 14,
    Ordering = 15,
    MultiSession = 16,
    Preference = 17,
    Instruction = 18,
    Summary = 19,
}

impl Kind {
    /// The name of a category of this set, or `None` for another number.
    pub fn name(category: u8) -> Option<&'static str> {
        Some(match category {
            11 => "extract",
            12 => "update",
            13 => "contradict",
            14 => "temporal",
            15 => "ordering",
            16 => "multi-sess",
            17 => "preference",
            18 => "instruct",
            19 => "summary",
            _ => return None,
        })
    }
}

const USERS: &[&str] = &["Priya", "Mateo", "Lena", "Omar", "Sofia", "Kenji", "Ruth", "Amara"];
const ASSISTANT: &str = "Assistant";
const SESSIONS: usize = 12;

/// Returns `conversations` long conversations generated from `seed`.
pub fn generate(seed: u64, conversations: usize) -> Vec<Sample> {
    let mut rng = Rng::new(seed ^ 0x4c4f_4e47);
    (0..conversations)
        .map(|index| {
            let domain = if index % 2 == 0 { &CODING } else { &PLANNING };
            Conversation::new(&mut rng, domain).build(&mut rng, format!("long-{seed}-{index}"))
        })
        .collect()
}

struct Conversation<'d> {
    domain: &'d Domain,
    user: &'static str,
    project: &'static str,
    /// Turns by session; user turns at even positions.
    sessions: Vec<Vec<Turn>>,
    /// Whether a turn already carries a fact.
    planted: Vec<Vec<bool>>,
    days: Vec<usize>,
    questions: Vec<Question>,
}

/// A planted turn: (session, turn), both from 0.
type At = (usize, usize);

impl<'d> Conversation<'d> {
    fn new(rng: &mut Rng, domain: &'d Domain) -> Self {
        let user = rng.pick(USERS);
        let project = rng.pick(domain.projects);
        let mut days = Vec::new();
        let mut day = 1 + rng.below(20);
        let mut sessions = Vec::new();
        for session in 0..SESSIONS {
            day += 2 + rng.below(12);
            days.push(day);
            let turns = 2 * (10 + rng.below(4));
            let mut texts = Vec::new();
            for turn in 0..turns {
                let text = if turn % 2 == 0 {
                    user_filler(rng, domain, session == 0 && turn == 0, project)
                } else {
                    reply(rng, domain)
                };
                texts.push(text);
            }
            sessions.push(texts);
        }
        let planted = sessions.iter().map(|turns| vec![false; turns.len()]).collect();
        let sessions = sessions
            .into_iter()
            .enumerate()
            .map(|(session, texts)| {
                texts
                    .into_iter()
                    .enumerate()
                    .map(|(turn, text)| Turn {
                        speaker: if turn % 2 == 0 { user } else { ASSISTANT }.to_owned(),
                        dia_id: format!("D{}:{}", session + 1, turn + 1),
                        text,
                        blip_caption: None,
                    })
                    .collect()
            })
            .collect();
        Self {
            domain,
            user,
            project,
            sessions,
            planted,
            days,
            questions: Vec::new(),
        }
    }

    /// Puts `fact` in a free user turn of `session`, often inside a paste.
    fn plant(&mut self, rng: &mut Rng, session: usize, fact: &str) -> At {
        let free: Vec<usize> = (1..self.sessions[session].len() / 2)
            .map(|pair| pair * 2)
            .filter(|&turn| !self.planted[session][turn])
            .collect();
        let turn = if free.is_empty() {
            let turns = &mut self.sessions[session];
            for speaker in [self.user, ASSISTANT] {
                turns.push(Turn {
                    speaker: speaker.to_owned(),
                    dia_id: format!("D{}:{}", session + 1, turns.len() + 1),
                    text: reply(rng, self.domain),
                    blip_caption: None,
                });
                self.planted[session].push(false);
            }
            turns.len() - 2
        } else {
            free[rng.below(free.len())]
        };
        self.planted[session][turn] = true;
        let text = match rng.below(20) {
            0..=6 => format!("{} {fact}", rng.pick(LEADS)),
            7..=11 => format!("{} {fact}", rng.pick(self.domain.chatter)),
            12..=16 => format!("{}\n\n{fact}", paste(rng, self.domain)),
            _ => format!("{fact}\n\n{}", paste(rng, self.domain)),
        };
        self.sessions[session][turn].text = text.trim_start().to_owned();
        (session, turn)
    }

    fn ask(&mut self, kind: Kind, question: String, answer: serde_json::Value, evidence: &[At]) {
        self.questions.push(Question {
            question,
            answer,
            evidence: evidence
                .iter()
                .map(|(session, turn)| format!("D{}:{}", session + 1, turn + 1))
                .collect(),
            category: kind as u8,
        });
    }

    fn build(mut self, rng: &mut Rng, sample_id: String) -> Sample {
        let domain = self.domain;
        let any_session = |rng: &mut Rng| rng.below(SESSIONS);
        let mut slots: Vec<usize> = (0..domain.slots.len()).collect();
        shuffle(rng, &mut slots);
        let (updated, extracted) = slots.split_at(3);

        for &index in extracted {
            let slot = &domain.slots[index];
            let value = rng.pick(slot.values);
            let session = any_session(rng);
            let fact = rng.pick(slot.says).replace("{v}", value);
            let at = self.plant(rng, session, &fact);
            self.ask(Kind::Extraction, rng.pick(slot.asks).to_owned(), json!(value), &[at]);
        }
        for &index in updated {
            let slot = &domain.slots[index];
            let [old, new] = two(rng, slot.values);
            let early = rng.below(SESSIONS / 2);
            let late = early + 1 + rng.below(SESSIONS - early - 1);
            let fact = rng.pick(slot.says).replace("{v}", old);
            self.plant(rng, early, &fact);
            let change = rng.pick(slot.changes).replace("{old}", old).replace("{v}", new);
            let at = self.plant(rng, late, &change);
            let question = rng.pick(slot.asks).replace('?', " now?");
            self.ask(Kind::Update, question, json!(new), &[at]);
        }
        for number in domain.numbers.iter().take(2) {
            let first = number.low + rng.below((number.high - number.low) as usize) as u32;
            let second = loop {
                let n = number.low + rng.below((number.high - number.low) as usize + 1) as u32;
                if n != first {
                    break n;
                }
            };
            let early = rng.below(SESSIONS / 2);
            let late = early + 1 + rng.below(SESSIONS - early - 1);
            let a = self.plant(rng, early, &number.says[0].replace("{n}", &first.to_string()));
            let b = self.plant(rng, late, &number.says[1].replace("{n}", &second.to_string()));
            let question = rng.pick(number.asks).to_owned();
            self.ask(
                Kind::Contradiction,
                question,
                json!(format!("{first} then {second}")),
                &[a, b],
            );
        }

        let mut milestones: Vec<usize> = (0..domain.milestones.len()).collect();
        shuffle(rng, &mut milestones);
        let mut placed = Vec::new();
        let mut sessions: Vec<usize> = (0..SESSIONS).collect();
        shuffle(rng, &mut sessions);
        for (&index, &session) in milestones.iter().take(6).zip(&sessions) {
            let milestone = &domain.milestones[index];
            let at = self.plant(rng, session, milestone.says);
            placed.push((milestone, at));
        }
        for (milestone, at) in placed.iter().take(4) {
            let question = format!("{} {}?", rng.pick(WHEN), milestone.phrase);
            let date = session_date(self.days[at.0]);
            self.ask(Kind::Temporal, question, json!(date), &[*at]);
        }
        for pair in [(0, 4), (1, 5), (2, 3)] {
            let ((first, a), (second, b)) = (&placed[pair.0], &placed[pair.1]);
            let question = format!("Did {} before {}?", first.phrase, second.phrase);
            let answer = if a.0 < b.0 { "yes" } else { "no" };
            self.ask(Kind::Ordering, question, json!(answer), &[*a, *b]);
        }

        for multi in domain.multis {
            let items = distinct(rng, multi.items, 3);
            let mut sessions: Vec<usize> = (0..SESSIONS).collect();
            shuffle(rng, &mut sessions);
            let evidence: Vec<At> = items
                .iter()
                .zip(&sessions)
                .map(|(item, &session)| {
                    let fact = rng.pick(multi.says).replace("{v}", item);
                    self.plant(rng, session, &fact)
                })
                .collect();
            let question = rng.pick(multi.asks).to_owned();
            self.ask(Kind::MultiSession, question, json!(items), &evidence);
        }
        for (kind, said) in [
            (Kind::Preference, domain.preferences),
            (Kind::Instruction, domain.instructions),
        ] {
            let mut order: Vec<usize> = (0..said.len()).collect();
            shuffle(rng, &mut order);
            for &index in order.iter().take(4) {
                let session = any_session(rng);
                let at = self.plant(rng, session, said[index].says);
                self.ask(kind, said[index].asks.to_owned(), json!(said[index].says), &[at]);
            }
        }
        let mut threads: Vec<usize> = (0..domain.threads.len()).collect();
        shuffle(rng, &mut threads);
        for &index in threads.iter().take(2) {
            let thread = &domain.threads[index];
            let mut sessions: Vec<usize> = (0..SESSIONS).collect();
            shuffle(rng, &mut sessions);
            let mut sessions = sessions[..thread.steps.len()].to_vec();
            sessions.sort_unstable();
            let evidence: Vec<At> = thread
                .steps
                .iter()
                .zip(&sessions)
                .map(|(step, &session)| self.plant(rng, session, step))
                .collect();
            let question = rng.pick(thread.asks).to_owned();
            self.ask(Kind::Summary, question, json!(thread.steps), &evidence);
        }
        self.into_sample(sample_id)
    }

    fn into_sample(self, sample_id: String) -> Sample {
        let mut map = Map::new();
        map.insert("speaker_a".to_owned(), json!(self.user));
        map.insert("speaker_b".to_owned(), json!(ASSISTANT));
        map.insert("project".to_owned(), json!(self.project));
        for (index, turns) in self.sessions.into_iter().enumerate() {
            map.insert(
                format!("session_{}_date_time", index + 1),
                json!(session_date(self.days[index])),
            );
            map.insert(format!("session_{}", index + 1), json!(turns));
        }
        Sample {
            sample_id,
            conversation: map,
            qa: self.questions,
        }
    }
}

const LEADS: &[&str] = &[
    "",
    "Quick update:",
    "Before I forget,",
    "Oh, and",
    "FYI:",
    "Small thing:",
];
const WHEN: &[&str] = &["When did", "On what date did", "Around which day did"];

fn shuffle<T>(rng: &mut Rng, items: &mut [T]) {
    for index in (1..items.len()).rev() {
        items.swap(index, rng.below(index + 1));
    }
}

fn two(rng: &mut Rng, values: &[&'static str]) -> [&'static str; 2] {
    let items = distinct(rng, values, 2);
    [items[0], items[1]]
}

fn distinct(rng: &mut Rng, values: &[&'static str], count: usize) -> Vec<&'static str> {
    let mut order = values.to_vec();
    shuffle(rng, &mut order);
    order.truncate(count);
    order
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// A user turn with no fact: a short question, or now and then a paste.
fn user_filler(rng: &mut Rng, domain: &Domain, first: bool, project: &str) -> String {
    if first {
        return format!("Hi! I'm working on {project} and would like your help along the way.");
    }
    match rng.below(10) {
        0 | 1 => format!("{}\n\n{}", rng.pick(domain.chatter), paste(rng, domain)),
        2 | 3 => format!(
            "{} Specifically the {} part.",
            rng.pick(domain.chatter),
            rng.pick(domain.nouns)
        ),
        _ => rng.pick(domain.chatter).to_owned(),
    }
}

/// What a user pastes: log lines of a failing job, or a vendor's message.
fn paste(rng: &mut Rng, domain: &Domain) -> String {
    let lines = 15 + rng.below(60);
    let mut text = String::new();
    if domain.code {
        text.push_str("```\n");
        for line in 0..lines {
            let noun = rng.pick(domain.nouns);
            let verb = rng.pick(domain.verbs);
            let level = ["INFO", "WARN", "ERROR", "DEBUG"][rng.below(4)];
            text.push_str(&format!(
                "2024-{:02}-{:02}T{:02}:{:02}:{:02}Z {level} {noun}::{verb} id={} elapsed={}ms attempt={}\n",
                1 + rng.below(12),
                1 + rng.below(28),
                rng.below(24),
                rng.below(60),
                line % 60,
                rng.below(100_000),
                rng.below(5_000),
                1 + rng.below(4)
            ));
        }
        text.push_str("```");
    } else {
        text.push_str("> Dear organiser, please find our updated offer below.\n");
        for _ in 0..lines / 3 {
            let noun = rng.pick(domain.nouns);
            text.push_str(&format!(
                "> - {}: {} persons x {} EUR, {} min, room {}\n",
                capitalised(noun),
                10 + rng.below(200),
                5 + rng.below(120),
                15 + rng.below(120),
                1 + rng.below(12)
            ));
        }
        text.push_str("> Kind regards, the events team");
    }
    text
}

/// An assistant's reply: paragraphs, code or schedules and plans, from a
/// few hundred to ~14,000 characters.
fn reply(rng: &mut Rng, domain: &Domain) -> String {
    let target = match rng.below(10) {
        0..=6 => 1_500 + rng.below(3_500),
        7 | 8 => 5_000 + rng.below(4_000),
        _ => 9_000 + rng.below(5_000),
    };
    // A reply is about one or two of the project's decisions, as a real
    // exchange is: each decision's words recur in some replies, not all.
    let focus = [rng.below(domain.slots.len()), rng.below(domain.slots.len())];
    let mut text = format!(
        "{} the {} {}.\n\n",
        [
            "Good question. Let's look at",
            "Here is how I would approach",
            "Let's work through"
        ][rng.below(3)],
        rng.pick(domain.nouns),
        ["first", "step by step", "carefully"][rng.below(3)]
    );
    while text.len() < target {
        match rng.below(3) {
            0 => paragraph(rng, domain, &focus, &mut text),
            1 if domain.code => code(rng, domain, &mut text),
            1 => schedule(rng, domain, &mut text),
            _ => plan(rng, domain, &mut text),
        }
        text.push_str("\n\n");
    }
    text.push_str("Let me know how it goes.");
    text
}

fn paragraph(rng: &mut Rng, domain: &Domain, focus: &[usize; 2], text: &mut String) {
    for _ in 0..3 + rng.below(4) {
        let sentence = if rng.below(3) == 0 {
            let slot = &domain.slots[focus[rng.below(2)]];
            let [a, b] = two(rng, slot.values);
            rng.pick(slot.talk).replace("{a}", a).replace("{b}", b)
        } else {
            rng.pick(domain.talk).to_owned()
        };
        text.push_str(&sentence);
        text.push(' ');
    }
}

fn plan(rng: &mut Rng, domain: &Domain, text: &mut String) {
    text.push_str("Plan:\n");
    for step in 1..=4 + rng.below(5) {
        text.push_str(&format!(
            "{step}. {} the {} {}\n",
            capitalised(rng.pick(domain.verbs)),
            rng.pick(domain.nouns),
            rng.pick(&[
                "and note what changed",
                "before anything else",
                "with the owner",
                "then check the result",
                "once the first step is done"
            ])
        ));
    }
}

fn code(rng: &mut Rng, domain: &Domain, text: &mut String) {
    let noun = rng.pick(domain.nouns);
    let verb = rng.pick(domain.verbs);
    let other = rng.pick(domain.nouns);
    text.push_str(&format!(
        "```rust\npub fn {verb}_{noun}(store: &Store, id: u64) -> Result<{}, Error> {{\n",
        capitalised(noun)
    ));
    for _ in 0..4 + rng.below(12) {
        let step = rng.pick(domain.verbs);
        text.push_str(&match rng.below(4) {
            0 => format!("    let {other} = store.{step}_{other}(id)?;\n"),
            1 => format!(
                "    if {other}.is_empty() {{\n        return Err(Error::{}(id));\n    }}\n",
                capitalised(step)
            ),
            2 => format!("    tracing::debug!({noun} = id, \"{step} {other}\");\n"),
            _ => format!("    {noun}.{step}(&{other}).await?;\n"),
        });
    }
    text.push_str(&format!("    Ok({noun})\n}}\n```"));
}

fn schedule(rng: &mut Rng, domain: &Domain, text: &mut String) {
    text.push_str("| Time | Item | Owner |\n|---|---|---|\n");
    let first = 8 + rng.below(3);
    let count = 4 + rng.below(8);
    for hour in first..first + count {
        text.push_str(&format!(
            "| {hour:02}:{:02} | {} | {} |\n",
            rng.below(4) * 15,
            capitalised(rng.pick(domain.nouns)),
            ["venue", "catering", "us", "the agency"][rng.below(4)]
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locomo::normalize_evidence;

    #[test]
    fn the_same_seed_gives_the_same_data() {
        let first = serde_json::to_string(&generate(3, 2)).unwrap();
        assert_eq!(first, serde_json::to_string(&generate(3, 2)).unwrap());
        assert_ne!(first, serde_json::to_string(&generate(4, 2)).unwrap());
    }

    /// A fold of more conversations keeps the ones a smaller fold had, so
    /// its numbers can be read beside those of the smaller one
    /// (`loadtests/run-eval.sh` asks four a fold).
    #[test]
    fn a_larger_fold_begins_with_the_smaller_ones_conversations() {
        for seed in [1, 2] {
            let four = generate(seed, 4);
            let two = serde_json::to_string(&generate(seed, 2)).unwrap();
            assert_eq!(serde_json::to_string(&four[..2]).unwrap(), two);
            let ids: Vec<&str> = four.iter().map(|sample| sample.sample_id.as_str()).collect();
            assert_eq!(ids, (0..4).map(|i| format!("long-{seed}-{i}")).collect::<Vec<_>>());
            assert_ne!(
                serde_json::to_string(&four[2]).unwrap(),
                serde_json::to_string(&four[0]).unwrap()
            );
        }
    }

    #[test]
    fn conversations_are_long_and_every_kind_is_asked_with_its_evidence() {
        for sample in generate(1, 2).into_iter().chain(generate(2, 4)) {
            let turns: Vec<Turn> = sample.sessions().into_iter().flat_map(|s| s.turns).collect();
            let characters: usize = turns.iter().map(|turn| turn.text.len()).sum();
            assert!((240..=360).contains(&turns.len()), "{} turns", turns.len());
            let mean = characters / turns.len();
            assert!((2_000..=4_000).contains(&mean), "{mean} characters a turn");
            assert!(turns.iter().any(|turn| turn.text.len() > 10_000));
            let known = sample.dia_ids();
            for category in 11..=19 {
                assert!(
                    sample.qa.iter().any(|q| q.category == category),
                    "no category {category}"
                );
            }
            for question in &sample.qa {
                let evidence = normalize_evidence(&question.evidence, &known);
                assert_eq!(evidence.len(), question.evidence.len(), "{question:?}");
                for id in &evidence {
                    let turn = turns.iter().find(|turn| &turn.dia_id == id).unwrap();
                    assert_eq!(turn.speaker, sample.conversation["speaker_a"], "{id}");
                }
                if question.category == Kind::Extraction as u8 || question.category == Kind::Update as u8 {
                    let answer = question.answer.as_str().unwrap();
                    let turn = turns.iter().find(|turn| turn.dia_id == evidence[0]).unwrap();
                    assert!(turn.text.contains(answer), "{answer} not in {}", turn.dia_id);
                }
            }
        }
    }
}
