//! `roncho export` and `roncho import`: a workspace as JSON lines
//! (`roncho_core::export`) out of a server and into one, over the REST
//! edge's `…/export` and `…/import` routes with the same keys as any call.
//!
//! An export is checked as it arrives: it must open with the header and
//! close with the trailer counting the records between, or the command
//! fails (and a file it was writing is removed, never left looking whole).
//! An import reads and checks the whole file first (every line a record,
//! the trailer's count right), then sends it in calls of `batch` records,
//! each checked by the server before it writes any; importing again adds
//! nothing, so a failed import is finished by running it again.

use std::io::Write;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use roncho_core::export::{Counts, FORMAT_VERSION, MAX_IMPORT_RECORDS, Record};
use roncho_mcp::upstream::{ApiError, Call, segment};
use serde_json::{Value, json};

use crate::oneshot::Reach;

/// Records one import call sends by default.
pub const DEFAULT_BATCH: u16 = 500;
/// Bytes of records one import call sends at most (the REST edge takes
/// bodies of 12 MiB): a batch of long messages is cut shorter.
const MAX_CALL_BYTES: usize = 8 * 1024 * 1024;

/// A failed export or import: the server's refusal, or what was wrong with
/// the data, with the exit code's kind.
#[derive(Debug)]
pub enum Failure {
    /// The server refused or did not answer.
    Api(ApiError),
    /// The file or the stream is not a whole export.
    Data(String),
    /// Writing the output failed.
    Io(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Api(error) if error.status == 0 => write!(formatter, "no answer: {error}"),
            Failure::Api(error) => write!(formatter, "HTTP {}: {error}", error.status),
            Failure::Data(reason) | Failure::Io(reason) => formatter.write_str(reason),
        }
    }
}

impl From<ApiError> for Failure {
    fn from(error: ApiError) -> Self {
        Failure::Api(error)
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exported {
    /// Records between the header and the trailer.
    pub records: u64,
    pub bytes: u64,
}

/// Where an export goes: standard output, or a file written whole or not at all.
pub enum Output {
    Stdout(std::io::Stdout),
    /// A device or a pipe, written into as the export comes.
    Stream(std::fs::File),
    /// The file, written under a temporary name beside it until the export is whole.
    File {
        path: PathBuf,
        partial: PathBuf,
        file: std::fs::File,
    },
}

impl Output {
    /// Standard output for `None` or `-`, else the file.
    pub fn open(path: Option<&Path>) -> Result<Self, Failure> {
        match path {
            None => Ok(Output::Stdout(std::io::stdout())),
            Some(path) if path == Path::new("-") => Ok(Output::Stdout(std::io::stdout())),
            Some(path) => {
                // A link is followed to what it names (there or not yet),
                // which is written in place of the link.
                let path = followed(path)?;
                match std::fs::metadata(&path) {
                    Ok(metadata) if metadata.is_dir() => {
                        return Err(Failure::Io(format!("{} is a directory", path.display())));
                    }
                    // A device or a pipe (a terminal, /dev/null, a process's
                    // input) is written into as the export comes.
                    Ok(metadata) if !metadata.is_file() => {
                        let file = std::fs::OpenOptions::new()
                            .write(true)
                            .open(&path)
                            .map_err(|error| Failure::Io(format!("opening {}: {error}", path.display())))?;
                        return Ok(Output::Stream(file));
                    }
                    _ => {}
                }
                // A name of its own beside the file, made new (never a file
                // or link that is there), readable by its owner only: it
                // holds a workspace's memory.
                let partial = path.with_file_name(format!(
                    ".roncho-export-{}.partial",
                    roncho_core::model::new_public_id()
                ));
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                let file = options
                    .open(&partial)
                    .map_err(|error| Failure::Io(format!("creating {}: {error}", partial.display())))?;
                Ok(Output::File { path, partial, file })
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        let written = match self {
            Output::Stdout(stdout) => stdout.lock().write_all(bytes),
            Output::Stream(file) | Output::File { file, .. } => file.write_all(bytes),
        };
        written.map_err(|error| Failure::Io(format!("writing the export: {error}")))
    }

    /// Makes the file whole (or flushes standard output).
    fn finish(self) -> Result<(), Failure> {
        match self {
            Output::Stdout(stdout) => stdout
                .lock()
                .flush()
                .map_err(|error| Failure::Io(format!("writing the export: {error}"))),
            Output::Stream(mut file) => file
                .flush()
                .map_err(|error| Failure::Io(format!("writing the export: {error}"))),
            Output::File { path, partial, file } => file
                .sync_all()
                .and_then(|()| std::fs::rename(&partial, &path))
                .map_err(|error| Failure::Io(format!("writing {}: {error}", path.display()))),
        }
    }

    /// Removes what a failed export wrote to a file.
    fn abandon(self) {
        if let Output::File { partial, .. } = self {
            let _ = std::fs::remove_file(partial);
        }
    }
}

/// `path` with every link on it followed to what it names, whether that
/// exists or not; a loop, or a chain longer than the kernel follows (40),
/// is refused.
fn followed(path: &Path) -> Result<PathBuf, Failure> {
    let mut path = path.to_owned();
    for _ in 0..40 {
        match std::fs::read_link(&path) {
            Ok(target) => {
                path = match path.parent() {
                    Some(parent) if target.is_relative() => parent.join(target),
                    _ => target,
                };
            }
            Err(_) => return Ok(std::fs::canonicalize(&path).unwrap_or(path)),
        }
    }
    Err(Failure::Io(format!("{}: too many links (a loop?)", path.display())))
}

/// Checks an export's lines as they pass: the header first, the trailer
/// last with the count of the records between.
#[derive(Debug, Default)]
struct Checker {
    seen_header: bool,
    records: u64,
    ended: Option<u64>,
}

impl Checker {
    fn line(&mut self, line: &[u8]) -> Result<(), Failure> {
        let number = self.records + 1 + u64::from(self.seen_header);
        let value: Value = serde_json::from_slice(line)
            .map_err(|error| Failure::Data(format!("line {number} of the export is not JSON: {error}")))?;
        if value["kind"] == "error" {
            return Err(Failure::Data(format!(
                "the server stopped the export after {} records: {}",
                self.records,
                value["detail"].as_str().unwrap_or_default()
            )));
        }
        if self.ended.is_some() {
            return Err(Failure::Data("the export goes on past its trailer".into()));
        }
        let record = Record::parse(&format!("line {number}"), &value.to_string())
            .map_err(|error| Failure::Data(error.to_string()))?;
        match record {
            Record::Export { .. } if !self.seen_header => self.seen_header = true,
            _ if !self.seen_header => return Err(Failure::Data("the export does not open with its header".into())),
            Record::Export { .. } => return Err(Failure::Data(format!("line {number} is a second header"))),
            Record::End { records, .. } => {
                if records != self.records {
                    return Err(Failure::Data(format!(
                        "the trailer counts {records} records where {} came",
                        self.records
                    )));
                }
                self.ended = Some(records);
            }
            _ => self.records += 1,
        }
        Ok(())
    }

    fn whole(&self) -> Result<u64, Failure> {
        self.ended.ok_or_else(|| {
            Failure::Data(format!(
                "the export broke off after {} records, before its trailer",
                self.records
            ))
        })
    }
}

/// Exports `workspace` (or a peer's or a session's part of it) into `output`.
pub async fn export(
    server: &Reach,
    workspace: &str,
    peer: Option<&str>,
    session: Option<&str>,
    mut output: Output,
) -> Result<Exported, Failure> {
    let call = Call::get(format!("/v3/workspaces/{}/export", segment(workspace)))
        .query("peer_id", peer)
        .query("session_id", session);
    let work = async {
        let mut body = server.upstream.open(&call, server.authorization.as_ref()).await?;
        let mut checker = Checker::default();
        let mut pending = Vec::new();
        let mut bytes = 0;
        let stalled = || {
            Failure::Api(ApiError {
                status: 0,
                message: format!("no part of the export came for {} s", EXPORT_IDLE.as_secs()),
            })
        };
        while let Some(chunk) = tokio::time::timeout(EXPORT_IDLE, body.next())
            .await
            .map_err(|_| stalled())?
        {
            let chunk = chunk?;
            pending.extend_from_slice(&chunk);
            let mut start = 0;
            while let Some(end) = pending[start..].iter().position(|byte| *byte == b'\n') {
                let line = &pending[start..start + end];
                checker.line(line)?;
                output.write(&pending[start..=start + end])?;
                bytes += end as u64 + 1;
                start += end + 1;
            }
            pending.drain(..start);
        }
        if !pending.is_empty() {
            return Err(Failure::Data("the export ends inside a line".into()));
        }
        let records = checker.whole()?;
        Ok(Exported { records, bytes })
    };
    // Stopped by a signal, it removes what it wrote, as on any failure.
    let result = tokio::select! {
        result = work => result,
        signal = interrupted() => Err(Failure::Io(format!("stopped by {signal}"))),
    };
    match result {
        Ok(exported) => {
            output.finish()?;
            Ok(exported)
        }
        Err(failure) => {
            output.abandon();
            Err(failure)
        }
    }
}

/// How long an export waits for its next part before it gives up.
const EXPORT_IDLE: std::time::Duration = std::time::Duration::from_secs(60);

/// Returns when the process is asked to stop (Ctrl-C, SIGTERM), naming how.
async fn interrupted() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut terminate), Ok(mut hangup)) = (signal(SignalKind::terminate()), signal(SignalKind::hangup()))
        else {
            let _ = tokio::signal::ctrl_c().await;
            return "an interrupt";
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => "an interrupt",
            _ = terminate.recv() => "SIGTERM",
            _ = hangup.recv() => "SIGHUP",
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "an interrupt"
    }
}

/// A whole export read from a file, checked.
#[derive(Debug)]
pub struct ExportFile {
    /// The workspace the header names.
    pub workspace: String,
    /// The records between the header and the trailer, as JSON objects.
    pub records: Vec<Value>,
}

/// Reads and checks an export (`-`: standard input).
pub fn read(path: &Path) -> Result<ExportFile, Failure> {
    let text = if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|error| Failure::Io(format!("reading {}: {error}", path.display())))?;
    let mut checker = Checker::default();
    let mut workspace = None;
    let mut records = Vec::new();
    let mut lines = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        checker.line(line.as_bytes())?;
        let value: Value = serde_json::from_str(line).expect("checked as JSON");
        match value["kind"].as_str() {
            Some("export") => {
                let version = value["version"].as_u64().unwrap_or(0);
                if version == 0 || version > u64::from(FORMAT_VERSION) {
                    return Err(Failure::Data(format!(
                        "the export is of format version {version}; this roncho reads versions 1 to {FORMAT_VERSION}"
                    )));
                }
                workspace = value["workspace_id"].as_str().map(str::to_owned);
            }
            Some("end") => {}
            _ => {
                records.push(value);
                lines.push(number + 1);
            }
        }
    }
    checker.whole()?;
    // Every record checked as the server will, before any is sent.
    let texts: Vec<String> = records.iter().map(Value::to_string).collect();
    if let Err((index, reason)) = roncho_ingest::check_export_records(&texts) {
        return Err(Failure::Data(format!("line {}: {reason}", lines[index])));
    }
    Ok(ExportFile {
        workspace: workspace.unwrap_or_default(),
        records,
    })
}

/// Imports `file` into `workspace` in calls of `batch` records, calling
/// `progress` with the records sent so far after each; returns the counts
/// of every call together.
pub async fn import(
    server: &Reach,
    workspace: &str,
    file: &ExportFile,
    batch: usize,
    derive: bool,
    mut progress: impl FnMut(usize),
) -> Result<Counts, Failure> {
    let batch = batch.clamp(1, MAX_IMPORT_RECORDS);
    let path = format!("/v3/workspaces/{}/import", segment(workspace));
    let mut counts = Counts::default();
    let mut sent = 0;
    for records in batches(&file.records, batch, MAX_CALL_BYTES) {
        let call = Call::post(path.clone(), json!({ "records": records, "derive": derive }));
        let reply = server.send(&call).await.map_err(|error| {
            Failure::Api(ApiError {
                status: error.status,
                message: format!(
                    "{} (records {}–{} of the file)",
                    error.message,
                    sent + 1,
                    sent + records.len()
                ),
            })
        })?;
        let reply: Counts = serde_json::from_value(reply.body.unwrap_or(Value::Null)).map_err(|error| {
            Failure::Data(format!(
                "the server answered an import with what roncho does not: {error}"
            ))
        })?;
        counts.merge(reply);
        sent += records.len();
        progress(sent);
    }
    Ok(counts)
}

/// `records` in runs of at most `count` records and `bytes` bytes of JSON
/// (a record longer than `bytes` alone in its run).
fn batches(records: &[Value], count: usize, bytes: usize) -> Vec<&[Value]> {
    let mut runs = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (index, record) in records.iter().enumerate() {
        let length = record.to_string().len() + 1;
        if index > start && (index - start == count || size + length > bytes) {
            runs.push(&records[start..index]);
            (start, size) = (index, 0);
        }
        size += length;
    }
    if start < records.len() {
        runs.push(&records[start..]);
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(lines: &[&str]) -> Result<u64, Failure> {
        let mut checker = Checker::default();
        for line in lines {
            checker.line(line.as_bytes())?;
        }
        checker.whole()
    }

    const HEADER: &str = r#"{"kind":"export","version":1,"workspace_id":"w"}"#;
    const PEER: &str = r#"{"kind":"peer","id":"p"}"#;

    #[test]
    fn batches_hold_both_limits_and_every_record_once() {
        let records: Vec<Value> = (0..10).map(|index| json!({ "n": "x".repeat(index * 10) })).collect();
        for (count, bytes) in [(3, usize::MAX), (100, 60), (2, 1), (10, 1_000_000)] {
            let runs = batches(&records, count, bytes);
            assert_eq!(runs.iter().map(|run| run.len()).sum::<usize>(), records.len());
            for run in &runs {
                let size: usize = run.iter().map(|record| record.to_string().len() + 1).sum();
                assert!(
                    run.len() <= count && (run.len() == 1 || size <= bytes),
                    "{count} {bytes}: {run:?}"
                );
            }
        }
    }

    #[test]
    fn only_a_whole_export_passes() {
        assert_eq!(lines(&[HEADER, PEER, r#"{"kind":"end","records":1}"#]).unwrap(), 1);
        for (broken, why) in [
            (vec![HEADER, PEER], "broke off"),
            (vec![PEER, r#"{"kind":"end","records":1}"#], "header"),
            (vec![HEADER, PEER, r#"{"kind":"end","records":2}"#], "counts 2"),
            (vec![HEADER, r#"{"kind":"end","records":0}"#, PEER], "past its trailer"),
            (vec![HEADER, HEADER], "second header"),
            (vec![HEADER, r#"{"kind":"error","detail":"gone"}"#], "gone"),
            (vec![HEADER, "{not json"], "not JSON"),
            (vec![HEADER, r#"{"kind":"planet"}"#], "line 2"),
        ] {
            let error = lines(&broken).unwrap_err().to_string();
            assert!(error.contains(why), "{broken:?}: {error}");
        }
    }
}
