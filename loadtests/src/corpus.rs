//! Generated corpora for the search benchmark.
//!
//! - [`Corpus::Zipf`] (default): word frequencies follow Zipf's law (s = 1)
//!   over 30,000 words, as in natural text: the 50 most frequent are English
//!   function words (dropped from queries as stopwords), the rest are
//!   pronounceable pseudo-words; messages have 6 to 24 words; queries ask
//!   about three content words drawn from the same distribution.
//! - [`Corpus::Dense`]: every message is the same template over a vocabulary of
//!   about 90 words, so every query term matches 13 % of all messages and
//!   "talk" matches every one: a worst case for full-text ranking.

/// Which corpus to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Corpus {
    Zipf,
    Dense,
}

impl Corpus {
    /// The deterministic content of message `index`.
    pub fn message(self, index: usize) -> String {
        match self {
            Corpus::Zipf => zipf().sentence(index),
            Corpus::Dense => dense_sentence(index),
        }
    }

    /// The deterministic text of query `index`.
    pub fn query(self, index: usize) -> String {
        match self {
            Corpus::Zipf => zipf().query(index),
            Corpus::Dense => format!(
                "When did I talk about {} and {}?",
                WORDS[index % WORDS.len()],
                WORDS[(index / 3) % WORDS.len()]
            ),
        }
    }
}

/// A xorshift generator seeded from an index: the same index, the same text.
struct Rng(u64);

impl Rng {
    fn new(index: usize, salt: u64) -> Self {
        Rng((index as u64 ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A uniform float in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const FUNCTION_WORDS: [&str; 50] = [
    "the", "i", "and", "to", "a", "of", "it", "that", "in", "you", "my", "is", "was", "we", "for", "with", "on", "but",
    "so", "this", "me", "at", "be", "have", "just", "they", "not", "he", "she", "do", "are", "had", "all", "about",
    "from", "would", "when", "what", "there", "as", "if", "by", "or", "some", "out", "can", "been", "her", "his", "an",
];
const VOCABULARY: usize = 30_000;
const SYLLABLES: [&str; 20] = [
    "ka", "lo", "mi", "nu", "ra", "ti", "vo", "zu", "pa", "do", "fi", "gu", "ha", "jo", "bi", "ku", "ma", "no", "ri",
    "tu",
];

struct Zipf {
    /// Cumulative probabilities of ranks 0..VOCABULARY.
    cumulative: Vec<f64>,
}

fn zipf() -> &'static Zipf {
    static ZIPF: std::sync::OnceLock<Zipf> = std::sync::OnceLock::new();
    ZIPF.get_or_init(|| {
        let weights: Vec<f64> = (1..=VOCABULARY).map(|rank| 1.0 / rank as f64).collect();
        let total: f64 = weights.iter().sum();
        let mut sum = 0.0;
        let cumulative = weights
            .iter()
            .map(|weight| {
                sum += weight / total;
                sum
            })
            .collect();
        Zipf { cumulative }
    })
}

impl Zipf {
    fn rank(&self, rng: &mut Rng) -> usize {
        let target = rng.unit();
        self.cumulative
            .partition_point(|&cumulative| cumulative < target)
            .min(VOCABULARY - 1)
    }

    fn word(rank: usize) -> String {
        if rank < FUNCTION_WORDS.len() {
            return FUNCTION_WORDS[rank].to_owned();
        }
        // Distinct pseudo-words: rank in base 20, two to four syllables.
        let mut n = rank - FUNCTION_WORDS.len() + SYLLABLES.len();
        let mut word = String::new();
        while n > 0 {
            word.push_str(SYLLABLES[n % SYLLABLES.len()]);
            n /= SYLLABLES.len();
        }
        word
    }

    fn sentence(&self, index: usize) -> String {
        let mut rng = Rng::new(index, 0);
        let length = 6 + (rng.next() % 19) as usize;
        let mut words: Vec<String> = (0..length).map(|_| Self::word(self.rank(&mut rng))).collect();
        if let Some(first) = words.first_mut() {
            *first = first[..1].to_uppercase() + &first[1..];
        }
        words.join(" ") + "."
    }

    fn query(&self, index: usize) -> String {
        let mut rng = Rng::new(index, 0x5EED);
        let mut content = Vec::new();
        while content.len() < 3 {
            let rank = self.rank(&mut rng);
            if rank >= FUNCTION_WORDS.len() {
                content.push(Self::word(rank));
            }
        }
        format!("what about {} {} and {}?", content[0], content[1], content[2])
    }
}

/// The dense corpus's template sentence for message `index`.
fn dense_sentence(index: usize) -> String {
    let mut rng = Rng::new(index, 0);
    let words: Vec<&str> = (0..12)
        .map(|_| WORDS[(rng.next() % WORDS.len() as u64) as usize])
        .collect();
    format!(
        "Yesterday I talked about {} and {}, then {} {} with {} near the {}; later {} {} {} {} {} {}.",
        words[0],
        words[1],
        words[2],
        words[3],
        words[4],
        words[5],
        words[6],
        words[7],
        words[8],
        words[9],
        words[10],
        words[11]
    )
}

const WORDS: &[&str] = &[
    "coffee",
    "espresso",
    "garden",
    "tomatoes",
    "hiking",
    "ridge",
    "trail",
    "sister",
    "brother",
    "cello",
    "guitar",
    "concert",
    "museum",
    "painting",
    "pottery",
    "kayak",
    "river",
    "lake",
    "mountain",
    "snow",
    "skiing",
    "marathon",
    "training",
    "injury",
    "doctor",
    "nurse",
    "hospital",
    "school",
    "teacher",
    "exam",
    "degree",
    "library",
    "novel",
    "poetry",
    "festival",
    "jazz",
    "dinner",
    "recipe",
    "pasta",
    "curry",
    "bakery",
    "bread",
    "dog",
    "puppy",
    "cat",
    "adoption",
    "shelter",
    "volunteer",
    "charity",
    "fundraiser",
    "startup",
    "job",
    "interview",
    "promotion",
    "boss",
    "deadline",
    "vacation",
    "flight",
    "Lisbon",
    "Tokyo",
    "Denver",
    "Nairobi",
    "beach",
    "camping",
    "tent",
    "stars",
    "birthday",
    "wedding",
    "anniversary",
    "gift",
    "movie",
    "series",
    "podcast",
    "chess",
    "tournament",
    "puzzle",
    "photography",
    "camera",
    "sunset",
    "bicycle",
    "commute",
    "apartment",
    "moving",
    "neighbors",
    "plants",
    "yoga",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpora_are_deterministic_and_zipf_is_skewed() {
        assert_eq!(Corpus::Zipf.message(7), Corpus::Zipf.message(7));
        assert_ne!(Corpus::Zipf.message(7), Corpus::Zipf.message(8));
        assert_eq!(Corpus::Dense.query(3), Corpus::Dense.query(3));
        let words: Vec<String> = (0..2000)
            .flat_map(|i| {
                Corpus::Zipf
                    .message(i)
                    .to_lowercase()
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        let the = words.iter().filter(|w| *w == "the").count() as f64 / words.len() as f64;
        assert!(
            (0.05..0.15).contains(&the),
            "the most frequent word is ~9 % of words: {the}"
        );
        let distinct: std::collections::HashSet<_> = words.iter().collect();
        assert!(distinct.len() > 3000, "a long tail: {}", distinct.len());
        let query = Corpus::Zipf.query(1);
        assert!(query.starts_with("what about "), "{query}");
    }
}
