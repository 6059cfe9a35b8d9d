//! PDF text in a sandbox: each upload's PDF is parsed by a child process
//! (`roncho extract-pdf`) under an address-space and CPU limit, killed at a
//! deadline, its output read up to the text bound. A PDF whose streams
//! expand to gigabytes (a "zip bomb") ends the child, never the server.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use roncho_core::files::{MAX_FILE_TEXT_CHARS, PdfReader};
use roncho_core::{Error, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The subcommand the child runs.
pub const SUBCOMMAND: &str = "extract-pdf";
/// Exit code of a child that read the file and found it unreadable.
pub const UNREADABLE: i32 = 3;

/// Most bytes of text a child may write: the character bound in UTF-8.
const MAX_TEXT_BYTES: u64 = MAX_FILE_TEXT_CHARS as u64 * 4;

/// Parses PDFs in child processes, `permits` at once.
#[derive(Debug)]
pub struct SandboxedPdf {
    program: PathBuf,
    memory_limit_mb: u64,
    deadline: Duration,
    permits: Arc<tokio::sync::Semaphore>,
}

impl SandboxedPdf {
    /// Returns the reader running `program extract-pdf` (the roncho binary).
    pub fn new(program: PathBuf, memory_limit_mb: u64, deadline: Duration, permits: usize) -> Self {
        Self {
            program,
            memory_limit_mb,
            deadline,
            permits: Arc::new(tokio::sync::Semaphore::new(permits.max(1))),
        }
    }
}

#[async_trait::async_trait]
impl PdfReader for SandboxedPdf {
    async fn text(&self, bytes: Vec<u8>) -> Result<String> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| Error::Unavailable("the PDF reader is shutting down".into()))?;
        let cpu_limit = self.deadline.as_secs() + 1;
        let mut child = tokio::process::Command::new(&self.program)
            .args([
                SUBCOMMAND,
                "--memory-limit-mb",
                &self.memory_limit_mb.to_string(),
                "--cpu-limit-secs",
                &cpu_limit.to_string(),
            ])
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| Error::Internal(format!("starting the PDF reader {}: {error}", self.program.display())))?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(Error::Internal("the PDF reader's pipes are missing".into()));
        };
        // The child may stop reading early (a broken file): a failed write is its answer, not ours.
        let feed = tokio::spawn(async move {
            let _ = stdin.write_all(&bytes).await;
        });
        let run = async {
            let mut text = Vec::new();
            let mut limited = stdout.take(MAX_TEXT_BYTES + 1);
            limited.read_to_end(&mut text).await?;
            if text.len() as u64 > MAX_TEXT_BYTES {
                return Ok::<_, std::io::Error>((text, String::new(), None));
            }
            let mut detail = String::new();
            stderr.take(4_096).read_to_string(&mut detail).await?;
            let status = child.wait().await?;
            Ok((text, detail, Some(status)))
        };
        let outcome = tokio::time::timeout(self.deadline, run).await;
        feed.abort();
        let (text, detail, status) = match outcome {
            Err(_) => {
                return Err(Error::invalid(
                    "file",
                    format!(
                        "is a PDF that takes longer than {} s to read",
                        self.deadline.as_secs_f32()
                    ),
                ));
            }
            Ok(Err(error)) => return Err(Error::Internal(format!("talking to the PDF reader: {error}"))),
            Ok(Ok(result)) => result,
        };
        let Some(status) = status else {
            return Err(Error::invalid(
                "file",
                format!("holds more than {MAX_FILE_TEXT_CHARS} characters of text"),
            ));
        };
        match status.code() {
            Some(0) => {
                String::from_utf8(text).map_err(|_| Error::Internal("the PDF reader wrote invalid UTF-8".into()))
            }
            Some(UNREADABLE) => Err(Error::invalid(
                "file",
                detail.trim().trim_start_matches("invalid file: ").to_owned(),
            )),
            _ => {
                tracing::warn!(%status, detail = detail.trim(), "the PDF reader failed");
                Err(Error::invalid(
                    "file",
                    format!(
                        "is a PDF that cannot be read within {} MiB of memory and {} s",
                        self.memory_limit_mb,
                        self.deadline.as_secs()
                    ),
                ))
            }
        }
    }
}

/// The child's side: limits itself, reads a PDF from stdin, writes its text
/// to stdout; an unreadable file exits [`UNREADABLE`] with the reason on stderr.
pub fn extract_from_stdin(memory_limit_mb: u64, cpu_limit_secs: u64) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    let bytes = memory_limit_mb.saturating_mul(1024 * 1024);
    rlimit::setrlimit(rlimit::Resource::AS, bytes, bytes)?;
    rlimit::setrlimit(rlimit::Resource::CPU, cpu_limit_secs, cpu_limit_secs)?;
    let mut file = Vec::new();
    std::io::stdin()
        .take(roncho_core::validate::MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut file)?;
    if let Err(error) = roncho_core::files::check_file_size(&file) {
        eprintln!("{error}");
        std::process::exit(UNREADABLE);
    }
    match roncho_core::files::pdf_text(&file) {
        Ok(text) => {
            std::io::stdout().write_all(text.as_bytes())?;
            Ok(())
        }
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(UNREADABLE);
        }
    }
}
