//! An 8-bit copy of a BERT encoder for one text at a time: the search
//! query's path, where a request waits on one short text.
//!
//! Every linear layer's weights are rounded to `i8` with one scale per 32
//! inputs of an output, and the activations entering a layer with one scale
//! per 32 inputs of a token. Coarser scales cost accuracy: one per token
//! moved bge-small's vectors to cosine 0.999 of the float model's, one per
//! weight row all-MiniLM-L6-v2's to 0.9985; per 32 both stay near 0.9996.
//! Products run on AVX-512 VNNI (`vpdpbusd`: 64 byte products an
//! instruction) where the CPU has it, else on AVX2 (`vpmaddubsw` and
//! `vpmaddwd`: 32 products in four instructions, as AMD's Zen 2 and 3 and
//! older Intel servers run them); the same integer arithmetic in plain Rust
//! is the reference both kernels are tested against, and on a CPU with
//! neither `BertEmbedder` keeps the float model for queries.
//!
//! Why: bge-small's 21 M encoder weights are 85 MB as `f32` and 21 MB as
//! `i8`, which can stay in a server CPU's last-level cache between queries;
//! the float model's batched kernels spend most of one short text's time
//! packing and handing work between threads (docs/benchmarks.md, "A
//! cheaper query embedding", and ADR 0017).

use std::collections::HashMap;

use candle_core::Tensor;
use roncho_core::embed::dot;

/// Inputs per activation scale: a block of the layer's input.
const BLOCK: usize = 32;
/// Outputs per tile: one 512-bit register of `i32`.
const TILE: usize = 16;
/// Tokens the kernel computes at once, sharing each load of weights (4
/// was slower: docs/benchmarks.md).
const ROWS: usize = 8;

/// Whether this CPU runs one of the vector kernels.
pub fn has_fast_kernel() -> bool {
    Kernel::detect() != Kernel::Portable
}

/// Which kernel multiplies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// AVX-512 VNNI.
    Vnni,
    /// AVX2 with FMA.
    Avx2,
    /// Plain Rust, the same integer arithmetic.
    Portable,
}

impl Kernel {
    /// Returns the fastest kernel this CPU runs.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vnni")
            {
                return Kernel::Vnni;
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                return Kernel::Avx2;
            }
        }
        Kernel::Portable
    }

    /// Every kernel this CPU runs, the portable one last.
    pub fn available() -> Vec<Self> {
        match Self::detect() {
            Kernel::Vnni => vec![Kernel::Vnni, Kernel::Avx2, Kernel::Portable],
            Kernel::Avx2 => vec![Kernel::Avx2, Kernel::Portable],
            Kernel::Portable => vec![Kernel::Portable],
        }
    }
}

/// A linear layer `y = x · Wᵀ + b` with `W` in `i8`, one scale per 32
/// inputs of an output.
#[derive(Debug)]
pub struct Linear {
    inputs: usize,
    outputs: usize,
    /// `W` in VNNI order: per tile of 16 outputs, per 4 inputs, per output,
    /// the 4 weights (`[outputs / 16][inputs / 4][16][4]`).
    packed: Vec<i8>,
    /// Per tile, per block of 32 inputs, per output: −128 × the block's
    /// weight sum (activations are stored as `u8` = `i8` + 128).
    offsets: Vec<i32>,
    /// Per tile, per block of 32 inputs, per output: the weights' scale.
    scales: Vec<f32>,
    bias: Vec<f32>,
}

impl Linear {
    /// Quantizes `weight` (`outputs × inputs`, row-major) and keeps `bias`;
    /// `None` unless both sizes are multiples of 32 and 16.
    pub fn new(weight: &[f32], bias: Vec<f32>, outputs: usize, inputs: usize) -> Option<Self> {
        if !inputs.is_multiple_of(BLOCK)
            || !outputs.is_multiple_of(TILE)
            || weight.len() != outputs * inputs
            || bias.len() != outputs
        {
            return None;
        }
        let blocks = inputs / BLOCK;
        let (rows, row_scales) = quantize_rows(weight, BLOCK);
        let mut packed = Vec::with_capacity(rows.len());
        let mut offsets = Vec::with_capacity(outputs * blocks);
        let mut scales = Vec::with_capacity(outputs * blocks);
        for tile in 0..outputs / TILE {
            for group in 0..inputs / 4 {
                for lane in 0..TILE {
                    let row = &rows[(tile * TILE + lane) * inputs..];
                    packed.extend_from_slice(&row[group * 4..group * 4 + 4]);
                }
            }
            for block in 0..inputs / BLOCK {
                for lane in 0..TILE {
                    let row = &rows[(tile * TILE + lane) * inputs + block * BLOCK..][..BLOCK];
                    offsets.push(-128 * row.iter().map(|&w| i32::from(w)).sum::<i32>());
                    scales.push(row_scales[(tile * TILE + lane) * blocks + block]);
                }
            }
        }
        Some(Self {
            inputs,
            outputs,
            packed,
            offsets,
            scales,
            bias,
        })
    }

    /// Returns `x · Wᵀ + b` for the `x.len() / inputs` tokens of `x`.
    #[inline(always)]
    pub fn forward(&self, kernel: Kernel, x: &[f32]) -> Vec<f32> {
        let tokens = x.len() / self.inputs;
        let (bytes, scales) = quantize_activations(x);
        let mut y = vec![0f32; tokens * self.outputs];
        let input = QuantizedRows {
            bytes: &bytes,
            scales: &scales,
        };
        match kernel {
            #[cfg(target_arch = "x86_64")]
            Kernel::Vnni => vnni::multiply(self, &input, &mut y),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => avx2::multiply(self, &input, &mut y),
            _ => self.multiply_portable(&input, &mut y),
        }
        for row in y.chunks_mut(self.outputs) {
            row.iter_mut().zip(&self.bias).for_each(|(value, bias)| *value += bias);
        }
        y
    }

    /// The kernel's arithmetic in plain Rust: per token and output, Σ over
    /// blocks of (the block's `u8 × i8` dot product + offset) × its scale.
    fn multiply_portable(&self, input: &QuantizedRows<'_>, out: &mut [f32]) {
        let blocks = self.inputs / BLOCK;
        for (token, out) in out.chunks_mut(self.outputs).enumerate() {
            let bytes = &input.bytes[token * self.inputs..][..self.inputs];
            for (output, value) in out.iter_mut().enumerate() {
                let (tile, lane) = (output / TILE, output % TILE);
                let mut sum = 0f32;
                for block in 0..blocks {
                    let at = (tile * blocks + block) * TILE + lane;
                    let mut dot = self.offsets[at];
                    for group in block * BLOCK / 4..(block + 1) * BLOCK / 4 {
                        let weights = &self.packed[((tile * self.inputs / 4 + group) * TILE + lane) * 4..][..4];
                        for (w, a) in weights.iter().zip(&bytes[group * 4..group * 4 + 4]) {
                            dot += i32::from(*w) * i32::from(*a);
                        }
                    }
                    sum += dot as f32 * (input.scales[token * blocks + block] * self.scales[at]);
                }
                *value = sum;
            }
        }
    }
}

/// Returns `values` rounded to `i8` with one scale per `width` of them
/// (the largest magnitude maps to 127), and the scales.
fn quantize_rows(values: &[f32], width: usize) -> (Vec<i8>, Vec<f32>) {
    let mut quantized = Vec::with_capacity(values.len());
    let mut scales = Vec::with_capacity(values.len() / width);
    for row in values.chunks(width) {
        let high = row.iter().fold(0f32, |high, v| high.max(v.abs()));
        let scale = if high > 0.0 { high / 127.0 } else { 1.0 };
        scales.push(scale);
        quantized.extend(row.iter().map(|v| (v / scale).round().clamp(-127.0, 127.0) as i8));
    }
    (quantized, scales)
}

/// Returns a layer's input rounded to bytes, one scale per block of 32,
/// stored as `u8` = `i8` + 128 (VNNI multiplies unsigned by signed bytes),
/// and the scales. Rounds half away from zero without a call to `round`,
/// and takes each block's largest magnitude as the largest of the values'
/// bits without their sign (the same order for finite floats), which,
/// unlike a float `max`, the compiler turns into SIMD.
#[inline(always)]
fn quantize_activations(x: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let mut bytes = vec![0u8; x.len()];
    let mut scales = Vec::with_capacity(x.len() / BLOCK);
    for (block, out) in x.chunks(BLOCK).zip(bytes.chunks_mut(BLOCK)) {
        let high = f32::from_bits(block.iter().fold(0, |high, v| high.max(v.to_bits() & 0x7fff_ffff)));
        // Finite even for a block of subnormals (`127 / high` would not be).
        let inverse = if high > 0.0 { (127.0 / high).min(f32::MAX) } else { 0.0 };
        scales.push(high / 127.0);
        for (byte, v) in out.iter_mut().zip(block) {
            // `max` first: a NaN becomes −127, so the value is in range.
            #[expect(clippy::manual_clamp, reason = "`clamp` would keep a NaN")]
            let scaled = (v * inverse).max(-127.0).min(127.0);
            #[expect(unsafe_code, reason = "within ±127.5 and not NaN, so it fits an i32")]
            let rounded: i32 = unsafe { (scaled + 0.5f32.copysign(scaled)).to_int_unchecked() };
            *byte = (rounded + 128) as u8;
        }
    }
    (bytes, scales)
}

/// A layer's input: tokens of bytes, and a scale per block of 32.
struct QuantizedRows<'a> {
    bytes: &'a [u8],
    scales: &'a [f32],
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use std::arch::x86_64::*;

    use super::{BLOCK, Linear, QuantizedRows, ROWS, TILE};

    /// How far ahead of the product the weights are fetched: a few tiles.
    const PREFETCH_AHEAD: usize = 4096;

    /// Multiplies every token of `input` by the layer's weights into `out`.
    pub(super) fn multiply(layer: &Linear, input: &QuantizedRows<'_>, out: &mut [f32]) {
        assert!(input.bytes.len() * layer.outputs == out.len() * layer.inputs);
        assert!(super::Kernel::detect() == super::Kernel::Vnni);
        #[expect(unsafe_code, reason = "the CPU's AVX-512 VNNI support is checked just above")]
        unsafe {
            tiles(layer, input, out)
        }
    }

    /// Per tile of 16 outputs, the tokens [`ROWS`] at a time: a tile's
    /// weights (6–24 KB) are read from memory once and stay in L1 for the
    /// rest (tokens outermost, every group read all 21 MB again).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn tiles(layer: &Linear, input: &QuantizedRows<'_>, out: &mut [f32]) {
        let tokens = input.bytes.len() / layer.inputs;
        for tile in 0..layer.outputs / TILE {
            for first in (0..tokens).step_by(ROWS) {
                match tokens - first {
                    1 => rows::<1>(layer, tile, first, input, out),
                    2 => rows::<2>(layer, tile, first, input, out),
                    3 => rows::<3>(layer, tile, first, input, out),
                    4 => rows::<4>(layer, tile, first, input, out),
                    5 => rows::<5>(layer, tile, first, input, out),
                    6 => rows::<6>(layer, tile, first, input, out),
                    7 => rows::<7>(layer, tile, first, input, out),
                    _ => rows::<ROWS>(layer, tile, first, input, out),
                }
            }
        }
    }

    /// `M` tokens from `first` × one tile: per block of 32 inputs, 8
    /// `vpdpbusd` per token into `i32` from the block's offset, then scaled
    /// into `f32` by the token's and the weights' scales.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn rows<const M: usize>(layer: &Linear, tile: usize, first: usize, input: &QuantizedRows<'_>, out: &mut [f32]) {
        let inputs = layer.inputs;
        let blocks = inputs / BLOCK;
        let weights = &layer.packed[tile * inputs * TILE..][..inputs * TILE];
        let offsets = &layer.offsets[tile * blocks * TILE..][..blocks * TILE];
        let scales = &layer.scales[tile * blocks * TILE..][..blocks * TILE];
        let bytes = &input.bytes[first * inputs..][..M * inputs];
        let token_scales = &input.scales[first * blocks..][..M * blocks];
        let mut sums = [_mm512_setzero_ps(); M];
        for block in 0..blocks {
            #[expect(unsafe_code, reason = "16 i32 read within `offsets`, checked by the slice")]
            let offset = unsafe { _mm512_loadu_si512(offsets[block * TILE..][..TILE].as_ptr().cast()) };
            #[expect(unsafe_code, reason = "16 f32 read within `scales`, checked by the slice")]
            let weight_scale = unsafe { _mm512_loadu_ps(scales[block * TILE..][..TILE].as_ptr()) };
            let block_weights = &weights[block * BLOCK * TILE..][..BLOCK * TILE];
            // Each token's 32 bytes of this block, read 4 at a time
            // straight into a broadcast where they are multiplied: read
            // into a general register first, each took a move across to
            // the vector unit, which competes with the products (Zen 4).
            let activations: [&[u8; BLOCK]; M] = std::array::from_fn(|token| {
                bytes[token * inputs + block * BLOCK..][..BLOCK]
                    .try_into()
                    .expect("a block of activations")
            });
            let mut dots = [offset; M];
            if first == 0 {
                // The weights [`PREFETCH_AHEAD`] bytes on are asked for
                // from memory now: the encoder's 21 MB are rarely all
                // still cached when a query comes (a search's scan has
                // passed through since), and the hardware's prefetch does
                // not run far enough ahead of a product this short.
                let ahead = weights.as_ptr().wrapping_add(block * BLOCK * TILE + PREFETCH_AHEAD);
                for line in 0..BLOCK * TILE / 64 {
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line * 64).cast());
                }
            }
            for group in 0..BLOCK / 4 {
                #[expect(unsafe_code, reason = "64 bytes read within `block_weights`, checked by the slice")]
                let w = unsafe { _mm512_loadu_si512(block_weights[group * 4 * TILE..][..4 * TILE].as_ptr().cast()) };
                for (dot, activation) in dots.iter_mut().zip(&activations) {
                    #[expect(unsafe_code, reason = "4 bytes read within a block of 32, checked by the slice")]
                    let four = unsafe { _mm_loadu_si32(activation[group * 4..][..4].as_ptr().cast()) };
                    *dot = _mm512_dpbusd_epi32(*dot, _mm512_broadcastd_epi32(four), w);
                }
            }
            for (token, (sum, dot)) in sums.iter_mut().zip(dots).enumerate() {
                let scale = _mm512_mul_ps(_mm512_set1_ps(token_scales[token * blocks + block]), weight_scale);
                *sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, *sum);
            }
        }
        for (token, sum) in sums.into_iter().enumerate() {
            let at = &mut out[(first + token) * layer.outputs + tile * TILE..][..TILE];
            #[expect(unsafe_code, reason = "16 f32 written within `out`, checked by the slice")]
            unsafe {
                _mm512_storeu_ps(at.as_mut_ptr(), sum)
            };
        }
    }
}

/// Layer normalization of each token's `width` values, in place.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{BLOCK, Linear, QuantizedRows, TILE};

    /// Outputs per half tile: one 256-bit register of `i32`.
    const HALF: usize = TILE / 2;
    /// Groups of 4 inputs in a block.
    const GROUPS: usize = BLOCK / 4;
    /// Tokens computed at once: each keeps two `i32` registers, within
    /// AVX2's sixteen.
    const ROWS: usize = 4;

    /// A layer's input for this kernel, per token and group of 4 inputs:
    /// the 4 activations as `i8` (the `+ 128` undone) and their magnitudes.
    struct Words {
        signed: Vec<i32>,
        magnitudes: Vec<i32>,
    }

    /// Multiplies every token of `input` by the layer's weights into `out`.
    pub(super) fn multiply(layer: &Linear, input: &QuantizedRows<'_>, out: &mut [f32]) {
        assert!(input.bytes.len() * layer.outputs == out.len() * layer.inputs);
        assert!(std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"));
        let (signed, magnitudes) = input
            .bytes
            .chunks_exact(4)
            .map(|four| {
                let signed: [u8; 4] = std::array::from_fn(|at| four[at] ^ 0x80);
                let magnitudes = signed.map(|byte| (byte as i8).unsigned_abs());
                (i32::from_le_bytes(signed), i32::from_le_bytes(magnitudes))
            })
            .unzip();
        let words = Words { signed, magnitudes };
        #[expect(unsafe_code, reason = "the CPU's AVX2 and FMA support is checked just above")]
        unsafe {
            tiles(layer, &words, input.scales, out)
        }
    }

    /// Per tile of 16 outputs, the tokens [`ROWS`] at a time, so a tile's
    /// weights stay in L1.
    #[target_feature(enable = "avx2,fma")]
    fn tiles(layer: &Linear, words: &Words, token_scales: &[f32], out: &mut [f32]) {
        let tokens = words.signed.len() * 4 / layer.inputs;
        for tile in 0..layer.outputs / TILE {
            for first in (0..tokens).step_by(ROWS) {
                match tokens - first {
                    1 => rows::<1>(layer, tile, first, words, token_scales, out),
                    2 => rows::<2>(layer, tile, first, words, token_scales, out),
                    3 => rows::<3>(layer, tile, first, words, token_scales, out),
                    _ => rows::<ROWS>(layer, tile, first, words, token_scales, out),
                }
            }
        }
    }

    /// `M` tokens from `first` × one tile, as two halves of 8 outputs.
    /// AVX2 multiplies unsigned by signed bytes into saturating `i16`
    /// pairs, so each product is `|a| × (w × sign a)`: a pair sums two
    /// products of at most 127 × 127 and cannot saturate, and the block's
    /// offset is not needed.
    #[target_feature(enable = "avx2,fma")]
    fn rows<const M: usize>(
        layer: &Linear,
        tile: usize,
        first: usize,
        words: &Words,
        token_scales: &[f32],
        out: &mut [f32],
    ) {
        let inputs = layer.inputs;
        let (blocks, groups) = (inputs / BLOCK, inputs / 4);
        let weights = &layer.packed[tile * inputs * TILE..][..inputs * TILE];
        let scales = &layer.scales[tile * blocks * TILE..][..blocks * TILE];
        let token_scales = &token_scales[first * blocks..][..M * blocks];
        let ones = _mm256_set1_epi16(1);
        let mut sums = [[_mm256_setzero_ps(); 2]; M];
        for block in 0..blocks {
            let block_weights = &weights[block * BLOCK * TILE..][..BLOCK * TILE];
            let at = |all: &[i32], token: usize| -> [i32; GROUPS] {
                words_of(&all[(first + token) * groups + block * GROUPS..][..GROUPS])
            };
            let signed: [[i32; GROUPS]; M] = std::array::from_fn(|token| at(&words.signed, token));
            let magnitudes: [[i32; GROUPS]; M] = std::array::from_fn(|token| at(&words.magnitudes, token));
            let mut dots = [[_mm256_setzero_si256(); 2]; M];
            for group in 0..GROUPS {
                let pair = &block_weights[group * 4 * TILE..][..4 * TILE];
                #[expect(unsafe_code, reason = "2 × 32 bytes read within `pair`, checked by the slice")]
                let w = unsafe {
                    [
                        _mm256_loadu_si256(pair.as_ptr().cast()),
                        _mm256_loadu_si256(pair[4 * HALF..].as_ptr().cast()),
                    ]
                };
                for token in 0..M {
                    let signed = _mm256_set1_epi32(signed[token][group]);
                    let magnitude = _mm256_set1_epi32(magnitudes[token][group]);
                    for half in 0..2 {
                        let pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(w[half], signed));
                        dots[token][half] = _mm256_add_epi32(dots[token][half], _mm256_madd_epi16(pairs, ones));
                    }
                }
            }
            for half in 0..2 {
                #[expect(unsafe_code, reason = "8 f32 read within `scales`, checked by the slice")]
                let weight_scale = unsafe { _mm256_loadu_ps(scales[block * TILE + half * HALF..][..HALF].as_ptr()) };
                for token in 0..M {
                    let scale = _mm256_mul_ps(_mm256_set1_ps(token_scales[token * blocks + block]), weight_scale);
                    sums[token][half] =
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[token][half]), scale, sums[token][half]);
                }
            }
        }
        for (token, sums) in sums.into_iter().enumerate() {
            let at = &mut out[(first + token) * layer.outputs + tile * TILE..][..TILE];
            #[expect(unsafe_code, reason = "2 × 8 f32 written within `at`, checked by the slice")]
            unsafe {
                _mm256_storeu_ps(at.as_mut_ptr(), sums[0]);
                _mm256_storeu_ps(at[HALF..].as_mut_ptr(), sums[1]);
            }
        }
    }

    fn words_of(slice: &[i32]) -> [i32; GROUPS] {
        slice.try_into().expect("a block's groups")
    }
}

#[inline(always)]
fn layer_norm(x: &mut [f32], width: usize, norm: &Norm) {
    for row in x.chunks_mut(width) {
        let mean = dot(row, &norm.ones[..width]) / width as f32;
        row.iter_mut().for_each(|v| *v -= mean);
        let variance = dot(row, row) / width as f32;
        let inverse = 1.0 / (variance + norm.epsilon).sqrt();
        for ((v, gain), bias) in row.iter_mut().zip(&norm.weight).zip(&norm.bias) {
            *v = *v * inverse * gain + bias;
        }
    }
}

#[derive(Debug)]
struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
    epsilon: f32,
    /// As many ones as weights: a row's sum is its dot product with them.
    ones: Vec<f32>,
}

/// GELU in the erf form BERT uses, `0.5 x (1 + erf(x / √2))`, with erf by
/// Abramowitz and Stegun's 7.1.28 (error below 3e-7): a polynomial and a
/// division, which the compiler turns into SIMD (a call to `erf` or `exp`
/// per value would not be).
#[inline(always)]
fn gelu(values: &mut [f32]) {
    const A: [f32; 6] = [
        0.070_523_08,
        0.042_282_01,
        0.009_270_527,
        0.000_152_014_3,
        0.000_276_567_2,
        0.000_043_063_8,
    ];
    for v in values {
        let z = v.abs() * std::f32::consts::FRAC_1_SQRT_2;
        let p = 1.0 + z * (A[0] + z * (A[1] + z * (A[2] + z * (A[3] + z * (A[4] + z * A[5])))));
        let p2 = p * p;
        let p4 = p2 * p2;
        let p8 = p4 * p4;
        let erf = 1.0 - 1.0 / (p8 * p8);
        *v = 0.5 * *v * (1.0 + erf.copysign(*v));
    }
}

/// One transformer layer.
#[derive(Debug)]
struct Layer {
    /// Query, key and value in one product (`3 × hidden` outputs).
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

/// The shape of a BERT model.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub hidden: usize,
    pub heads: usize,
    pub layers: usize,
    pub epsilon: f32,
}

/// BERT's encoder in 8 bits, for one text at a time.
#[derive(Debug)]
pub struct Int8Bert {
    shape: Shape,
    kernel: Kernel,
    /// Word embeddings in `i8`, one scale per word.
    words: Vec<i8>,
    word_scales: Vec<f32>,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
}

/// The tensors of a model by name, as `f32`.
pub type Tensors = HashMap<String, Tensor>;

fn read(tensors: &Tensors, prefix: &str, name: &str) -> Result<Vec<f32>, String> {
    let key = format!("{prefix}{name}");
    let tensor = tensors.get(&key).ok_or_else(|| format!("no tensor {key}"))?;
    tensor
        .flatten_all()
        .and_then(|t| t.to_dtype(candle_core::DType::F32))
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(|e| format!("{key}: {e}"))
}

impl Int8Bert {
    /// Builds the 8-bit encoder from a BERT checkpoint's tensors (with or
    /// without a `bert.` prefix); an error names what is missing or does not fit.
    pub fn new(tensors: &Tensors, shape: Shape, kernel: Kernel) -> Result<Self, String> {
        let prefix = if tensors.contains_key("embeddings.word_embeddings.weight") {
            ""
        } else {
            "bert."
        };
        let get = |name: &str| read(tensors, prefix, name);
        let hidden = shape.hidden;
        let norm = |name: &str| -> Result<Norm, String> {
            let weight = get(&format!("{name}.weight"))?;
            if weight.len() != hidden {
                return Err(format!(
                    "{name}: {} weights for a hidden size of {hidden}",
                    weight.len()
                ));
            }
            Ok(Norm {
                ones: vec![1.0; weight.len()],
                weight,
                bias: get(&format!("{name}.bias"))?,
                epsilon: shape.epsilon,
            })
        };
        // Outputs stacked: the rows of each name's weight, one after the other.
        let linear = |names: &[&str]| -> Result<Linear, String> {
            let mut weight = Vec::new();
            let mut bias = Vec::new();
            for name in names {
                weight.extend(get(&format!("{name}.weight"))?);
                bias.extend(get(&format!("{name}.bias"))?);
            }
            let outputs = bias.len();
            let inputs = weight.len() / outputs.max(1);
            Linear::new(&weight, bias, outputs, inputs)
                .ok_or_else(|| format!("{}: {outputs} × {inputs} does not fit 16 × 32 tiles", names[0]))
        };
        let (words, word_scales) = quantize_rows(&get("embeddings.word_embeddings.weight")?, hidden);
        let layers = (0..shape.layers)
            .map(|index| {
                let at = |name: &str| format!("encoder.layer.{index}.{name}");
                Ok(Layer {
                    qkv: linear(&[
                        &at("attention.self.query"),
                        &at("attention.self.key"),
                        &at("attention.self.value"),
                    ])?,
                    attention_out: linear(&[&at("attention.output.dense")])?,
                    attention_norm: norm(&at("attention.output.LayerNorm"))?,
                    intermediate: linear(&[&at("intermediate.dense")])?,
                    output: linear(&[&at("output.dense")])?,
                    output_norm: norm(&at("output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let fits = |layer: &Linear, inputs: usize, outputs: usize| layer.inputs == inputs && layer.outputs == outputs;
        if !hidden.is_multiple_of(shape.heads)
            || !layers.iter().all(|layer| {
                let inner = layer.intermediate.outputs;
                fits(&layer.qkv, hidden, 3 * hidden)
                    && fits(&layer.attention_out, hidden, hidden)
                    && fits(&layer.intermediate, hidden, inner)
                    && fits(&layer.output, inner, hidden)
            })
        {
            return Err(format!(
                "the layers' shapes do not fit a hidden size of {hidden} in {} heads",
                shape.heads
            ));
        }
        Ok(Self {
            shape,
            kernel,
            words,
            word_scales,
            positions: get("embeddings.position_embeddings.weight")?,
            token_type: get("embeddings.token_type_embeddings.weight")?[..hidden].to_vec(),
            embedding_norm: norm("embeddings.LayerNorm")?,
            layers,
        })
    }

    /// Returns the last layer's token vectors (`ids.len() × hidden`) for one
    /// text's token ids; ids beyond the vocabulary or the positions are refused.
    ///
    /// The float steps between the products (quantizing each layer's
    /// input, norms, attention, GELU) are compiled for the kernel's CPU as
    /// well: in the x86-64 baseline they took a third of a query's time.
    pub fn forward(&self, ids: &[u32]) -> Result<Vec<f32>, String> {
        self.forward_rows(ids, ids.len())
    }

    /// The last layer's vector of the first token only (`hidden` values):
    /// what a model pooled by its `[CLS]` token reads. The last layer
    /// still computes every token's keys and values, but its attention,
    /// its later products, norms and GELU run for that one row (of
    /// bge-small's 12 layers, most of one).
    pub fn forward_first(&self, ids: &[u32]) -> Result<Vec<f32>, String> {
        self.forward_rows(ids, ids.len().min(1))
    }

    /// Every layer for all of `ids`, the last for its first `rows` tokens.
    fn forward_rows(&self, ids: &[u32], rows: usize) -> Result<Vec<f32>, String> {
        #[cfg(target_arch = "x86_64")]
        match self.kernel {
            Kernel::Vnni if Kernel::detect() == Kernel::Vnni => {
                #[expect(unsafe_code, reason = "the CPU's AVX-512 support is checked just above")]
                return unsafe { self.forward_avx512(ids, rows) };
            }
            Kernel::Avx2 if Kernel::detect() != Kernel::Portable => {
                #[expect(unsafe_code, reason = "the CPU's AVX2 and FMA support is checked just above")]
                return unsafe { self.forward_avx2(ids, rows) };
            }
            _ => {}
        }
        self.forward_steps(ids, rows)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
    fn forward_avx512(&self, ids: &[u32], rows: usize) -> Result<Vec<f32>, String> {
        self.forward_steps(ids, rows)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn forward_avx2(&self, ids: &[u32], rows: usize) -> Result<Vec<f32>, String> {
        self.forward_steps(ids, rows)
    }

    /// [`Int8Bert::forward`]'s steps, inlined into each CPU's copy.
    #[inline(always)]
    fn forward_steps(&self, ids: &[u32], rows: usize) -> Result<Vec<f32>, String> {
        let hidden = self.shape.hidden;
        let tokens = ids.len();
        if tokens * hidden > self.positions.len() {
            return Err(format!("{tokens} tokens exceed the model's positions"));
        }
        let mut x = Vec::with_capacity(tokens * hidden);
        for (position, &id) in ids.iter().enumerate() {
            let id = id as usize;
            let word = self
                .words
                .get(id * hidden..(id + 1) * hidden)
                .ok_or_else(|| format!("token id {id} is outside the vocabulary"))?;
            let scale = self.word_scales[id];
            let position = &self.positions[position * hidden..][..hidden];
            x.extend(
                word.iter()
                    .zip(position)
                    .zip(&self.token_type)
                    .map(|((&w, p), t)| f32::from(w) * scale + p + t),
            );
        }
        layer_norm(&mut x, hidden, &self.embedding_norm);
        for (index, layer) in self.layers.iter().enumerate() {
            let qkv = layer.qkv.forward(self.kernel, &x);
            // Every token's keys and values, but the last layer's output
            // only for the rows asked for.
            let queries = if index + 1 == self.layers.len() { rows } else { tokens };
            x.truncate(queries * hidden);
            let context = self.attention(&qkv, tokens, queries);
            let mut attended = layer.attention_out.forward(self.kernel, &context);
            attended.iter_mut().zip(&x).for_each(|(a, x)| *a += x);
            layer_norm(&mut attended, hidden, &layer.attention_norm);
            let mut inner = layer.intermediate.forward(self.kernel, &attended);
            gelu(&mut inner);
            let mut out = layer.output.forward(self.kernel, &inner);
            out.iter_mut().zip(&attended).for_each(|(o, a)| *o += a);
            layer_norm(&mut out, hidden, &layer.output_norm);
            x = out;
        }
        x.truncate(rows * hidden);
        Ok(x)
    }

    /// Self-attention over every token (one text, no padding) from the
    /// fused query/key/value rows, for the first `queries` tokens; returns
    /// the heads' contexts side by side (`queries × hidden`).
    ///
    /// Per head the keys are laid out by dimension (`width × tokens`,
    /// scaled by `1/√width`), so a query's scores are `width` products
    /// across all keys at once, and [`exp`] is a polynomial the compiler
    /// vectorizes: a dot product per key with `expf` per weight took half
    /// of a 256-token text's time (docs/benchmarks.md).
    #[inline(always)]
    fn attention(&self, qkv: &[f32], tokens: usize, queries: usize) -> Vec<f32> {
        let hidden = self.shape.hidden;
        let width = hidden / self.shape.heads;
        let scale = 1.0 / (width as f32).sqrt();
        let stride = tokens.next_multiple_of(SCORES);
        let mut context = vec![0f32; queries * hidden];
        let mut keys = vec![0f32; width * stride];
        let mut values = vec![0f32; tokens * width];
        let mut weights = vec![0f32; stride];
        for head in 0..self.shape.heads {
            let at = head * width;
            for (key, row) in qkv.chunks_exact(3 * hidden).enumerate() {
                for (dimension, &value) in row[hidden + at..][..width].iter().enumerate() {
                    keys[dimension * stride + key] = value * scale;
                }
                values[key * width..][..width].copy_from_slice(&row[2 * hidden + at..][..width]);
            }
            for query in 0..queries {
                scores(&qkv[query * 3 * hidden + at..][..width], &keys, &mut weights);
                let weights = &mut weights[..tokens];
                let high = lanes(weights, f32::NEG_INFINITY, f32::max);
                weights.iter_mut().for_each(|weight| *weight = exp(*weight - high));
                let inverse = 1.0 / lanes(weights, 0.0, |sum, weight| sum + weight);
                let out = &mut context[query * hidden + at..][..width];
                weighted_sum(weights, &values, out);
                out.iter_mut().for_each(|o| *o *= inverse);
            }
        }
        context
    }
}

/// Keys scored at once in the smallest block: one register of 16 on
/// AVX-512; blocks of four of them go first, each summed over the query's
/// dimensions without leaving its registers.
const SCORES: usize = 16;

/// A query's score against every key, `keys` laid out by dimension
/// (`q.len()` rows of `out.len()`, a multiple of [`SCORES`]): per four
/// blocks of keys, the dimensions' products summed in registers.
#[inline(always)]
fn scores(q: &[f32], keys: &[f32], out: &mut [f32]) {
    let stride = out.len();
    let mut blocks = out.chunks_exact_mut(4 * SCORES);
    for (index, out) in (&mut blocks).enumerate() {
        score_block::<{ 4 * SCORES }>(q, keys, stride, index * 4 * SCORES, out);
    }
    let done = stride - blocks.into_remainder().len();
    for (index, out) in out[done..].chunks_exact_mut(SCORES).enumerate() {
        score_block::<SCORES>(q, keys, stride, done + index * SCORES, out);
    }
}

#[inline(always)]
fn score_block<const N: usize>(q: &[f32], keys: &[f32], stride: usize, first: usize, out: &mut [f32]) {
    let mut sums = [0f32; N];
    for (&q, row) in q.iter().zip(keys.chunks_exact(stride)) {
        let row: &[f32; N] = row[first..first + N].try_into().expect("a block of keys");
        sums.iter_mut().zip(row).for_each(|(sum, k)| *sum = q.mul_add(*k, *sum));
    }
    out.copy_from_slice(&sums);
}

/// `out = Σ weightᵢ × valuesᵢ` for rows of `out.len()` values, four rows
/// a step: added one row at a time, each step waits on the one before (a
/// softmax over 256 keys is 256 steps deep).
#[inline(always)]
fn weighted_sum(weights: &[f32], values: &[f32], out: &mut [f32]) {
    let width = out.len();
    out.fill(0.0);
    let mut fours = weights.chunks_exact(4).zip(values.chunks_exact(4 * width));
    for (w, rows) in &mut fours {
        let (a, rest) = rows.split_at(width);
        let (b, rest) = rest.split_at(width);
        let (c, d) = rest.split_at(width);
        for ((((o, a), b), c), d) in out.iter_mut().zip(a).zip(b).zip(c).zip(d) {
            *o += w[1].mul_add(*b, w[0] * a) + w[3].mul_add(*d, w[2] * c);
        }
    }
    let done = weights.len() / 4 * 4;
    for (weight, row) in weights[done..].iter().zip(values[done * width..].chunks_exact(width)) {
        out.iter_mut().zip(row).for_each(|(o, v)| *o += weight * v);
    }
}

/// `values` folded by `join` in 16 running lanes, then the lanes: a sum
/// or maximum in order is as deep as it is long and is not vectorized.
#[inline(always)]
fn lanes(values: &[f32], start: f32, join: impl Fn(f32, f32) -> f32) -> f32 {
    const LANES: usize = 16;
    let mut lanes = [start; LANES];
    let chunks = values.chunks_exact(LANES);
    let tail = chunks.remainder().iter().fold(start, |all, &value| join(all, value));
    for chunk in chunks {
        lanes
            .iter_mut()
            .zip(chunk)
            .for_each(|(lane, &value)| *lane = join(*lane, value));
    }
    lanes.into_iter().fold(tail, &join)
}

/// `e^x` for `x ≤ 0` (a softmax's shifted scores), to within 3e-7
/// relative: `x = n ln 2 + r` with `|r| ≤ ln 2 / 2`, Cephes' `expf`
/// polynomial for `e^r`, and `2^n` put in the exponent's bits. No call and
/// no branch, so a loop of it is vectorized. `x` is clamped to −87..0 (a
/// NaN to −87): below, `e^x` is 0 as far as a softmax is concerned (e⁻⁸⁷
/// ≈ 1.6e-38 is returned), and above 0 the exponent would not fit.
#[inline(always)]
fn exp(x: f32) -> f32 {
    /// 1.5 × 2²³: adding it rounds to an integer held in the low bits.
    const ROUND: f32 = 12_582_912.0;
    #[expect(clippy::manual_clamp, reason = "`clamp` would keep a NaN")]
    let x = x.max(-87.0).min(0.0);
    let shifted = x * std::f32::consts::LOG2_E + ROUND;
    let n = shifted - ROUND;
    let whole = shifted.to_bits().wrapping_sub(ROUND.to_bits()) as i32;
    let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 0.166_666_65;
    let p = p * r + 0.5;
    let er = p * r * r + r + 1.0;
    er * f32::from_bits(((whole + 127) << 23) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random sequence in −1..1.
    fn noise(seed: u64, count: usize) -> Vec<f32> {
        let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (0..count)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    fn float_product(x: &[f32], weight: &[f32], bias: &[f32], inputs: usize) -> Vec<f32> {
        x.chunks(inputs)
            .flat_map(|row| {
                weight
                    .chunks(inputs)
                    .zip(bias)
                    .map(move |(w, b)| row.iter().zip(w).map(|(x, w)| x * w).sum::<f32>() + b)
            })
            .collect()
    }

    #[test]
    fn an_8_bit_product_stays_within_a_percent_of_the_float_one_on_every_kernel() {
        let (outputs, inputs) = (48, 96);
        let weight = noise(1, outputs * inputs);
        let bias = noise(2, outputs);
        let layer = Linear::new(&weight, bias.clone(), outputs, inputs).unwrap();
        // 1 to 11 tokens: a kernel call of each width, and one of 8 plus a remainder.
        for tokens in [1, 2, 3, 5, 8, 11] {
            let mut x = noise(3 + tokens as u64, tokens * inputs);
            // The last token has an outlier in its second block: a scale per
            // 32 inputs costs that block's precision, not the token's.
            x[(tokens - 1) * inputs + 40] = 40.0;
            let exact = float_product(&x, &weight, &bias, inputs);
            let portable = layer.forward(Kernel::Portable, &x);
            for (token, (exact, portable)) in exact.chunks(outputs).zip(portable.chunks(outputs)).enumerate() {
                let spread = exact.iter().map(|v| v * v).sum::<f32>().sqrt();
                let error = exact
                    .iter()
                    .zip(portable)
                    .map(|(a, b)| (a - b) * (a - b))
                    .sum::<f32>()
                    .sqrt();
                let bound = if token + 1 == tokens { 0.03 } else { 0.01 };
                assert!(
                    error < bound * spread,
                    "token {token} of {tokens}: error {error} of {spread}"
                );
            }
            for kernel in Kernel::available() {
                let fast = layer.forward(kernel, &x);
                for (a, b) in portable.iter().zip(&fast) {
                    assert!(
                        (a - b).abs() <= 1e-4 * (1.0 + a.abs()),
                        "{kernel:?}, {tokens} tokens: {a} vs {b}"
                    );
                }
            }
        }
    }

    /// A small BERT's tensors (hidden 64 in 2 heads, 2 layers) from noise.
    fn small_bert() -> (Tensors, Shape) {
        let (hidden, inner, vocabulary, positions) = (64, 128, 40, 80);
        let mut tensors = Tensors::new();
        let mut seed = 7;
        let mut put = |name: String, rows: usize, columns: usize, scale: f32| {
            seed += 1;
            let values: Vec<f32> = noise(seed, rows * columns).iter().map(|v| v * scale).collect();
            let tensor = Tensor::from_vec(values, rows * columns, &candle_core::Device::Cpu).unwrap();
            tensors.insert(name, tensor);
        };
        put("embeddings.word_embeddings.weight".into(), vocabulary, hidden, 1.0);
        put("embeddings.position_embeddings.weight".into(), positions, hidden, 0.1);
        put("embeddings.token_type_embeddings.weight".into(), 2, hidden, 0.1);
        let norm = |put: &mut dyn FnMut(String, usize, usize, f32), name: &str| {
            put(format!("{name}.weight"), 1, hidden, 0.1);
            put(format!("{name}.bias"), 1, hidden, 0.1);
        };
        norm(&mut put, "embeddings.LayerNorm");
        for layer in 0..2 {
            let at = |name: &str| format!("encoder.layer.{layer}.{name}");
            for (name, outputs, inputs) in [
                ("attention.self.query", hidden, hidden),
                ("attention.self.key", hidden, hidden),
                ("attention.self.value", hidden, hidden),
                ("attention.output.dense", hidden, hidden),
                ("intermediate.dense", inner, hidden),
                ("output.dense", hidden, inner),
            ] {
                put(at(&format!("{name}.weight")), outputs, inputs, 0.2);
                put(at(&format!("{name}.bias")), 1, outputs, 0.1);
            }
            norm(&mut put, &at("attention.output.LayerNorm"));
            norm(&mut put, &at("output.LayerNorm"));
        }
        let shape = Shape {
            hidden,
            heads: 2,
            layers: 2,
            epsilon: 1e-12,
        };
        (tensors, shape)
    }

    /// The whole encoder, whichever copy of its float steps the kernel
    /// picks (AVX-512, AVX2 with FMA, the baseline), gives the same vectors.
    #[test]
    fn every_kernels_encoder_gives_the_portable_vectors() {
        let (tensors, shape) = small_bert();
        let portable = Int8Bert::new(&tensors, shape, Kernel::Portable).unwrap();
        // Up to blocks of 64 keys and past them, in every copy of attention.
        for tokens in [1, 5, 9, 16, 49, 64, 70] {
            let ids: Vec<u32> = (0..tokens).map(|at| (at * 7 % 40) as u32).collect();
            let expected = portable.forward(&ids).unwrap();
            for kernel in Kernel::available() {
                let vectors = Int8Bert::new(&tensors, shape, kernel).unwrap().forward(&ids).unwrap();
                assert_eq!(vectors.len(), expected.len());
                for (a, b) in expected.iter().zip(&vectors) {
                    assert!(
                        (a - b).abs() <= 1e-3 * (1.0 + a.abs()),
                        "{kernel:?}, {tokens} tokens: {a} vs {b}"
                    );
                }
            }
        }
    }

    /// The first token's vector alone is the first row of every token's.
    #[test]
    fn the_first_tokens_vector_alone_is_the_first_row_of_all() {
        let (tensors, shape) = small_bert();
        for kernel in Kernel::available() {
            let bert = Int8Bert::new(&tensors, shape, kernel).unwrap();
            for tokens in [1, 6, 20, 64, 70] {
                let ids: Vec<u32> = (0..tokens).map(|at| (at * 11 % 40) as u32).collect();
                let all = bert.forward(&ids).unwrap();
                let first = bert.forward_first(&ids).unwrap();
                // Row by row, the same arithmetic: the same bits.
                assert_eq!(first, all[..shape.hidden], "{kernel:?}, {tokens} tokens");
            }
        }
    }

    /// Attention by blocks of keys, [`exp`] and running lanes gives what
    /// the textbook's softmax(q·k/√d)·v gives in `f64`, for lengths that
    /// end inside a block, on a block and past several.
    #[test]
    fn attention_is_the_textbook_softmax_of_scaled_products() {
        let (tensors, shape) = small_bert();
        let bert = Int8Bert::new(&tensors, shape, Kernel::Portable).unwrap();
        let hidden = shape.hidden;
        let width = hidden / shape.heads;
        for tokens in [1, 3, 16, 17, 64, 70, 131] {
            let qkv: Vec<f32> = noise(tokens as u64, tokens * 3 * hidden)
                .iter()
                .map(|v| v * 4.0)
                .collect();
            for queries in [1, tokens] {
                let context = bert.attention(&qkv, tokens, queries);
                assert_eq!(context.len(), queries * hidden);
                for head in 0..shape.heads {
                    let at = head * width;
                    for query in 0..queries {
                        let row = |token: usize, part: usize| &qkv[token * 3 * hidden + part * hidden + at..][..width];
                        let scores: Vec<f64> = (0..tokens)
                            .map(|key| {
                                let dot: f64 = row(query, 0)
                                    .iter()
                                    .zip(row(key, 1))
                                    .map(|(q, k)| f64::from(q * k))
                                    .sum();
                                dot / (width as f64).sqrt()
                            })
                            .collect();
                        let high = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                        let weights: Vec<f64> = scores.iter().map(|s| (s - high).exp()).collect();
                        let total: f64 = weights.iter().sum();
                        for dimension in 0..width {
                            let expected: f64 = (0..tokens)
                                .map(|key| weights[key] / total * f64::from(row(key, 2)[dimension]))
                                .sum();
                            let got = f64::from(context[query * hidden + at + dimension]);
                            assert!(
                                (got - expected).abs() <= 1e-4 * (1.0 + expected.abs()),
                                "{tokens} tokens, head {head}, query {query}: {got} vs {expected}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn exp_matches_its_definition_where_a_softmax_reads_it() {
        for step in 0..=90_000 {
            let x = -(step as f32) / 1_000.0;
            let exact = f64::from(x).exp();
            let got = f64::from(exp(x));
            if x >= -87.0 {
                assert!((got - exact).abs() <= 3e-7 * exact, "exp({x}) = {got} vs {exact}");
            } else {
                assert!(got <= 1e-37, "exp({x}) = {got}");
            }
        }
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(f32::NEG_INFINITY) <= 1e-37);
        assert!(exp(f32::NAN) <= 1e-37, "a NaN score weighs nothing");
        assert_eq!(exp(5.0), 1.0, "above 0 is clamped to 0");
    }

    #[test]
    fn sizes_that_do_not_fit_the_tiles_are_refused() {
        assert!(Linear::new(&[0.0; 16 * 30], vec![0.0; 16], 16, 30).is_none());
        assert!(Linear::new(&[0.0; 15 * 32], vec![0.0; 15], 15, 32).is_none());
        assert!(Linear::new(&[0.0; 16 * 32], vec![0.0; 16], 16, 32).is_some());
    }

    /// erf(x) to within 1.2e-7 in `f64` (Numerical Recipes' `erfc` by
    /// Chebyshev fit): the reference for [`gelu`].
    fn erf(x: f64) -> f64 {
        let z = x.abs();
        let t = 1.0 / (1.0 + 0.5 * z);
        let inner = 1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77)))))));
        let erfc = t * (-z * z - 1.265_512_23 + t * inner).exp();
        if x >= 0.0 { 1.0 - erfc } else { erfc - 1.0 }
    }

    #[test]
    fn gelu_matches_its_definition() {
        assert!((erf(0.5) - 0.520_499_877_813_046_5).abs() < 2e-7);
        assert!((erf(-2.0) + 0.995_322_265_018_952_7).abs() < 2e-7);
        let mut values: Vec<f32> = (-2_000..=2_000).map(|i| i as f32 / 100.0).collect();
        values.extend([-1e30, -100.0, 1e-8, 100.0, 1e30]);
        let mut computed = values.clone();
        gelu(&mut computed);
        for (x, value) in values.iter().zip(&computed) {
            let x64 = f64::from(*x);
            let exact = 0.5 * x64 * (1.0 + erf(x64 / std::f64::consts::SQRT_2));
            let error = (f64::from(*value) - exact).abs();
            assert!(error <= 4e-6 * x64.abs().max(1.0), "gelu({x}) = {value} vs {exact}");
        }
    }
}
