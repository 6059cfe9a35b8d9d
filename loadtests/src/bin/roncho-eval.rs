//! `roncho-eval`: retrieval quality of `SearchMessages` on LoCoMo-format data,
//! and the synthetic data generator.
//!
//! `locomo` ingests each conversation the way a user would — one workspace
//! per conversation, one peer per speaker, one session per conversation
//! session with its date as `created_at`, the text (and any shared photo's
//! caption) as content, the `dia_id` in metadata — then asks every question
//! through `SearchMessages` and reports recall@5/10/20 and any-hit@10 per
//! category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop; "all" is
//! categories 1–4).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use roncho_loadtests::locomo::{Sample, Scores, Tally, normalize_evidence, parse_date_time, turn_content};
use roncho_loadtests::{longconv, synth};
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_proto::v1::recall_service_client::RecallServiceClient;

#[derive(Debug, Parser)]
#[command(about = "retrieval-quality harness for roncho")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Ingests LoCoMo-format conversations and scores SearchMessages.
    Locomo {
        /// LoCoMo JSON file (a list of samples).
        #[arg(long)]
        data: PathBuf,
        #[arg(long, default_value = "http://127.0.0.1:50051")]
        target: String,
        /// Prints JSON instead of text.
        #[arg(long)]
        json: bool,
        /// ingest, query, or both (ingest then query at once).
        #[arg(long, default_value = "both")]
        phase: String,
        /// Names this run's workspaces, so a query phase finds an earlier ingest.
        #[arg(long)]
        run_id: Option<String>,
        /// Writes each question's evidence and ranked turns here, one JSON
        /// line per question, to look at what a ranking missed.
        #[arg(long)]
        dump: Option<PathBuf>,
    },
    /// Writes long coding and planning assistant conversations in the
    /// LoCoMo format, with questions of nine kinds (categories 11–19).
    Longconv {
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 2)]
        conversations: usize,
        #[arg(long)]
        out: PathBuf,
    },
    /// Writes synthetic conversations in the LoCoMo format.
    Synth {
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 5)]
        conversations: usize,
        #[arg(long)]
        out: PathBuf,
    },
}

/// Returns `text` as a roncho id: runs of other characters become `-`.
fn to_id(text: &str) -> String {
    let id: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if id.is_empty() { "unknown".to_owned() } else { id }
}

fn timestamp(rfc3339: &str, offset_seconds: i64) -> Option<prost_types::Timestamp> {
    let mut parsed: prost_types::Timestamp = rfc3339.parse().ok()?;
    parsed.seconds += offset_seconds;
    Some(parsed)
}

async fn ingest(
    ingest: &mut IngestServiceClient<tonic::transport::Channel>,
    workspace_id: &str,
    sample: &Sample,
) -> anyhow::Result<()> {
    for session in sample.sessions() {
        let start = parse_date_time(&session.date_time);
        let messages: Vec<pb::MessageCreate> = session
            .turns
            .iter()
            .enumerate()
            .map(|(index, turn)| pb::MessageCreate {
                peer_id: to_id(&turn.speaker),
                content: turn_content(turn),
                metadata: Some(prost_types::Struct {
                    fields: [(
                        "dia_id".to_owned(),
                        prost_types::Value {
                            kind: Some(prost_types::value::Kind::StringValue(turn.dia_id.clone())),
                        },
                    )]
                    .into_iter()
                    .collect(),
                }),
                // Turns of a session are a few seconds apart, in order.
                created_at: start.as_deref().and_then(|start| timestamp(start, index as i64 * 30)),
                ..Default::default()
            })
            .collect();
        for batch in messages.chunks(100) {
            ingest
                .create_messages(pb::CreateMessagesRequest {
                    workspace_id: workspace_id.to_owned(),
                    session_id: format!("session_{}", session.number),
                    messages: batch.to_vec(),
                    idempotency_key: None,
                })
                .await
                .with_context(|| format!("ingesting session {} of {}", session.number, sample.sample_id))?;
        }
    }
    Ok(())
}

fn dia_id(message: &pb::Message) -> Option<String> {
    match message.metadata.as_ref()?.fields.get("dia_id")?.kind.as_ref()? {
        prost_types::value::Kind::StringValue(id) => Some(id.clone()),
        _ => None,
    }
}

async fn locomo(
    data: PathBuf,
    target: String,
    json: bool,
    phase: &str,
    run_id: &str,
    dump: Option<PathBuf>,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&data).with_context(|| format!("reading {}", data.display()))?;
    let samples: Vec<Sample> = serde_json::from_str(&text).context("not a LoCoMo JSON list")?;
    let channel = tonic::transport::Endpoint::from_shared(target.clone())?
        .connect()
        .await
        .with_context(|| format!("connecting to {target}"))?;
    let mut ingest_client = IngestServiceClient::new(channel.clone());
    let mut recall = RecallServiceClient::new(channel);
    let mut tally = Tally::default();
    let mut modes = BTreeMap::new();
    let mut dumped = String::new();
    for sample in &samples {
        let workspace_id = to_id(&format!("eval-{}-{run_id}", sample.sample_id));
        if phase != "query" {
            ingest(&mut ingest_client, &workspace_id, sample).await?;
        }
        if phase == "ingest" {
            continue;
        }
        let known = sample.dia_ids();
        for question in &sample.qa {
            let evidence = normalize_evidence(&question.evidence, &known);
            if evidence.is_empty() {
                continue;
            }
            let response = recall
                .search_messages(pb::SearchMessagesRequest {
                    workspace_id: workspace_id.clone(),
                    query: question.question.clone(),
                    limit: 20,
                    ..Default::default()
                })
                .await
                .with_context(|| format!("searching {:?}", question.question))?
                .into_inner();
            *modes.entry(response.mode.clone()).or_insert(0usize) += 1;
            let ranked: Vec<String> = response.messages.iter().filter_map(dia_id).collect();
            if dump.is_some() {
                let line = serde_json::json!({
                    "sample": sample.sample_id,
                    "category": question.category,
                    "question": question.question,
                    "evidence": evidence,
                    "ranked": ranked,
                });
                dumped.push_str(&format!("{line}\n"));
            }
            tally.add(question.category, &evidence, &ranked);
        }
    }
    if let Some(path) = &dump {
        std::fs::write(path, dumped).with_context(|| format!("writing {}", path.display()))?;
    }
    if phase == "ingest" {
        println!(
            "ingested {} conversations from {} as run {run_id}",
            samples.len(),
            data.display()
        );
        return Ok(());
    }
    let averages = tally.averages();
    if json {
        let by_category: BTreeMap<String, &Scores> = averages
            .iter()
            .map(|(category, scores)| {
                (
                    if *category == 0 {
                        "all".to_owned()
                    } else {
                        category.to_string()
                    },
                    scores,
                )
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"data": data, "conversations": samples.len(), "search_modes": modes, "scores": by_category})
        );
    } else {
        println!(
            "{} conversations from {}; search modes {modes:?}",
            samples.len(),
            data.display()
        );
        println!(
            "{:<10} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "category", "questions", "recall@5", "recall@10", "recall@20", "any@10"
        );
        for (category, scores) in &averages {
            let name = match category {
                0 => "all".to_owned(),
                1 => "1 multi".to_owned(),
                2 => "2 time".to_owned(),
                3 => "3 open".to_owned(),
                4 => "4 single".to_owned(),
                other => match longconv::Kind::name(*other) {
                    Some(name) => format!("{other} {name}"),
                    None => other.to_string(),
                },
            };
            println!(
                "{name:<10} {:>9} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
                scores.questions, scores.recall_at_5, scores.recall_at_10, scores.recall_at_20, scores.any_at_10
            );
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Locomo {
            data,
            target,
            json,
            phase,
            run_id,
            dump,
        } => {
            anyhow::ensure!(
                matches!(phase.as_str(), "ingest" | "query" | "both"),
                "--phase is ingest, query or both"
            );
            let run_id = run_id.unwrap_or_else(|| std::process::id().to_string());
            locomo(data, target, json, &phase, &run_id, dump).await
        }
        Command::Longconv {
            seed,
            conversations,
            out,
        } => write_samples(&longconv::generate(seed, conversations), &out),
        Command::Synth {
            seed,
            conversations,
            out,
        } => write_samples(&synth::generate(seed, conversations), &out),
    }
}

fn write_samples(samples: &[Sample], out: &std::path::Path) -> anyhow::Result<()> {
    std::fs::write(out, serde_json::to_string_pretty(samples)?)
        .with_context(|| format!("writing {}", out.display()))?;
    println!(
        "wrote {} conversations ({} questions) to {}",
        samples.len(),
        samples.iter().map(|s| s.qa.len()).sum::<usize>(),
        out.display()
    );
    Ok(())
}
