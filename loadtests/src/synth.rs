//! A seeded generator of synthetic conversations in the LoCoMo format, with
//! planted facts, later updates of some of them, dated events, facts that
//! only combine across sessions, several speakers, and unanswerable
//! questions. The same seed always gives the same data.

use serde_json::{Map, Value, json};

use crate::locomo::{Question, Sample, Turn};

/// splitmix64: small, seedable, good enough to vary text.
#[derive(Debug)]
pub struct Rng(u64);

impl Rng {
    /// Returns a generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Returns a number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Returns one of `items`.
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const NAMES: &[&str] = &[
    "Avery", "Jonah", "Priya", "Mateo", "Lena", "Omar", "Sofia", "Kenji", "Ruth", "Dmitri", "Amara", "Felix",
];
const PET_NAMES: &[&str] = &[
    "Biscuit",
    "Pepper",
    "Juniper",
    "Mochi",
    "Rufus",
    "Clementine",
    "Ziggy",
    "Olive",
];
const CITIES: &[&str] = &[
    "Lisbon", "Denver", "Osaka", "Nairobi", "Montreal", "Porto", "Tucson", "Tallinn", "Cork", "Valencia",
];
const JOBS: &[&str] = &[
    "nurse",
    "carpenter",
    "data analyst",
    "pastry chef",
    "librarian",
    "bus driver",
    "architect",
];
const HOBBIES: &[&str] = &[
    "pottery",
    "rock climbing",
    "birdwatching",
    "salsa dancing",
    "chess",
    "beekeeping",
    "kayaking",
];
const INSTRUMENTS: &[&str] = &["cello", "banjo", "trumpet", "harp", "ukulele", "drums"];
const EVENTS: &[&str] = &[
    "jazz festival",
    "farmers market",
    "science museum",
    "charity run",
    "book fair",
    "comedy show",
];
const GOALS: &[&str] = &[
    "a marathon",
    "a pilot license",
    "a cooking contest",
    "a chess tournament",
    "a triathlon",
];
const FILLER: &[&str] = &[
    "How has your week been going?",
    "Pretty busy, but nothing too exciting honestly.",
    "The weather has been all over the place lately.",
    "I finally caught up on sleep this weekend.",
    "Did you see that new series everyone keeps talking about?",
    "Not yet, I keep meaning to start it.",
    "Work has been hectic with all the deadlines.",
    "I tried a new recipe last night and it turned out fine.",
    "We should grab coffee sometime soon.",
    "That sounds great, let me know when you are free.",
    "I have been trying to read more before bed.",
    "Traffic this morning was unbelievable.",
];

struct Planted {
    session: usize,
    turn: usize,
}

/// Returns `conversations` synthetic samples generated from `seed`.
pub fn generate(seed: u64, conversations: usize) -> Vec<Sample> {
    let mut rng = Rng::new(seed);
    (0..conversations).map(|index| conversation(&mut rng, index)).collect()
}

fn conversation(rng: &mut Rng, index: usize) -> Sample {
    let speaker_count = 2 + rng.below(2);
    let mut speakers: Vec<&str> = Vec::new();
    while speakers.len() < speaker_count {
        let name = rng.pick(NAMES);
        if !speakers.contains(&name) {
            speakers.push(name);
        }
    }
    let session_count = 6 + rng.below(5);
    let mut sessions: Vec<Vec<Turn>> = Vec::new();
    let mut days = Vec::new();
    let mut day = 1 + rng.below(20);
    for session in 0..session_count {
        day += 3 + rng.below(18);
        days.push(day);
        let turns = 10 + rng.below(8);
        sessions.push(
            (0..turns)
                .map(|turn| Turn {
                    speaker: speakers[turn % speaker_count].to_owned(),
                    dia_id: format!("D{}:{}", session + 1, turn + 1),
                    text: rng.pick(FILLER).to_owned(),
                    blip_caption: None,
                })
                .collect(),
        );
    }
    let mut questions = Vec::new();
    let mut used = std::collections::HashSet::new();
    let mut plant =
        |rng: &mut Rng, sessions: &mut Vec<Vec<Turn>>, session: usize, speaker: usize, text: String| -> Planted {
            let turns = &mut sessions[session];
            let free: Vec<usize> = (0..turns.len())
                .filter(|&t| t % speaker_count == speaker && !used.contains(&(session, t)))
                .collect();
            let turn = if free.is_empty() {
                // Every turn of this speaker already carries a fact: give them one more.
                turns.push(Turn {
                    speaker: speakers[speaker].to_owned(),
                    dia_id: format!("D{}:{}", session + 1, turns.len() + 1),
                    text: String::new(),
                    blip_caption: None,
                });
                turns.len() - 1
            } else {
                free[rng.below(free.len())]
            };
            used.insert((session, turn));
            turns[turn].text = text;
            Planted { session, turn }
        };
    let dia = |planted: &Planted| format!("D{}:{}", planted.session + 1, planted.turn + 1);
    let names = speakers.clone();
    for (speaker_index, speaker) in names.into_iter().enumerate() {
        let session_of = |rng: &mut Rng| rng.below(session_count);

        let pet = rng.pick(PET_NAMES);
        let s = session_of(rng);
        let fact = plant(
            rng,
            &mut sessions,
            s,
            speaker_index,
            format!("My dog {pet} finally learned to fetch the newspaper."),
        );
        questions.push(Question {
            question: format!("What is the name of {speaker}'s dog?"),
            answer: json!(pet),
            evidence: vec![dia(&fact)],
            category: 4,
        });

        let job = rng.pick(JOBS);
        let s = session_of(rng);
        let fact = plant(
            rng,
            &mut sessions,
            s,
            speaker_index,
            format!("I started a new job as a {job} this month."),
        );
        questions.push(Question {
            question: format!("What does {speaker} do for work?"),
            answer: json!(job),
            evidence: vec![dia(&fact)],
            category: 4,
        });

        // A fact and its later update: the question asks for the current value.
        let first_city = rng.pick(CITIES);
        let second_city = loop {
            let city = rng.pick(CITIES);
            if city != first_city {
                break city;
            }
        };
        let early = rng.below(session_count / 2);
        let late = session_count / 2 + rng.below(session_count - session_count / 2);
        plant(
            rng,
            &mut sessions,
            early,
            speaker_index,
            format!("I have lived in {first_city} for about six years now."),
        );
        let update = plant(
            rng,
            &mut sessions,
            late,
            speaker_index,
            format!("Big news: we moved from {first_city} to {second_city} last week."),
        );
        questions.push(Question {
            question: format!("Which city does {speaker} live in now?"),
            answer: json!(second_city),
            evidence: vec![dia(&update)],
            category: 4,
        });

        // A dated event.
        let event = rng.pick(EVENTS);
        let s = session_of(rng);
        let fact = plant(
            rng,
            &mut sessions,
            s,
            speaker_index,
            format!("Yesterday I went to the {event} downtown with friends."),
        );
        questions.push(Question {
            question: format!("When did {speaker} go to the {event}?"),
            answer: json!(format!("the day before day {} of the conversation", days[fact.session])),
            evidence: vec![dia(&fact)],
            category: 2,
        });

        // Two facts that only answer together (multi-hop).
        let sibling = rng.pick(NAMES);
        let goal = rng.pick(GOALS);
        let a = plant(
            rng,
            &mut sessions,
            early,
            speaker_index,
            format!("My sister {sibling} is visiting next month."),
        );
        let b = plant(
            rng,
            &mut sessions,
            late.saturating_sub(1).max(early + 1).min(session_count - 1),
            speaker_index,
            format!("{sibling} has been training hard for {goal}."),
        );
        questions.push(Question {
            question: format!("What is {speaker}'s sister training for?"),
            answer: json!(goal),
            evidence: vec![dia(&a), dia(&b)],
            category: 1,
        });

        // Open-domain: a hobby and an instrument to reason from.
        let hobby = rng.pick(HOBBIES);
        let instrument = rng.pick(INSTRUMENTS);
        let s = session_of(rng);
        let fact = plant(
            rng,
            &mut sessions,
            s,
            speaker_index,
            format!("On weekends I mostly do {hobby}, and I practice the {instrument} at night."),
        );
        questions.push(Question {
            question: format!("What might {speaker} enjoy doing on a free Saturday?"),
            answer: json!(hobby),
            evidence: vec![dia(&fact)],
            category: 3,
        });

        // Never said: an unanswerable question.
        questions.push(Question {
            question: format!("What is the name of {speaker}'s cat?"),
            answer: Value::Null,
            evidence: vec![],
            category: 5,
        });
    }

    let mut map = Map::new();
    for (index, speaker) in speakers.iter().enumerate() {
        map.insert(format!("speaker_{}", ["a", "b", "c"][index]), json!(speaker));
    }
    for (index, turns) in sessions.into_iter().enumerate() {
        map.insert(
            format!("session_{}_date_time", index + 1),
            json!(session_date(days[index])),
        );
        map.insert(
            format!("session_{}", index + 1),
            serde_json::to_value(turns).unwrap_or_default(),
        );
    }
    Sample {
        sample_id: format!("synth-{index}"),
        conversation: map,
        qa: questions,
    }
}

/// The date text of a session on day `day` of a 2024 conversation, in
/// LoCoMo's "1:56 pm on 8 May, 2024" form.
pub fn session_date(day: usize) -> String {
    let (hour, minute) = (8 + (day % 12), (day * 7) % 60);
    let meridiem = if hour >= 12 { "pm" } else { "am" };
    let hour12 = if hour > 12 { hour - 12 } else { hour };
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let month = MONTHS[(day / 28) % 12];
    let day_of_month = day % 28 + 1;
    format!("{hour12}:{minute:02} {meridiem} on {day_of_month} {month}, 2024")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locomo::normalize_evidence;

    #[test]
    fn the_same_seed_gives_the_same_data() {
        let first = serde_json::to_string(&generate(7, 2)).unwrap();
        assert_eq!(first, serde_json::to_string(&generate(7, 2)).unwrap());
        assert_ne!(first, serde_json::to_string(&generate(8, 2)).unwrap());
    }

    #[test]
    fn evidence_points_at_turns_that_say_the_answer() {
        for sample in generate(42, 3) {
            let known = sample.dia_ids();
            let turns: Vec<Turn> = sample
                .sessions()
                .into_iter()
                .flat_map(|session| session.turns)
                .collect();
            assert!(
                sample
                    .sessions()
                    .iter()
                    .all(|session| crate::locomo::parse_date_time(&session.date_time).is_some())
            );
            for question in &sample.qa {
                let evidence = normalize_evidence(&question.evidence, &known);
                assert_eq!(evidence.len(), question.evidence.len(), "{question:?}");
                if let Some(answer) = question
                    .answer
                    .as_str()
                    .filter(|_| matches!(question.category, 1 | 3 | 4))
                {
                    let said = evidence.iter().any(|id| {
                        turns
                            .iter()
                            .any(|turn| &turn.dia_id == id && turn.text.contains(answer))
                    });
                    assert!(said, "{} not said in {evidence:?}", question.question);
                }
            }
            assert!(sample.qa.iter().any(|q| q.category == 5 && q.evidence.is_empty()));
        }
    }
}
