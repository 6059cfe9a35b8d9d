//! Load generation and retrieval-quality evaluation for roncho.
//!
//! # Layout
//! - [`corpus`]: generated corpora for the search benchmark.
//! - [`locomo`]: the LoCoMo conversation format, evidence normalisation and
//!   recall metrics.
//! - [`longconv`]: a seeded generator of long coding and planning
//!   assistant conversations in that format (issue 58's development set).
//! - [`synth`]: a seeded generator of synthetic conversations in that format.
//! - [`target`]: connecting to a server, over TLS and with a key when asked.

pub mod corpus;
pub mod locomo;
pub mod longconv;
pub mod synth;
pub mod target;
