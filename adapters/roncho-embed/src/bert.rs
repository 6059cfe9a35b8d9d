//! `BertEmbedder`: a BERT sentence model (all-MiniLM-L6-v2 by default) run
//! in process with candle, from a directory holding `config.json`,
//! `tokenizer.json` and `model.safetensors`. Pooled as the directory's
//! sentence-transformers `1_Pooling/config.json` says (the mean over the
//! attention mask when it says nothing, as all-MiniLM-L6-v2; the `[CLS]`
//! token for the bge models), then L2 normalisation, as sentence-transformers
//! does. Nothing is fetched at run time.
//!
//! A search query (one short text) is embedded by an 8-bit copy of the
//! encoder where the CPU has AVX-512 VNNI or AVX2 ([`crate::int8`]): its vectors
//! agree with the float model's to a cosine of 0.9997 (bge-small), at a
//! fraction of the time. Stored texts take it too, where configured (the
//! default), one text at a time on each core; else the float model in
//! passes of texts of like length.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, HiddenAct};
use roncho_core::embed::{Embedder, normalize, whole};
use roncho_core::{Error, Result};
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

use crate::int8::{Int8Bert, Kernel, Shape};

/// Longest input in tokens; all-MiniLM-L6-v2 was trained on 256.
const MAX_TOKENS: usize = 256;
/// Texts per forward pass.
const BATCH: usize = 32;
/// Tokens of text a pass reads (the window less `[CLS]` and `[SEP]`): a
/// longer text is cut into passages.
const WINDOW_TOKENS: usize = MAX_TOKENS - 2;
/// Tokens of a passage of a long text. Half the window: one vector pools
/// what its tokens say, and a fact told in a paragraph of a 250-token
/// plan was outweighed by the steps around it (`e2e::long_message`); the
/// tokens embedded in all grow by the overlap only, and shorter passes
/// cost less attention each.
const PASSAGE_TOKENS: usize = 128;
/// Tokens each passage repeats of the one before: a sentence cut by one
/// passage's end is read whole by the next.
const PASSAGE_OVERLAP: usize = 16;
/// The most passages a text is embedded as: 4,000 tokens of 128-token
/// passages, the longest message of the long-conversation sets (14,000
/// characters) whole.
const MOST_PASSAGES: usize = 32;

/// The token ranges of the passages of a text of `tokens` tokens: `size`
/// tokens each, each starting `overlap` before the one before ends; past
/// [`MOST_PASSAGES`], that many window-long passages spread evenly from the
/// first token to the last (gaps between them, for a bounded cost).
fn token_windows(tokens: usize, size: usize, overlap: usize) -> Vec<std::ops::Range<usize>> {
    let stride = size - overlap;
    let count = tokens.saturating_sub(overlap).div_ceil(stride).max(1);
    if count <= MOST_PASSAGES {
        return (0..count)
            .map(|at| at * stride..(at * stride + size).min(tokens))
            .collect();
    }
    let size = WINDOW_TOKENS.min(tokens);
    let span = tokens - size;
    (0..MOST_PASSAGES)
        .map(|at| {
            let start = span * at / (MOST_PASSAGES - 1);
            start..start + size
        })
        .collect()
}

/// The files a model directory must hold.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Returns whether `dir` holds a loadable model.
pub fn is_model_dir(dir: &Path) -> bool {
    MODEL_FILES.iter().all(|file| dir.join(file).is_file())
}

/// How a text's token vectors become one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pooling {
    /// The mean over the tokens the attention mask keeps.
    Mean,
    /// The first token's (`[CLS]`) vector.
    Cls,
}

impl Pooling {
    /// Reads sentence-transformers' `1_Pooling/config.json` in `dir`; a
    /// directory without it pools by the mean.
    fn of(dir: &Path) -> Result<Self> {
        let path = dir.join("1_Pooling").join("config.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(Pooling::Mean);
        };
        let config: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| model_error(dir, "1_Pooling/config.json", e))?;
        let set = |key: &str| config[key].as_bool().unwrap_or(false);
        match (set("pooling_mode_cls_token"), set("pooling_mode_mean_tokens")) {
            (true, false) => Ok(Pooling::Cls),
            (false, true) => Ok(Pooling::Mean),
            _ => Err(model_error(
                dir,
                "1_Pooling/config.json",
                "exactly one of pooling_mode_cls_token and pooling_mode_mean_tokens must be true",
            )),
        }
    }
}

/// How search queries, or stored texts, are embedded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryPrecision {
    /// The 8-bit copy of the encoder, where the CPU runs its fast kernel
    /// (else the float model).
    Int8,
    /// The float model.
    Float,
}

struct Loaded {
    model: BertModel,
    tokenizer: Tokenizer,
    /// The tokenizer without truncation or padding, which cuts long texts into passages.
    splitter: Tokenizer,
    pooling: Pooling,
    /// The 8-bit encoder, when queries or stored texts take it.
    int8: Option<Int8Bert>,
    /// Whether search queries take the 8-bit encoder.
    queries_int8: bool,
    /// Whether stored texts take it, each text on its own, spread over
    /// every core.
    documents_int8: bool,
}

/// The local BERT embedder.
#[derive(Clone)]
pub struct BertEmbedder {
    loaded: Arc<Loaded>,
    dimensions: usize,
    model_id: String,
    /// CPU-bound: one bulk forward pass (the reconciler's batches) at a time
    /// keeps a core for serving.
    bulk: Arc<tokio::sync::Semaphore>,
    /// Search queries (a few texts) take their own lane, so a query never
    /// waits behind a background batch (~0.25 s for 64 texts on 2 cores).
    interactive: Arc<tokio::sync::Semaphore>,
    /// Who waits on the model: queries at work, and stored texts waiting
    /// for or holding the bulk lane; background work waits for neither.
    demand: Arc<Demand>,
}

/// A thread's share of a pass: each text's index and its 8-bit vector
/// (`None`: a text for the float model).
type Share = Vec<(usize, Option<Vec<f32>>)>;

/// Who waits on the model now.
#[derive(Debug, Default)]
struct Demand {
    /// Interactive calls (queries) being embedded: a bulk pass gives them
    /// every core but one.
    queries: std::sync::atomic::AtomicUsize,
    /// Stored texts' calls waiting for or holding the bulk lane: background
    /// calls wait until there are none.
    stored: std::sync::atomic::AtomicUsize,
    /// Told when a stored texts' call ends.
    stored_done: tokio::sync::Notify,
    /// When the last stored texts' call ended.
    stored_ended: std::sync::Mutex<Option<std::time::Instant>>,
}

/// How long no stored texts' call must have run before background work
/// takes the model: the reconciler's passes follow each other closer than
/// this while it has a backlog.
const QUIET_BEFORE_BACKGROUND: std::time::Duration = std::time::Duration::from_millis(250);
/// The longest background work waits for that quiet, per pass: the
/// deriver holds its task's lease meanwhile.
const MOST_BACKGROUND_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// Texts per background pass: the stored texts' next call waits for one
/// at most.
const BACKGROUND_PASS: usize = 8;

impl Demand {
    /// Whether stored texts wait for the model, or did a moment ago.
    fn stored_busy(&self) -> bool {
        let ended = *self
            .stored_ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.stored.load(std::sync::atomic::Ordering::SeqCst) > 0
            || ended.is_some_and(|ended| ended.elapsed() < QUIET_BEFORE_BACKGROUND)
    }
}

/// Counts a call in one of [`Demand`]'s counters while it lives.
struct Counted<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Counted<'a> {
    fn new(counter: &'a std::sync::atomic::AtomicUsize) -> Self {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self(counter)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Queries of up to this many tokens (with `[CLS]` and `[SEP]`: a word)
/// take the float model: with so few token vectors to average, the 8-bit
/// copy's rounding shows (all-MiniLM-L6-v2's vector of "x" at cosine 0.9987
/// of the float one, against 0.9996 from four tokens on), and the float
/// model's cost is smallest there.
const FLOAT_QUERY_TOKENS: usize = 3;

/// Texts per call up to which a call is interactive.
const INTERACTIVE_TEXTS: usize = 4;

impl std::fmt::Debug for BertEmbedder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("BertEmbedder")
            .field("model_id", &self.model_id)
            .finish_non_exhaustive()
    }
}

fn model_error(dir: &Path, what: &str, error: impl std::fmt::Display) -> Error {
    Error::FailedPrecondition(format!(
        "cannot load the embedding model in {}: {what}: {error}",
        dir.display()
    ))
}

impl BertEmbedder {
    /// Loads the model in `dir`, queries in 8 bits where the CPU runs them
    /// fast (blocking: call it off the async runtime).
    pub fn load(dir: &Path) -> Result<Self> {
        Self::load_with(dir, QueryPrecision::Int8)
    }

    /// Loads the model in `dir` with queries embedded at `precision`,
    /// stored texts by the float model.
    pub fn load_with(dir: &Path, precision: QueryPrecision) -> Result<Self> {
        Self::load_with_precisions(dir, precision, QueryPrecision::Float)
    }

    /// Loads the model in `dir` with queries embedded at `queries` and
    /// stored texts at `documents`.
    pub fn load_with_precisions(dir: &Path, queries: QueryPrecision, documents: QueryPrecision) -> Result<Self> {
        let config_text =
            std::fs::read_to_string(dir.join("config.json")).map_err(|e| model_error(dir, "config.json", e))?;
        let config: Config = serde_json::from_str(&config_text).map_err(|e| model_error(dir, "config.json", e))?;
        let dimensions = serde_json::from_str::<serde_json::Value>(&config_text)
            .ok()
            .and_then(|value| value["hidden_size"].as_u64())
            .ok_or_else(|| model_error(dir, "config.json", "no hidden_size"))? as usize;
        let mut tokenizer =
            Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| model_error(dir, "tokenizer.json", e))?;
        let mut splitter = tokenizer.clone();
        splitter.with_padding(None);
        splitter
            .with_truncation(None)
            .map_err(|e| model_error(dir, "tokenizer.json", e))?;
        tokenizer.with_padding(Some(PaddingParams::default()));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| model_error(dir, "tokenizer.json", e))?;
        let weights: PathBuf = dir.join("model.safetensors");
        // The weights file is read-only for the life of the process.
        #[expect(
            unsafe_code,
            reason = "memory-mapping a read-only safetensors file, as candle requires"
        )]
        let builder =
            unsafe { VarBuilder::from_mmaped_safetensors(std::slice::from_ref(&weights), DType::F32, &Device::Cpu) }
                .map_err(|e| model_error(dir, "model.safetensors", e))?;
        let model = BertModel::load(builder, &config).map_err(|e| model_error(dir, "model.safetensors", e))?;
        let pooling = Pooling::of(dir)?;
        let wanted = queries == QueryPrecision::Int8 || documents == QueryPrecision::Int8;
        let int8 = match wanted && Kernel::detect() != Kernel::Portable {
            true => int8_encoder(&weights, &config, Kernel::detect()),
            false => None,
        };
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("bert");
        Ok(Self {
            loaded: Arc::new(Loaded {
                model,
                tokenizer,
                splitter,
                pooling,
                queries_int8: int8.is_some() && queries == QueryPrecision::Int8,
                documents_int8: int8.is_some() && documents == QueryPrecision::Int8,
                int8,
            }),
            dimensions,
            model_id: format!("local/{name}"),
            bulk: Arc::new(tokio::sync::Semaphore::new(1)),
            interactive: Arc::new(tokio::sync::Semaphore::new(2)),
            demand: Arc::default(),
        })
    }

    /// Embeds texts synchronously, in the order of `texts`: by the 8-bit
    /// encoder where stored texts take it, else by the float model.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.embed_pass(texts, false)
    }

    /// [`BertEmbedder::embed_blocking`]; a bulk pass (`yields`) leaves
    /// every core but one to the queries being embedded meanwhile.
    fn embed_pass(&self, texts: &[String], yields: bool) -> Result<Vec<Vec<f32>>> {
        match &self.loaded.int8 {
            Some(encoder) if self.loaded.documents_int8 => self.embed_int8_blocking(encoder, texts, yields),
            _ => self.embed_float_blocking(texts),
        }
    }

    /// Embeds texts by the 8-bit encoder, one text at a time on each core
    /// (its kernel runs one text on one thread), each core taking the
    /// longest text left; texts of a word or two go through the float
    /// model together. In a bulk pass (`yields`) every core but the first
    /// takes no text while a query is being embedded, and the first never
    /// waits, so the pass ends whatever the queries do.
    fn embed_int8_blocking(&self, encoder: &Int8Bert, texts: &[String], yields: bool) -> Result<Vec<Vec<f32>>> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let cores = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(texts.len())
            .max(1);
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&index| std::cmp::Reverse(texts[index].len()));
        let next = AtomicUsize::new(0);
        let failed = std::sync::atomic::AtomicBool::new(false);
        let take = |yields: bool| -> Result<Share> {
            let mut done = Vec::new();
            loop {
                if failed.load(Ordering::SeqCst) {
                    return Ok(done);
                }
                if yields && self.demand.queries.load(Ordering::SeqCst) > 0 {
                    if next.load(Ordering::SeqCst) >= order.len() {
                        return Ok(done);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                }
                let Some(&index) = order.get(next.fetch_add(1, Ordering::SeqCst)) else {
                    return Ok(done);
                };
                // One text failing fails the pass: the other cores stop too.
                let vector = self
                    .embed_int8_one(encoder, &texts[index])
                    .inspect_err(|_| failed.store(true, Ordering::SeqCst))?;
                done.push((index, vector));
            }
        };
        let shares: Vec<Result<Share>> = std::thread::scope(|scope| {
            let others: Vec<_> = (1..cores).map(|_| scope.spawn(|| take(yields))).collect();
            std::iter::once(take(false))
                .chain(others.into_iter().map(|thread| {
                    thread
                        .join()
                        .unwrap_or_else(|_| Err(Error::Internal("an embedding thread panicked".into())))
                }))
                .collect()
        });
        let mut vectors = vec![Vec::new(); texts.len()];
        let mut tiny = Vec::new();
        for (index, vector) in shares.into_iter().collect::<Result<Vec<_>>>()?.into_iter().flatten() {
            match vector {
                Some(vector) => vectors[index] = vector,
                None => tiny.push(index),
            }
        }
        if !tiny.is_empty() {
            let texts: Vec<String> = tiny.iter().map(|&index| texts[index].clone()).collect();
            for (index, vector) in tiny.into_iter().zip(self.embed_float_blocking(&texts)?) {
                vectors[index] = vector;
            }
        }
        Ok(vectors)
    }

    /// One text's vector by the 8-bit encoder; `None` for a text of at
    /// most [`FLOAT_QUERY_TOKENS`] tokens, which the float model embeds.
    fn embed_int8_one(&self, encoder: &Int8Bert, text: &str) -> Result<Option<Vec<f32>>> {
        let encoding = self
            .loaded
            .tokenizer
            .encode(text, true)
            .map_err(|e| Error::Internal(format!("tokenizing a text: {e}")))?;
        let ids = encoding.get_ids();
        if ids.len() <= FLOAT_QUERY_TOKENS {
            return Ok(None);
        }
        let hidden = self.dimensions;
        let failed = |e| Error::Internal(format!("embedding a text: {e}"));
        let mut vector = match self.loaded.pooling {
            Pooling::Cls => encoder.forward_first(ids).map_err(failed)?,
            // One text, no padding: every token counts.
            Pooling::Mean => {
                let tokens = encoder.forward(ids).map_err(failed)?;
                let mut sum = vec![0f32; hidden];
                for token in tokens.chunks(hidden) {
                    sum.iter_mut().zip(token).for_each(|(s, t)| *s += t);
                }
                sum
            }
        };
        normalize(&mut vector);
        Ok(Some(vector))
    }

    /// Embeds texts by the float model, in passes of texts of like length:
    /// a pass is padded to its longest text, so a long message among short
    /// ones would make each of them cost what it costs. The vectors come
    /// back in the order of `texts`.
    fn embed_float_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&index| std::cmp::Reverse(texts[index].len()));
        let mut vectors = vec![Vec::new(); texts.len()];
        for pass in order.chunks(BATCH) {
            let batch: Vec<String> = pass.iter().map(|&index| texts[index].clone()).collect();
            let embedded = self
                .forward(batch)
                .map_err(|e| Error::Internal(format!("embedding forward pass: {e}")))?;
            for (&index, vector) in pass.iter().zip(embedded) {
                vectors[index] = vector;
            }
        }
        Ok(vectors)
    }

    /// The passages of `text`: the whole text when the model reads it at
    /// once ([`WINDOW_TOKENS`]), else passages of [`PASSAGE_TOKENS`]
    /// tokens, each starting [`PASSAGE_OVERLAP`] tokens before the one
    /// before it ends; the first starts at 0. A text of more than
    /// [`MOST_PASSAGES`] such passages gets that many, as long as the window
    /// and spread evenly over it: a message of 25,000 one-token characters
    /// would be 224 passages, each costing what a message does.
    pub fn passage_ranges(&self, text: &str) -> Vec<std::ops::Range<usize>> {
        // Every token covers a byte at least: a text this short fits.
        if text.len() <= WINDOW_TOKENS {
            return whole(text);
        }
        let Ok(encoding) = self.loaded.splitter.encode(text, false) else {
            return whole(text);
        };
        let offsets = encoding.get_offsets();
        if offsets.len() <= WINDOW_TOKENS {
            return whole(text);
        }
        token_windows(offsets.len(), PASSAGE_TOKENS, PASSAGE_OVERLAP)
            .into_iter()
            .enumerate()
            .map(|(at, tokens)| {
                let start = if at == 0 { 0 } else { offsets[tokens.start].0 };
                start..offsets[tokens.end - 1].1
            })
            .collect()
    }

    /// Returns how this embedder embeds search queries.
    pub fn query_precision(&self) -> QueryPrecision {
        if self.loaded.queries_int8 {
            QueryPrecision::Int8
        } else {
            QueryPrecision::Float
        }
    }

    /// Returns how this embedder embeds stored texts.
    pub fn document_precision(&self) -> QueryPrecision {
        if self.loaded.documents_int8 {
            QueryPrecision::Int8
        } else {
            QueryPrecision::Float
        }
    }

    /// Embeds one search query synchronously, by the 8-bit encoder when in use.
    pub fn embed_query_blocking(&self, text: &str) -> Result<Vec<f32>> {
        if let Some(encoder) = self.loaded.int8.as_ref().filter(|_| self.loaded.queries_int8)
            && let Some(vector) = self.embed_int8_one(encoder, text)?
        {
            return Ok(vector);
        }
        Ok(self.embed_float_blocking(&[text.to_owned()])?.pop().unwrap_or_default())
    }

    fn forward(
        &self,
        texts: Vec<String>,
    ) -> std::result::Result<Vec<Vec<f32>>, Box<dyn std::error::Error + Send + Sync>> {
        let encodings = self.loaded.tokenizer.encode_batch(texts, true)?;
        let device = &Device::Cpu;
        let ids: Vec<Tensor> = encodings
            .iter()
            .map(|e| Tensor::new(e.get_ids(), device))
            .collect::<candle_core::Result<_>>()?;
        let masks: Vec<Tensor> = encodings
            .iter()
            .map(|e| Tensor::new(e.get_attention_mask(), device))
            .collect::<candle_core::Result<_>>()?;
        let input_ids = Tensor::stack(&ids, 0)?;
        let attention_mask = Tensor::stack(&masks, 0)?;
        let token_type_ids = input_ids.zeros_like()?;
        let hidden = self
            .loaded
            .model
            .forward(&input_ids, &token_type_ids, Some(&attention_mask))?;
        let pooled = match self.loaded.pooling {
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1)?,
            Pooling::Mean => {
                let mask = attention_mask.to_dtype(DType::F32)?.unsqueeze(2)?;
                let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
                let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
                summed.broadcast_div(&counts)?
            }
        };
        let mut rows: Vec<Vec<f32>> = pooled.to_vec2()?;
        rows.iter_mut().for_each(|row| normalize(row));
        Ok(rows)
    }
}

impl BertEmbedder {
    /// Runs `work` on the blocking pool once `lane` has room.
    async fn on_lane<T: Send + 'static>(
        &self,
        lane: &Arc<tokio::sync::Semaphore>,
        work: impl FnOnce(&Self) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let _permit = lane
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| Error::Internal(e.to_string()))?;
        let this = self.clone();
        tokio::task::spawn_blocking(move || work(&this))
            .await
            .map_err(|error| Error::Internal(format!("embedding task failed: {error}")))?
    }
}

#[async_trait]
impl Embedder for BertEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let texts = texts.to_vec();
        if texts.len() <= INTERACTIVE_TEXTS {
            let _query = Counted::new(&self.demand.queries);
            return self
                .on_lane(&self.interactive, move |this| this.embed_blocking(&texts))
                .await;
        }
        let stored = Counted::new(&self.demand.stored);
        let embedded = self
            .on_lane(&self.bulk, move |this| this.embed_pass(&texts, true))
            .await;
        drop(stored);
        *self
            .demand
            .stored_ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(std::time::Instant::now());
        self.demand.stored_done.notify_waiters();
        embedded
    }

    /// On the bulk lane in passes of [`BACKGROUND_PASS`] texts, each once
    /// no stored texts' call has run for [`QUIET_BEFORE_BACKGROUND`] (or
    /// after [`MOST_BACKGROUND_WAIT`]): while the reconciler has a backlog,
    /// message vectors take the cores and the deriver's checks wait.
    async fn embed_background(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut vectors = Vec::with_capacity(texts.len());
        for pass in texts.chunks(BACKGROUND_PASS) {
            let waiting = std::time::Instant::now();
            while self.demand.stored_busy() && waiting.elapsed() < MOST_BACKGROUND_WAIT {
                let done = self.demand.stored_done.notified();
                // Woken when a call ends; checked again now and then all the same.
                let _ = tokio::time::timeout(QUIET_BEFORE_BACKGROUND / 5, done).await;
            }
            let pass = pass.to_vec();
            vectors.extend(
                self.on_lane(&self.bulk, move |this| this.embed_pass(&pass, true))
                    .await?,
            );
        }
        Ok(vectors)
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        let text = text.to_owned();
        let _query = Counted::new(&self.demand.queries);
        self.on_lane(&self.interactive, move |this| this.embed_query_blocking(&text))
            .await
    }

    fn passages(&self, text: &str) -> Vec<std::ops::Range<usize>> {
        self.passage_ranges(text)
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn model_id(&self) -> String {
        self.model_id.clone()
    }
}

/// The 8-bit copy of the encoder in `weights`, or `None` (logged) where
/// the model is not one it copies: another activation, or shapes that do
/// not fit its tiles. Queries then take the float model.
fn int8_encoder(weights: &Path, config: &Config, kernel: Kernel) -> Option<Int8Bert> {
    let built = if config.hidden_act == HiddenAct::Gelu {
        candle_core::safetensors::load(weights, &Device::Cpu)
            .map_err(|e| e.to_string())
            .and_then(|tensors| {
                let shape = Shape {
                    hidden: config.hidden_size,
                    heads: config.num_attention_heads,
                    layers: config.num_hidden_layers,
                    epsilon: config.layer_norm_eps as f32,
                };
                Int8Bert::new(&tensors, shape, kernel)
            })
    } else {
        Err(format!("hidden_act {:?} is not gelu", config.hidden_act))
    };
    built
        .inspect_err(|reason| tracing::info!(reason, "queries are embedded by the float model"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of its own under the system's temporary one, holding
    /// `1_Pooling/config.json` with `config` (none when `None`).
    fn model_dir(name: &str, config: Option<&str>) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("roncho-pooling-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
        if let Some(config) = config {
            std::fs::write(dir.join("1_Pooling").join("config.json"), config).unwrap();
        }
        dir
    }

    #[test]
    fn passages_overlap_cover_every_token_and_are_bounded_in_number() {
        for tokens in [255, 256, 300, 1_000, 3_600, 3_601, 4_000, 25_000] {
            let windows = token_windows(tokens, PASSAGE_TOKENS, PASSAGE_OVERLAP);
            assert!(windows.len() <= MOST_PASSAGES, "{tokens}: {}", windows.len());
            assert_eq!(windows[0].start, 0, "{tokens}");
            assert_eq!(windows.last().unwrap().end, tokens, "{tokens}");
            assert!(
                windows.iter().all(|w| w.len() <= WINDOW_TOKENS && !w.is_empty()),
                "{tokens}"
            );
            let contiguous = windows.windows(2).all(|pair| pair[1].start < pair[0].end);
            let short = tokens <= MOST_PASSAGES * (PASSAGE_TOKENS - PASSAGE_OVERLAP);
            assert!(
                contiguous || !short,
                "{tokens}: passages overlap while they may: {windows:?}"
            );
            assert!(windows.windows(2).all(|pair| pair[1].start > pair[0].start), "{tokens}");
        }
    }

    #[test]
    fn pooling_follows_the_sentence_transformers_config() {
        let cls = r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#;
        let mean = r#"{"pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true}"#;
        for (name, config, expected) in [
            ("cls", Some(cls), Some(Pooling::Cls)),
            ("mean", Some(mean), Some(Pooling::Mean)),
            ("absent", None, Some(Pooling::Mean)),
            (
                "both",
                Some(r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true}"#),
                None,
            ),
            ("neither", Some("{}"), None),
            ("broken", Some("{"), None),
        ] {
            let dir = model_dir(name, config);
            let pooling = Pooling::of(&dir);
            std::fs::remove_dir_all(&dir).unwrap();
            match (pooling, expected) {
                (Ok(found), Some(expected)) => assert_eq!(found, expected, "{name}"),
                (Err(Error::FailedPrecondition(message)), None) => {
                    assert!(message.contains("1_Pooling/config.json"), "{name}: {message}");
                }
                (other, _) => panic!("{name}: {other:?}"),
            }
        }
    }
}
