//! The calendar days a query names ("What painting did Melanie show to
//! Caroline on October 13, 2023?"): search prefers the messages written on
//! one of them ([`crate::messages`]). The turn that answers rarely says
//! its own date; it was written on it. On the LoCoMo development
//! conversation that asks two such questions, both were missed at 10 and
//! both are found now (recall@10 0.789 → 0.802); no question that names
//! no day ranks differently on any of the four development folds
//! (docs/benchmarks.md, "A day the query names").

use std::ops::Range;

/// English month names; a three-letter abbreviation (and "sept") names the month too.
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

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// At most this many days or ranges of a query are preferred; a query
/// that names more asks about no day in particular.
const MOST_NAMED: usize = 16;

/// Returns the times (microseconds since the epoch, as `created_at`) of
/// each calendar day or range of days, in UTC, that `query` names with its
/// year: "October 13, 2023", "13 Oct 2023", "1 February, 2023", "the 13th
/// of October 2023", "October 13-15, 2023", "13-15 October 2023",
/// "2023-10-13", "2023/10/13", "2023-10-13T15:00:00Z". A month and day
/// without a year, numeric dates other than year first (10/13/2023 reads
/// differently by country), and words split by other punctuation ("the
/// 3rd. October 2023") name no day; a number right before a month and
/// year reads as its day ("my top 3 October 2023 purchases"). Each day or
/// range once, in query order, at most [`MOST_NAMED`].
///
/// Messages carry UTC times and no zone, so the day is UTC's: a user far
/// from UTC finds the hours of their day that fall on the next or the
/// previous UTC day ranked as any other day's. Widening every day by the
/// 26 hours clocks span would prefer parts of three days as much as the
/// one named.
pub fn named_days(query: &str) -> Vec<Range<i64>> {
    let words = words(query);
    let mut named: Vec<Range<i64>> = Vec::new();
    for at in 0..words.len() {
        let Some(days) = iso_date(&words, at).or_else(|| spelled_date(&words, at)) else {
            continue;
        };
        let window = days.start * MICROS_PER_DAY..days.end * MICROS_PER_DAY;
        if !named.contains(&window) {
            named.push(window);
            if named.len() == MOST_NAMED {
                break;
            }
        }
    }
    named
}

/// What lies between a word and the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gap {
    /// White space alone (or nothing: the query's first word).
    Space,
    /// A comma, with any white space.
    Comma,
    /// A dash (`-`, `–`, `—`), with any white space.
    Dash,
    /// A full stop and white space: after an abbreviation ("Oct. 13").
    Stop,
    /// Exactly one `-`, `/` or other sign, without white space.
    Joined(char),
    Other,
}

/// A run of letters and digits of the query, lower-cased, and its gap.
#[derive(Debug)]
struct Word {
    text: String,
    gap: Gap,
}

fn words(query: &str) -> Vec<Word> {
    let mut words: Vec<Word> = Vec::new();
    let mut gap = String::new();
    let mut text = String::new();
    for c in query.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() {
            text.extend(c.to_lowercase());
            continue;
        }
        if !text.is_empty() {
            words.push(Word {
                text: std::mem::take(&mut text),
                gap: gap_of(&gap),
            });
            gap.clear();
        }
        gap.push(c);
    }
    words
}

fn gap_of(between: &str) -> Gap {
    let mut chars = between.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return match c {
            ',' => Gap::Comma,
            '–' | '—' => Gap::Dash,
            c if c.is_whitespace() => Gap::Space,
            c => Gap::Joined(c),
        };
    }
    match between.trim() {
        "" => Gap::Space,
        "," => Gap::Comma,
        "-" | "–" | "—" | "--" => Gap::Dash,
        "." if between.starts_with('.') => Gap::Stop,
        _ => Gap::Other,
    }
}

/// Whether `gap` parts a day from its month: white space.
fn spaced(gap: Gap) -> bool {
    gap == Gap::Space
}

/// Whether `gap` parts a date from its year: white space or a comma.
fn before_year(gap: Gap) -> bool {
    matches!(gap, Gap::Space | Gap::Comma)
}

/// Whether `gap` joins the two days of a range: a dash, spaced or not.
fn dash(gap: Gap) -> bool {
    matches!(gap, Gap::Dash | Gap::Joined('-'))
}

/// `2023-10-13` or `2023/10/13` starting at word `at` (its day may run on
/// into a time, `13T15:00`), as days since the epoch, a day long.
fn iso_date(words: &[Word], at: usize) -> Option<Range<i64>> {
    let [year, month, day] = words.get(at..at + 3)? else {
        return None;
    };
    let Gap::Joined(sign @ ('-' | '/')) = month.gap else {
        return None;
    };
    // Not a part of a longer code: `555-2023-10-13`, `2023-10-13-rc1`.
    let runs_on = year.gap == Gap::Joined(sign) || words.get(at + 3).is_some_and(|next| next.gap == Gap::Joined(sign));
    if day.gap != Gap::Joined(sign) || runs_on {
        return None;
    }
    let day_text = match day.text.split_once('t') {
        Some((day, time)) if time.starts_with(|c: char| c.is_ascii_digit()) => day,
        _ => day.text.as_str(),
    };
    let two_digits = |text: &str| (1..=2).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit());
    if !two_digits(&month.text) || !two_digits(day_text) {
        return None;
    }
    let day = civil_day(
        year_number(&year.text)?,
        month.text.parse().ok()?,
        day_text.parse().ok()?,
    )?;
    Some(day..day + 1)
}

/// A date spelled around the month name at `at`: the day (or days,
/// "13-15") after it ("October 13th") or before it ("13 October", "13th
/// of October"), then the year; as days since the epoch.
fn spelled_date(words: &[Word], at: usize) -> Option<Range<i64>> {
    let month = month_of(&words[at].text)?;
    // "Oct. 13, 2023", "13 Oct. 2023": an abbreviated month may end in a full stop.
    let abbreviated = words[at].text.len() <= 4;
    let after_month = |gap: Gap| gap == Gap::Space || (abbreviated && gap == Gap::Stop);
    let day_at = |index: usize| words.get(index).and_then(|word| day_number(&word.text));
    let range = |first: u32, last: u32, year: &Word| -> Option<Range<i64>> {
        let year = year_number(&year.text)?;
        let (first, last) = (civil_day(year, month, first)?, civil_day(year, month, last)?);
        (first <= last).then_some(first..last + 1)
    };
    // Month first: "October 13, 2023", "October 13-15, 2023".
    if let Some(first) = day_at(at + 1).filter(|_| after_month(words[at + 1].gap)) {
        let last = day_at(at + 2).filter(|_| dash(words[at + 2].gap));
        let year_at = if last.is_some() { at + 3 } else { at + 2 };
        if let Some(year) = words.get(year_at).filter(|year| before_year(year.gap)) {
            return range(first, last.unwrap_or(first), year);
        }
    }
    // Day first: "13 October 2023", "the 13th of October, 2023", "13-15 October 2023".
    let year = words
        .get(at + 1)
        .filter(|year| before_year(year.gap) || after_month(year.gap))?;
    let mut day_index = at.checked_sub(1)?;
    if !spaced(words[at].gap) {
        return None;
    }
    if words[day_index].text == "of" {
        day_index = day_index.checked_sub(1).filter(|_| spaced(words[day_index].gap))?;
    }
    let last = day_at(day_index)?;
    let first = day_index
        .checked_sub(1)
        .filter(|_| dash(words[day_index].gap))
        .and_then(day_at)
        .unwrap_or(last);
    range(first, last, year)
}

fn month_of(word: &str) -> Option<u32> {
    let position = MONTHS.iter().position(|month| {
        *month == word || (word.len() == 3 && month.starts_with(word)) || (word == "sept" && *month == "september")
    })?;
    Some(position as u32 + 1)
}

/// "13", "13th", "1st", "22nd", "3rd".
fn day_number(word: &str) -> Option<u32> {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    if !matches!(suffix, "" | "st" | "nd" | "rd" | "th") || !(1..=2).contains(&digits.len()) {
        return None;
    }
    digits.parse().ok()
}

/// A year of four digits, from 0001.
fn year_number(word: &str) -> Option<i64> {
    (word.len() == 4 && word.bytes().all(|byte| byte.is_ascii_digit()))
        .then(|| word.parse().ok())
        .flatten()
        .filter(|&year| year > 0)
}

/// Days since 1970-01-01 of a valid date of the proleptic Gregorian
/// calendar (Howard Hinnant's `days_from_civil`).
fn civil_day(year: i64, month: u32, day: u32) -> Option<i64> {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let length = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    if day == 0 || day > length {
        return None;
    }
    let (month, day) = (i64::from(month), i64::from(day));
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    Some(era * 146_097 + day_of_era - 719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The days since the epoch each named day starts at.
    fn midnights(query: &str) -> Vec<i64> {
        named_days(query)
            .into_iter()
            .map(|window| {
                assert_eq!(window.end - window.start, MICROS_PER_DAY, "{query}");
                window.start / MICROS_PER_DAY
            })
            .collect()
    }

    #[test]
    fn civil_days_count_from_the_epoch() {
        assert_eq!(civil_day(1970, 1, 1), Some(0));
        assert_eq!(civil_day(2000, 3, 1), Some(11_017));
        assert_eq!(civil_day(2023, 10, 13), Some(19_643));
        assert_eq!(civil_day(1969, 12, 31), Some(-1));
        assert_eq!(civil_day(2024, 2, 29), Some(19_782));
        for (year, month, day) in [(2023, 2, 29), (1900, 2, 29), (2023, 4, 31), (2023, 13, 1), (2023, 1, 0)] {
            assert_eq!(civil_day(year, month, day), None, "{year}-{month}-{day}");
        }
        // Every day of four centuries follows the one before it.
        let mut previous = civil_day(1899, 12, 31).unwrap();
        for year in 1900..2300 {
            for month in 1..=12 {
                for day in 1..=31 {
                    if let Some(next) = civil_day(year, month, day) {
                        assert_eq!(next, previous + 1, "{year}-{month}-{day}");
                        previous = next;
                    }
                }
            }
        }
    }

    #[test]
    fn a_day_is_named_in_the_ways_people_write_it() {
        let day = civil_day(2023, 10, 13).unwrap();
        for query in [
            "What painting did Melanie show on October 13, 2023?",
            "what did we say on october 13 2023",
            "What happened on 13 October 2023?",
            "on 13 Oct, 2023",
            "Oct 13th 2023 plans",
            "the 13th of October, 2023",
            "notes from 2023-10-13",
            "notes from 2023/10/13.",
            "(October 13, 2023)",
            "October 13,2023",
            "created 2023-10-13T15:00:00Z",
            "What happened at 2023-10-13t10:00?",
            "2023-10-13 10:00",
            "Oct. 13, 2023",
            "13 Oct. 2023",
            "Friday, October 13th, 2023",
        ] {
            assert_eq!(midnights(query), vec![day], "{query}");
        }
        assert_eq!(
            midnights("What did Gina find on 1 February, 2023?"),
            vec![civil_day(2023, 2, 1).unwrap()]
        );
        assert_eq!(midnights("since Sept 3rd, 2024"), vec![civil_day(2024, 9, 3).unwrap()]);
    }

    #[test]
    fn no_day_is_named_without_a_whole_date() {
        for query in [
            "What did Caroline paint in October 2023?",
            "What did we decide on October 13?",
            "I may 2023 be wrong",
            "We may go on 10/13/2023",
            "13-October",
            "October 32, 2023",
            "February 29, 2023",
            "2023-13-01",
            "build 2023-10-13-rc1",
            "may I ask about the 5 march proposals from 20234",
            // Other punctuation between the day and its month or year.
            "Meeting 12, October 2023 recap",
            "I was born on the 3rd. October 2023 was great",
            "October 13; 2023",
            "October. 13, 2023",
            "Oct.13, 2023",
            "13/October/2023",
            // Codes and numbers that hold a date's digits.
            "call 555-2023-10-13",
            "x2023-10-13",
            "13.10.2023",
            "2023-10-13T",
            "0000-01-01 and Oct 13 0000",
            "2023-Oct-13",
            "２０２３-10-13",
            "",
        ] {
            assert_eq!(named_days(query), Vec::<Range<i64>>::new(), "{query}");
        }
    }

    #[test]
    fn a_range_is_named_whole_and_a_backward_one_not_at_all() {
        let (first, last) = (civil_day(2023, 10, 13).unwrap(), civil_day(2023, 10, 15).unwrap());
        let window = first * MICROS_PER_DAY..(last + 1) * MICROS_PER_DAY;
        for query in [
            "October 13-15, 2023",
            "October 13 - 15, 2023",
            "Oct 13th–15th 2023",
            "13-15 October 2023",
            "the 13th—15th of October, 2023",
        ] {
            assert_eq!(named_days(query), vec![window.clone()], "{query}");
        }
        // Backwards, or past the month's end: no range.
        for query in ["October 15-13, 2023", "February 1-31, 2023"] {
            assert_eq!(named_days(query), Vec::<Range<i64>>::new(), "{query}");
        }
        // Two ISO dates side by side are two days.
        for query in [
            "2023-10-13/2023-10-14",
            "2023-10-13--2023-10-14",
            "2023-10-13 to 2023-10-14",
        ] {
            assert_eq!(midnights(query), vec![first, first + 1], "{query}");
        }
    }

    #[test]
    fn a_query_names_at_most_so_many_days() {
        let many: String = (1..=28).map(|day| format!("2023-02-{day:02} ")).collect();
        assert_eq!(named_days(&many).len(), MOST_NAMED);
        let long = "October 13, 2023 ".repeat(2_000);
        assert_eq!(named_days(&long).len(), 1);
    }

    #[test]
    fn each_day_is_named_once_in_query_order() {
        let (first, second) = (civil_day(2023, 5, 8).unwrap(), civil_day(2023, 5, 25).unwrap());
        assert_eq!(
            midnights("Between May 25, 2023 and 8 May 2023, or 2023-05-25?"),
            vec![second, first]
        );
    }

    #[test]
    fn a_named_day_is_its_utc_day() {
        let [window] = named_days("on 2023-10-13").try_into().unwrap();
        let midnight = civil_day(2023, 10, 13).unwrap() * MICROS_PER_DAY;
        assert_eq!(window, midnight..midnight + MICROS_PER_DAY);
        assert_eq!(midnight, 1_697_155_200_000_000, "2023-10-13T00:00:00Z");
    }
}
