//! What the dialectic and the dreamer share: Honcho's agent tools (names,
//! descriptions, input schemas and tool sets, [`tools`]) and their
//! implementation over the store ([`executor`]).

pub mod executor;
pub mod tools;

pub use executor::{AgentStore, Evidence, ModelCall, RunLog, ToolContext, ToolRun};
