//! One namespace's vectors in memory: exact f32s, int8 codes and signs,
//! scanned in stages (signs, codes, exact rescoring); a long text's
//! passages are entries of their own, ranked as one record.

use std::collections::HashMap;

use roncho_core::vector::{VectorFilter, VectorHit, VectorRecord};

use crate::names::Names;

/// One namespace's vectors, contiguous for scanning.
///
/// Each vector is kept twice: as f32 (exact) and as int8 codes with a
/// per-vector scale (a quarter of the bytes). A query scans the codes — the
/// scan is bound by memory traffic — keeps the [`OVERSAMPLE`]-fold best
/// candidates, and ranks those by their exact f32 distance, as Qdrant does
/// with scalar quantization and rescoring.
#[derive(Debug, Default)]
pub(super) struct Namespace {
    dimensions: usize,
    pub(super) ids: Vec<String>,
    /// By position: the interned session, peer and level.
    fields: Vec<[u32; 3]>,
    names: Names,
    data: Vec<f32>,
    codes: Vec<i8>,
    scales: Vec<f32>,
    /// The signs of each vector, 64 to a word ([`sign_words`] per vector).
    signs: Vec<u64>,
    index: HashMap<String, usize>,
    /// How many passages after the first each record of a long text has;
    /// passage `n` is kept under [`passage_key`]`(id, n)`.
    passages: HashMap<String, u32>,
}

/// The key under which passage `n` (1 and up) of record `id` is kept in a
/// [`Namespace`]; ids are generated, and never hold the separator.
fn passage_key(id: &str, n: u32) -> String {
    format!("{id}\u{1f}{n}")
}

/// The record and passage a [`Namespace`] key names.
fn record_of(key: &str) -> (&str, u32) {
    match key.rsplit_once('\u{1f}') {
        Some((id, n)) => (id, n.parse().unwrap_or(0)),
        None => (key, 0),
    }
}

/// Defines method `$name`, which runs method `$portable` compiled with the
/// CPU feature `$feature` (as method `$fast`) where the CPU has it, and as
/// built elsewhere.
macro_rules! with_cpu_feature {
    (
        $(#[$doc:meta])*
        fn $name:ident, $fast:ident($feature:tt) => $portable:ident($($arg:ident: $type:ty),* $(,)?) -> $out:ty
    ) => {
        $(#[$doc])*
        #[allow(unsafe_code)]
        fn $name(&self, $($arg: $type),*) -> $out {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!($feature) {
                // SAFETY: the function enables this feature alone, and the CPU has it.
                return unsafe { self.$fast($($arg),*) };
            }
            self.$portable($($arg),*)
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        fn $fast(&self, $($arg: $type),*) -> $out {
            self.$portable($($arg),*)
        }
    };
}

/// Rows ahead of the one scored whose codes are prefetched ([`Namespace::prefetching`]).
const PREFETCH_AHEAD: usize = 4;

/// Candidates per wanted hit that the int8 scan passes to exact rescoring.
const OVERSAMPLE: usize = 4;
/// The fewest candidates rescored, however small `top_k`.
const MIN_CANDIDATES: usize = 64;

/// Quantizes `vector` to int8 codes (written to `codes`) and returns the scale
/// that maps a code back: `value ≈ code * scale`.
fn quantize(vector: &[f32], codes: &mut [i8]) -> f32 {
    let max = vector.iter().fold(0.0_f32, |max, value| max.max(value.abs()));
    if max == 0.0 {
        codes.fill(0);
        return 0.0;
    }
    let scale = max / 127.0;
    for (code, value) in codes.iter_mut().zip(vector) {
        *code = (value / scale).round().clamp(-127.0, 127.0) as i8;
    }
    scale
}

/// Namespaces of this many vectors are first narrowed by their signs: a
/// Hamming distance over 48 bytes per 384-dimension vector instead of an
/// int8 dot product over 384 (ADR 0008).
const SIGN_SCAN_ROWS: usize = 100_000;
/// The share of a namespace the sign scan passes to the int8 stage (one in
/// this many rows), within [`MIN_SIGN_SHORTLIST`] and [`MAX_SIGN_SHORTLIST`].
const SIGN_SHORTLIST_SHARE: usize = 500;
const MIN_SIGN_SHORTLIST: usize = 2_000;
const MAX_SIGN_SHORTLIST: usize = 20_000;

/// Words of sign bits per vector.
fn sign_words(dimensions: usize) -> usize {
    dimensions.div_ceil(64)
}

/// Writes the signs of `vector` (bit set: positive) to `words`.
fn signs(vector: &[f32], words: &mut [u64]) {
    words.fill(0);
    for (at, value) in vector.iter().enumerate() {
        if *value > 0.0 {
            words[at / 64] |= 1 << (at % 64);
        }
    }
}

/// The number of dimensions whose signs differ.
#[inline(always)]
fn hamming(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// Rows whose distances [`count_distances`] counts in separate tallies,
/// so that rows at one distance in a row do not wait on each other's count.
const TALLIES: usize = 4;

/// Writes the sign distance of each row of `range` to `distances` (a row
/// that fails `passes`: one more than any) and counts the rows at each
/// distance in `at_distance`, each of [`TALLIES`] rows in a row in its own
/// tally. `WORDS` is the words per row, or 0 for `query.len()` read at run
/// time.
#[inline(always)]
fn count_distances<const WORDS: usize>(
    signs: &[u64],
    query: &[u64],
    range: std::ops::Range<usize>,
    passes: &impl Fn(&usize) -> bool,
    distances: &mut [u16],
    at_distance: &mut [[u32; TALLIES]],
) {
    let words = query.len();
    let beyond = words * 64 + 1;
    let distance = |position: usize, row: &[u64]| {
        if !passes(&position) {
            beyond
        } else if WORDS == 0 {
            hamming(row, query) as usize
        } else {
            let (row, query): (&[u64; WORDS], &[u64; WORDS]) = (row.try_into().unwrap(), query.try_into().unwrap());
            hamming(row, query) as usize
        }
    };
    let blocks = signs
        .chunks_exact(words * TALLIES)
        .zip(distances.chunks_exact_mut(TALLIES));
    for (block, (rows, written)) in blocks.enumerate() {
        let first = range.start + block * TALLIES;
        for tally in 0..TALLIES {
            let distance = distance(first + tally, &rows[tally * words..(tally + 1) * words]);
            written[tally] = distance as u16;
            at_distance[distance][tally] += 1;
        }
    }
    let done = range.len() / TALLIES * TALLIES;
    for at in done..range.len() {
        let distance = distance(range.start + at, &signs[at * words..(at + 1) * words]);
        distances[at] = distance as u16;
        at_distance[distance][0] += 1;
    }
}

/// [`count_distances`] on AVX-512 with its population count of eight words
/// an instruction (`vpopcntq`), where the CPU has both: per row, its words
/// in one masked load (two for rows of 9–16 words), exclusive-or and count;
/// eight rows' counts summed into one register of their distances. The
/// scalar loop spent most of a million-row scan counting, one word at a
/// time (docs/benchmarks.md).
#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::*;

    use super::TALLIES;

    /// Whether this CPU runs [`count_distances`].
    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512vpopcntdq")
    }

    /// As [`super::count_distances`], for rows of `WORDS` (1–16) words.
    ///
    /// # Safety
    /// The CPU must have AVX-512F and VPOPCNTDQ ([`available`]).
    #[target_feature(enable = "avx512f,avx512vpopcntdq")]
    #[allow(unsafe_code)]
    pub(super) unsafe fn count_distances<const WORDS: usize>(
        signs: &[u64],
        query: &[u64],
        range: std::ops::Range<usize>,
        passes: &impl Fn(&usize) -> bool,
        distances: &mut [u16],
        at_distance: &mut [[u32; TALLIES]],
    ) {
        const { assert!(WORDS >= 1 && WORDS <= 16) };
        assert!(query.len() == WORDS && signs.len() == range.len() * WORDS && distances.len() == range.len());
        let beyond = WORDS * 64 + 1;
        let lanes = |chunk: usize| WORDS.saturating_sub(chunk * 8).min(8);
        let masks: [__mmask8; 2] = std::array::from_fn(|chunk| ((1_u16 << lanes(chunk)) - 1) as __mmask8);
        let chunks = WORDS.div_ceil(8);
        let mut query_words = [_mm512_setzero_si512(); 2];
        for (chunk, words) in query_words.iter_mut().enumerate().take(chunks) {
            // SAFETY: the load reads only the lanes its mask sets, all within `query`.
            *words = unsafe { _mm512_maskz_loadu_epi64(masks[chunk], query.as_ptr().add(chunk * 8).cast()) };
        }
        let rows = range.len();
        let blocks = rows / 8;
        for block in 0..blocks {
            let mut counts = [_mm512_setzero_si512(); 8];
            // A row that fails the filter is not read (a narrow filter passes few).
            let passing: [bool; 8] = std::array::from_fn(|row| passes(&(range.start + block * 8 + row)));
            for (row, count) in counts.iter_mut().enumerate() {
                if !passing[row] {
                    continue;
                }
                let words = signs[(block * 8 + row) * WORDS..][..WORDS].as_ptr();
                for chunk in 0..chunks {
                    // SAFETY: the mask's lanes lie within the row's `WORDS` words, checked by the slice.
                    let row = unsafe { _mm512_maskz_loadu_epi64(masks[chunk], words.add(chunk * 8).cast()) };
                    *count = _mm512_add_epi64(*count, _mm512_popcnt_epi64(_mm512_xor_si512(row, query_words[chunk])));
                }
            }
            let written = &mut distances[block * 8..][..8];
            // SAFETY: 8 `u16` written within `written`, checked by the slice.
            unsafe { _mm_storeu_si128(written.as_mut_ptr().cast(), _mm512_cvtepi64_epi16(sum_lanes(counts))) };
            for (row, distance) in written.iter_mut().enumerate() {
                if !passing[row] {
                    *distance = beyond as u16;
                }
                at_distance[usize::from(*distance)][row % TALLIES] += 1;
            }
        }
        for at in blocks * 8..rows {
            let distance = if passes(&(range.start + at)) {
                super::hamming(&signs[at * WORDS..][..WORDS], query) as usize
            } else {
                beyond
            };
            distances[at] = distance as u16;
            at_distance[distance][0] += 1;
        }
    }

    /// The sum of each of eight registers' lanes, as the lanes of one:
    /// pairs of lanes added, then pairs of 128-bit quarters, twice.
    #[target_feature(enable = "avx512f")]
    fn sum_lanes(counts: [__m512i; 8]) -> __m512i {
        let [c0, c1, c2, c3, c4, c5, c6, c7] = counts;
        let (t0, t1, t2, t3) = (pairs(c0, c1), pairs(c2, c3), pairs(c4, c5), pairs(c6, c7));
        quarters(quarters(t0, t1), quarters(t2, t3))
    }

    /// In each 128-bit quarter: `a`'s two lanes added, then `b`'s.
    #[target_feature(enable = "avx512f")]
    fn pairs(a: __m512i, b: __m512i) -> __m512i {
        _mm512_add_epi64(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b))
    }

    /// `a`'s quarters added in pairs, then `b`'s.
    #[target_feature(enable = "avx512f")]
    fn quarters(a: __m512i, b: __m512i) -> __m512i {
        _mm512_add_epi64(
            _mm512_shuffle_i64x2::<0b10_00_10_00>(a, b),
            _mm512_shuffle_i64x2::<0b11_01_11_01>(a, b),
        )
    }
}

/// [`count_distances`] with the row's length known for the common sizes, so
/// its words are read without a loop (384 dimensions: 6 words).
#[inline(always)]
fn count_scalar(
    signs: &[u64],
    query: &[u64],
    range: std::ops::Range<usize>,
    passes: &impl Fn(&usize) -> bool,
    distances: &mut [u16],
    at_distance: &mut [[u32; TALLIES]],
) {
    match query.len() {
        6 => count_distances::<6>(signs, query, range, passes, distances, at_distance),
        12 => count_distances::<12>(signs, query, range, passes, distances, at_distance),
        _ => count_distances::<0>(signs, query, range, passes, distances, at_distance),
    }
}

/// The integer dot product of two code vectors (the compiler vectorises
/// it, for the instructions of the function it is inlined in).
#[inline(always)]
fn code_dot(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum()
}

impl Namespace {
    #[inline(always)]
    fn row<T>(values: &[T], dimensions: usize, position: usize) -> &[T] {
        &values[position * dimensions..(position + 1) * dimensions]
    }

    pub(super) fn put(&mut self, record: VectorRecord) {
        let labels = [record.session_id, record.peer_id, record.level];
        let labels = labels.each_ref().map(Option::as_deref);
        self.put_passages(&record.id, labels, record.passages.iter().map(Vec::as_slice));
        self.put_parts(record.id, labels, &record.vector);
    }

    /// Keeps `passages` as record `id`'s passages after the first, in
    /// place of those it had.
    pub(super) fn put_passages<'a>(
        &mut self,
        id: &str,
        labels: [Option<&str>; 3],
        passages: impl ExactSizeIterator<Item = &'a [f32]>,
    ) {
        let count = u32::try_from(passages.len()).unwrap_or(u32::MAX);
        let before = self.passages.get(id).copied().unwrap_or(0);
        for n in count + 1..=before {
            self.remove_one(&passage_key(id, n));
        }
        for (n, vector) in (1..).zip(passages) {
            self.put_parts(passage_key(id, n), labels, vector);
        }
        if count == 0 {
            self.passages.remove(id);
        } else {
            self.passages.insert(id.to_owned(), count);
        }
    }

    /// Adds or replaces the vector `id` with its session, peer and level.
    pub(super) fn put_parts(&mut self, id: String, labels: [Option<&str>; 3], vector: &[f32]) {
        let fields = labels.map(|label| self.names.intern(label));
        if self.dimensions == 0 {
            self.dimensions = vector.len();
        }
        let dimensions = self.dimensions;
        let position = match self.index.get(&id) {
            Some(&position) => {
                self.fields[position] = fields;
                position
            }
            None => {
                let position = self.ids.len();
                self.index.insert(id.clone(), position);
                self.ids.push(id);
                self.fields.push(fields);
                self.data.resize((position + 1) * dimensions, 0.0);
                self.codes.resize((position + 1) * dimensions, 0);
                self.scales.push(0.0);
                self.signs.resize((position + 1) * sign_words(dimensions), 0);
                position
            }
        };
        let rows = position * dimensions..(position + 1) * dimensions;
        self.data[rows.clone()].copy_from_slice(vector);
        self.scales[position] = quantize(vector, &mut self.codes[rows]);
        let words = sign_words(dimensions);
        signs(vector, &mut self.signs[position * words..(position + 1) * words]);
    }

    /// Makes room for `rows` more vectors of `dimensions` at once: a
    /// million-row namespace then loads without regrowing 2 GB of arrays.
    pub(super) fn reserve(&mut self, rows: usize, dimensions: usize) {
        self.ids.reserve(rows);
        self.fields.reserve(rows);
        self.index.reserve(rows);
        self.data.reserve(rows * dimensions);
        self.codes.reserve(rows * dimensions);
        self.scales.reserve(rows);
        self.signs.reserve(rows * sign_words(dimensions));
    }

    /// Removes record `id` and every passage of it.
    pub(super) fn remove(&mut self, id: &str) {
        for n in 1..=self.passages.remove(id).unwrap_or(0) {
            self.remove_one(&passage_key(id, n));
        }
        self.remove_one(id);
    }

    fn remove_one(&mut self, id: &str) {
        let Some(position) = self.index.remove(id) else { return };
        let last = self.ids.len() - 1;
        let dimensions = self.dimensions;
        if position != last {
            let moved = self.ids[last].clone();
            self.index.insert(moved, position);
            self.data
                .copy_within(last * dimensions..(last + 1) * dimensions, position * dimensions);
            self.codes
                .copy_within(last * dimensions..(last + 1) * dimensions, position * dimensions);
            let words = sign_words(dimensions);
            self.signs
                .copy_within(last * words..(last + 1) * words, position * words);
        }
        self.ids.swap_remove(position);
        self.fields.swap_remove(position);
        self.scales.swap_remove(position);
        self.data.truncate(last * dimensions);
        self.codes.truncate(last * dimensions);
        self.signs.truncate(last * sign_words(dimensions));
    }

    with_cpu_feature! {
        /// The `keep` rows of `range` passing `passes` whose signs differ
        /// least from `query`'s, with the CPU's population count where it
        /// has one (not in the x86-64 baseline Rust targets): a third of
        /// the instructions per row.
        fn nearest_by_signs, nearest_by_signs_popcnt("popcnt") => nearest_by_signs_portable(
            range: std::ops::Range<usize>,
            query: &[u64],
            keep: usize,
            passes: &impl Fn(&usize) -> bool,
        ) -> Vec<(f32, usize)>
    }

    /// Two passes over the rows' signs instead of a running shortlist:
    /// the first writes each row's distance (a row that fails the filter
    /// lies beyond any) and counts the rows at each distance; those counts
    /// give the distance within which `keep` rows lie, and the second pass
    /// takes the rows nearer than it, then those at it in order. Distances
    /// are small integers, so no row is compared with a shortlist, and
    /// ties are broken by position as the running shortlist broke them.
    #[inline(always)]
    fn nearest_by_signs_portable(
        &self,
        range: std::ops::Range<usize>,
        query: &[u64],
        keep: usize,
        passes: &impl Fn(&usize) -> bool,
    ) -> Vec<(f32, usize)> {
        let words = query.len();
        let beyond = words * 64 + 1;
        let mut distances = vec![0_u16; range.len()];
        let mut at_distance = vec![[0_u32; TALLIES]; beyond + 1];
        let signs = &self.signs[range.start * words..range.end * words];
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        if wide::available() && matches!(words, 6 | 12) {
            // SAFETY: the CPU has AVX-512F and VPOPCNTDQ.
            unsafe {
                match words {
                    6 => wide::count_distances::<6>(
                        signs,
                        query,
                        range.clone(),
                        passes,
                        &mut distances,
                        &mut at_distance,
                    ),
                    _ => wide::count_distances::<12>(
                        signs,
                        query,
                        range.clone(),
                        passes,
                        &mut distances,
                        &mut at_distance,
                    ),
                }
            }
        } else {
            count_scalar(signs, query, range.clone(), passes, &mut distances, &mut at_distance);
        }
        #[cfg(not(target_arch = "x86_64"))]
        count_scalar(signs, query, range.clone(), passes, &mut distances, &mut at_distance);
        // The distance within which `keep` rows lie, and how many rows at it to take.
        let mut nearer = 0;
        let mut bound = beyond;
        let mut at_bound = 0;
        let totals = at_distance[..beyond]
            .iter()
            .map(|tallies| tallies.iter().sum::<u32>() as usize);
        for (distance, count) in totals.enumerate() {
            if nearer + count >= keep {
                (bound, at_bound) = (distance, keep - nearer);
                break;
            }
            nearer += count;
        }
        if bound == beyond {
            at_bound = 0;
        }
        let mut found = Vec::with_capacity(nearer + at_bound);
        // Most blocks of rows hold none within the bound: one test each,
        // vectorised, skips them.
        const BLOCK: usize = 16;
        let bound_distance = bound as u16;
        for (block, distances) in distances.chunks(BLOCK).enumerate() {
            if !distances
                .iter()
                .fold(false, |any, &distance| any | (distance <= bound_distance))
            {
                continue;
            }
            for (offset, &distance) in distances.iter().enumerate() {
                let distance = usize::from(distance);
                if distance < bound || (distance == bound && at_bound > 0) {
                    if distance == bound {
                        at_bound -= 1;
                    }
                    found.push((distance as f32, range.start + block * BLOCK + offset));
                }
            }
        }
        found
    }

    /// `positions` in order, each as the codes of the one [`PREFETCH_AHEAD`]
    /// after it are asked for from memory: the rows a sign stage passes are
    /// scattered over the namespace, and each read of a row's codes would
    /// otherwise wait for memory.
    #[allow(unsafe_code)]
    fn prefetching<'a>(&'a self, positions: &'a [usize]) -> impl Iterator<Item = usize> + 'a {
        positions.iter().enumerate().map(move |(at, &position)| {
            #[cfg(target_arch = "x86_64")]
            if let Some(&ahead) = positions.get(at + PREFETCH_AHEAD) {
                let codes = Self::row(&self.codes, self.dimensions, ahead);
                for line in codes.chunks(64) {
                    // SAFETY: a prefetch reads nothing into the program; the address is in `codes`.
                    unsafe {
                        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.as_ptr().cast());
                    }
                }
            }
            position
        })
    }

    with_cpu_feature! {
        /// The `keep` of `positions` nearest the query by their int8 codes
        /// (ties by id), with AVX2 where the CPU has it: the x86-64
        /// baseline multiplies 4 codes an instruction, AVX2 16, and a
        /// million-row scan passes 4,000 rows of 384 codes to this stage.
        fn nearest_by_codes, nearest_by_codes_avx2("avx2") => nearest_by_codes_portable(
            positions: &mut dyn Iterator<Item = usize>,
            keep: usize,
            query_codes: &[i8],
            query_scale: f32,
        ) -> Vec<(f32, usize)>
    }

    #[inline(always)]
    fn nearest_by_codes_portable(
        &self,
        positions: &mut dyn Iterator<Item = usize>,
        keep: usize,
        query_codes: &[i8],
        query_scale: f32,
    ) -> Vec<(f32, usize)> {
        let dimensions = self.dimensions;
        let distance = |position: usize| {
            let dot = code_dot(Self::row(&self.codes, dimensions, position), query_codes);
            1.0 - dot as f32 * self.scales[position] * query_scale
        };
        nearest(positions, keep, distance, |a, b| self.ids[a].cmp(&self.ids[b]))
    }

    /// The `top_k` records nearest to `query`, each by its nearest passage.
    pub(super) fn scan(
        &self,
        query: &[f32],
        top_k: usize,
        filter: &VectorFilter,
        max_distance: Option<f32>,
    ) -> Vec<VectorHit> {
        let by_signs = self.ids.len() >= SIGN_SCAN_ROWS;
        if self.passages.is_empty() {
            return self.scan_staged(query, top_k, filter, max_distance, by_signs);
        }
        // A record's passages may fill the list, and an entry not fetched
        // may outrank a record its allowance moved back: ask for more until
        // the top `top_k` records are settled, or every entry is in it.
        let mut asked = top_k.saturating_mul(2);
        loop {
            let hits = self
                .scan_staged(query, asked, filter, max_distance, by_signs)
                .into_iter()
                .map(|hit| {
                    let (id, passage) = record_of(&hit.id);
                    VectorHit {
                        id: id.to_owned(),
                        distance: hit.distance,
                        passage,
                    }
                })
                .collect();
            let passages = |id: &str| 1 + self.passages.get(id).copied().unwrap_or(0);
            let (kept, short) = roncho_core::vector::best_per_record(hits, top_k, asked, max_distance, passages);
            if !short || asked >= self.ids.len() {
                return kept;
            }
            asked = asked.saturating_mul(2);
        }
    }

    /// Nearest vectors: an approximate shortlist — by int8 codes, or first by
    /// signs and then by codes when `by_signs` — rescored exactly.
    fn scan_staged(
        &self,
        query: &[f32],
        top_k: usize,
        filter: &VectorFilter,
        max_distance: Option<f32>,
        by_signs: bool,
    ) -> Vec<VectorHit> {
        if self.dimensions != query.len() || top_k == 0 || self.ids.is_empty() {
            return Vec::new();
        }
        let dimensions = self.dimensions;
        let mut query_codes = vec![0_i8; dimensions];
        let query_scale = quantize(query, &mut query_codes);
        let by_codes = |positions: &mut dyn Iterator<Item = usize>, keep: usize| {
            self.nearest_by_codes(positions, keep, &query_codes, query_scale)
        };
        let candidates = (top_k * OVERSAMPLE).max(MIN_CANDIDATES);
        let fields = self.names.compile(filter);
        let everything = fields.passes_everything();
        let passes = |position: &usize| everything || fields.matches(self.fields[*position]);
        let rows = self.ids.len();
        let mut shortlist = if by_signs {
            let mut query_signs = vec![0_u64; sign_words(dimensions)];
            signs(query, &mut query_signs);
            let floor = MIN_SIGN_SHORTLIST.max(candidates);
            let keep = (rows / SIGN_SHORTLIST_SHARE)
                .max(floor)
                .min(MAX_SIGN_SHORTLIST.max(floor));
            // Each half's rows nearest by signs are ranked by their codes on
            // that half's thread: the best `candidates` of either half hold
            // the best of both, and are rescored exactly below.
            let by_codes = |by_signs: Vec<(f32, usize)>| {
                let positions: Vec<usize> = by_signs.into_iter().map(|(_, position)| position).collect();
                by_codes(&mut self.prefetching(&positions), candidates)
            };
            // Without a filter, a test the compiler sees is always true.
            if everything {
                split_scan(rows, |range| {
                    by_codes(self.nearest_by_signs(range, &query_signs, keep, &|_: &usize| true))
                })
            } else {
                split_scan(rows, |range| {
                    by_codes(self.nearest_by_signs(range, &query_signs, keep, &passes))
                })
            }
        } else {
            split_scan(rows, |range| by_codes(&mut range.filter(passes), candidates))
        };
        // Rescore exactly.
        for (distance, position) in &mut shortlist {
            *distance = 1.0 - roncho_core::embed::dot(Self::row(&self.data, dimensions, *position), query);
        }
        shortlist.retain(|(distance, _)| max_distance.is_none_or(|max| *distance <= max));
        top(shortlist, top_k, |a, b| self.ids[a].cmp(&self.ids[b]))
            .into_iter()
            .map(|(distance, position)| VectorHit::new(self.ids[position].clone(), distance))
            .collect()
    }
}

/// Runs `scan` over `0..rows`, in two halves on two threads for large
/// namespaces, and returns both results together (unordered).
fn split_scan<F>(rows: usize, scan: F) -> Vec<(f32, usize)>
where
    F: Fn(std::ops::Range<usize>) -> Vec<(f32, usize)> + Sync,
{
    if rows < PARALLEL_SCAN_ROWS {
        return scan(0..rows);
    }
    let middle = rows / 2;
    let (mut first, second) = std::thread::scope(|scope| {
        let second = scope.spawn(|| scan(middle..rows));
        (scan(0..middle), second.join().unwrap_or_default())
    });
    first.extend(second);
    first
}

/// The `keep` positions of `positions` nearest by `distance`, pruned as it
/// goes: whenever twice `keep` are held, only the best `keep` stay, and
/// positions further than the worst of them are skipped.
#[inline(always)]
fn nearest(
    positions: impl Iterator<Item = usize>,
    keep: usize,
    distance: impl Fn(usize) -> f32,
    tie: impl Fn(usize, usize) -> std::cmp::Ordering + Copy,
) -> Vec<(f32, usize)> {
    let mut scored = Vec::with_capacity(keep * 2);
    let mut worst = f32::INFINITY;
    for position in positions {
        let distance = distance(position);
        if distance > worst {
            continue;
        }
        scored.push((distance, position));
        if scored.len() == keep * 2 {
            // Partitioned, not sorted: the kept half is sorted once, at the end.
            let order = |a: &(f32, usize), b: &(f32, usize)| a.0.total_cmp(&b.0).then_with(|| tie(a.1, b.1));
            let (_, nth, _) = scored.select_nth_unstable_by(keep - 1, order);
            worst = nth.0;
            scored.truncate(keep);
        }
    }
    top(scored, keep, tie)
}

/// Rows from which a scan is split across two threads.
const PARALLEL_SCAN_ROWS: usize = 20_000;

/// Keeps the `top_k` nearest of `scored`, nearest first (ties by `tie` of their positions).
fn top(
    mut scored: Vec<(f32, usize)>,
    top_k: usize,
    tie: impl Fn(usize, usize) -> std::cmp::Ordering,
) -> Vec<(f32, usize)> {
    let order = |a: &(f32, usize), b: &(f32, usize)| a.0.total_cmp(&b.0).then_with(|| tie(a.1, b.1));
    if scored.len() > top_k {
        scored.select_nth_unstable_by(top_k - 1, order);
        scored.truncate(top_k);
    }
    scored.sort_by(order);
    scored
}

pub(super) fn encode(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|value| value.to_le_bytes()).collect()
}

/// Decodes little-endian `f32`s into `vector`, reusing its allocation.
pub(super) fn decode_into(bytes: &[u8], vector: &mut Vec<f32>) {
    vector.clear();
    vector.extend(
        bytes
            .chunks_exact(4)
            .map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]])),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, vector: Vec<f32>, session: &str) -> VectorRecord {
        VectorRecord {
            id: id.into(),
            vector,
            session_id: Some(session.into()),
            peer_id: None,
            level: None,
            lexical: None,
            passages: Vec::new(),
        }
    }

    #[test]
    fn namespace_put_remove_and_scan() {
        let mut namespace = Namespace::default();
        namespace.put(record("a", vec![1.0, 0.0], "s1"));
        namespace.put(record("b", vec![0.0, 1.0], "s2"));
        namespace.put(record("c", vec![0.6, 0.8], "s1"));
        namespace.put(record("a", vec![0.8, 0.6], "s1"));
        let hits = namespace.scan(&[1.0, 0.0], 2, &VectorFilter::default(), None);
        assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["a", "c"]);
        namespace.remove("a");
        let hits = namespace.scan(
            &[1.0, 0.0],
            5,
            &VectorFilter {
                session_ids: Some(vec!["s1".into()]),
                ..VectorFilter::default()
            },
            None,
        );
        assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["c"]);
        let near = namespace.scan(&[0.0, 1.0], 5, &VectorFilter::default(), Some(0.1));
        assert_eq!(near.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["b"]);
        let mut decoded = vec![9.0];
        decode_into(&encode(&[1.5, -2.0]), &mut decoded);
        assert_eq!(decoded, [1.5, -2.0]);
    }

    /// A random vector of `dimensions` with components in -0.5..0.5.
    fn random(state: &mut u64, dimensions: usize) -> Vec<f32> {
        (0..dimensions)
            .map(|_| {
                *state ^= *state << 13;
                *state ^= *state >> 7;
                *state ^= *state << 17;
                (*state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect()
    }

    /// The share of the exact 10 nearest that `scan` finds, over 50 queries.
    fn recall_at_10(vectors: &[Vec<f32>], queries: &[Vec<f32>], scan: impl Fn(&[f32]) -> Vec<VectorHit>) -> f64 {
        let (mut found, mut wanted) = (0, 0);
        for query in queries {
            let mut exact: Vec<(f32, usize)> = vectors
                .iter()
                .enumerate()
                .map(|(i, v)| (1.0 - roncho_core::embed::dot(v, query), i))
                .collect();
            exact.sort_by(|a, b| a.0.total_cmp(&b.0));
            let hits = scan(query);
            for (distance, i) in &exact[..10] {
                wanted += 1;
                if let Some(hit) = hits.iter().find(|hit| hit.id == format!("v{i}")) {
                    found += 1;
                    assert!((hit.distance - distance).abs() < 1e-5, "distances are exact");
                }
            }
        }
        found as f64 / wanted as f64
    }

    /// The sign shortlist, then int8, then exact rescoring finds what an exact
    /// scan finds in embeddings that cluster by topic, as text embeddings do.
    #[test]
    fn sign_then_code_shortlists_match_exact_search_on_clustered_vectors() {
        let dimensions = 384;
        let mut state = 0x5DEE_CE66_D1CE_4E5B_u64;
        let centers: Vec<Vec<f32>> = (0..100).map(|_| random(&mut state, dimensions)).collect();
        let near = |center: &[f32], spread: f32, state: &mut u64| {
            let mut vector: Vec<f32> = center
                .iter()
                .zip(random(state, dimensions))
                .map(|(c, noise)| c + spread * noise)
                .collect();
            roncho_core::embed::normalize(&mut vector);
            vector
        };
        let vectors: Vec<Vec<f32>> = (0..20_000)
            .map(|i| near(&centers[i % centers.len()], 1.5, &mut state))
            .collect();
        let mut namespace = Namespace::default();
        for (i, vector) in vectors.iter().enumerate() {
            namespace.put(record(&format!("v{i}"), vector.clone(), "s"));
        }
        let queries: Vec<Vec<f32>> = (0..50).map(|i| near(&vectors[i * 397], 0.5, &mut state)).collect();
        let recall = recall_at_10(&vectors, &queries, |query| {
            namespace.scan_staged(query, 10, &VectorFilter::default(), None, true)
        });
        assert!(recall >= 0.95, "recall {recall}");
    }

    #[test]
    fn the_sign_stage_keeps_the_nearest_rows_that_pass_ties_by_position() {
        // 16 dimensions, so that many rows share each distance; 384 and
        // 768 (six and twelve words a row: the wide count where the CPU has it).
        for dimensions in [16, 384, 768] {
            the_sign_stage_keeps_the_nearest_rows_of(dimensions);
        }
    }

    fn the_sign_stage_keeps_the_nearest_rows_of(dimensions: usize) {
        let mut state = 0x2545_F491_4F6C_DD1D_u64;
        let mut namespace = Namespace::default();
        for i in 0..5_000 {
            let session = if i % 3 == 0 { "odd" } else { "s" };
            namespace.put(record(&format!("v{i}"), random(&mut state, dimensions), session));
        }
        let filter = VectorFilter {
            session_ids: Some(vec!["s".into()]),
            ..VectorFilter::default()
        };
        for filter in [VectorFilter::default(), filter] {
            let fields = namespace.names.compile(&filter);
            let passes = |position: &usize| fields.matches(namespace.fields[*position]);
            let query = random(&mut state, dimensions);
            let mut query_signs = vec![0_u64; sign_words(dimensions)];
            signs(&query, &mut query_signs);
            for (range, keep) in [(0..5_000, 100), (1_000..3_000, 7), (0..5_000, 4_999), (10..20, 50)] {
                let mut expected: Vec<(u32, usize)> = range
                    .clone()
                    .filter(&passes)
                    .map(|position| {
                        let words = query_signs.len();
                        (
                            hamming(&namespace.signs[position * words..(position + 1) * words], &query_signs),
                            position,
                        )
                    })
                    .collect();
                expected.sort_unstable();
                expected.truncate(keep);
                let mut found: Vec<(u32, usize)> = namespace
                    .nearest_by_signs(range.clone(), &query_signs, keep, &passes)
                    .into_iter()
                    .map(|(distance, position)| (distance as u32, position))
                    .collect();
                found.sort_unstable();
                assert_eq!(found, expected, "{range:?} keep {keep} {filter:?}");
            }
        }
    }

    /// The AVX-512 count writes the distances and counts the scalar loop
    /// does, over ranges that start and end anywhere within a block of
    /// eight rows, with and without a filter. Where the CPU lacks AVX-512
    /// VPOPCNTDQ only the scalar loop runs, and this says so.
    #[test]
    fn the_wide_count_equals_the_scalar_count() {
        #[cfg(target_arch = "x86_64")]
        if wide::available() {
            let mut state = 0x9E37_79B9_7F4A_7C15_u64;
            let mut next = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            for words in [6, 12] {
                let signs: Vec<u64> = (0..1_000 * words).map(|_| next()).collect();
                let query: Vec<u64> = (0..words).map(|_| next()).collect();
                for range in [0..1_000, 3..997, 8..16, 5..12, 0..0, 999..1_000] {
                    let signs = &signs[range.start * words..range.end * words];
                    let beyond = words * 64 + 1;
                    for odd_out in [false, true] {
                        let passes = |position: &usize| !odd_out || position % 3 != 1;
                        let count = |wide: bool| {
                            let mut distances = vec![0_u16; range.len()];
                            let mut at_distance = vec![[0_u32; TALLIES]; beyond + 1];
                            #[allow(unsafe_code)]
                            match (wide, words) {
                                // SAFETY: the CPU has AVX-512F and VPOPCNTDQ (checked above).
                                (true, 6) => unsafe {
                                    wide::count_distances::<6>(
                                        signs,
                                        &query,
                                        range.clone(),
                                        &passes,
                                        &mut distances,
                                        &mut at_distance,
                                    )
                                },
                                // SAFETY: as above.
                                (true, _) => unsafe {
                                    wide::count_distances::<12>(
                                        signs,
                                        &query,
                                        range.clone(),
                                        &passes,
                                        &mut distances,
                                        &mut at_distance,
                                    )
                                },
                                (false, _) => count_scalar(
                                    signs,
                                    &query,
                                    range.clone(),
                                    &passes,
                                    &mut distances,
                                    &mut at_distance,
                                ),
                            }
                            let totals: Vec<u32> = at_distance.iter().map(|tallies| tallies.iter().sum()).collect();
                            (distances, totals)
                        };
                        let (wide, scalar) = (count(true), count(false));
                        assert_eq!(wide, scalar, "{words} words, rows {range:?}, filtered {odd_out}");
                        assert!(scalar.0.iter().any(|&d| usize::from(d) < beyond) || range.is_empty());
                    }
                }
            }
            return;
        }
        eprintln!("this CPU has no AVX-512 VPOPCNTDQ: only the scalar count runs");
    }

    /// The int8 shortlist with exact rescoring finds what an exact scan finds.
    #[test]
    fn quantized_scan_with_rescoring_matches_exact_search() {
        let dimensions = 64;
        let mut state = 0x2545_F491_4F6C_DD1D_u64;
        let mut random_unit = || {
            let mut vector = random(&mut state, dimensions);
            roncho_core::embed::normalize(&mut vector);
            vector
        };
        let mut namespace = Namespace::default();
        let vectors: Vec<Vec<f32>> = (0..3000).map(|_| random_unit()).collect();
        for (i, vector) in vectors.iter().enumerate() {
            namespace.put(record(&format!("v{i}"), vector.clone(), "s"));
        }
        let queries: Vec<Vec<f32>> = (0..50).map(|_| random_unit()).collect();
        let recall = recall_at_10(&vectors, &queries, |query| {
            namespace.scan(query, 10, &VectorFilter::default(), None)
        });
        // Random vectors in 64 dimensions are a hard case (near-equal distances).
        assert!(recall >= 0.98, "recall {recall}");
    }
}
