//! PDF text in a child process: each upload's PDF is parsed by `roncho
//! extract-pdf` under an address-space, CPU-time, open-file and file-size
//! limit, killed at a deadline, its output read up to the text bound. A PDF
//! whose streams expand to gigabytes (a "zip bomb") ends the child, never
//! the server. The child runs as the server's user, on its file system and
//! network: a resource bound, not an isolation boundary (a hardened
//! deployment adds seccomp or a separate user around it).

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
/// How long an upload waits for a free reader before it is told to retry.
const QUEUE_WAIT: Duration = Duration::from_secs(5);

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
        let _permit = match tokio::time::timeout(QUEUE_WAIT, self.permits.acquire()).await {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return Err(Error::Unavailable("the PDF reader is shutting down".into())),
            Err(_) => {
                return Err(Error::Throttled {
                    reason: "every PDF reader is busy".into(),
                    retry_after: QUEUE_WAIT,
                });
            }
        };
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
            // Both pipes at once: a child blocked writing one must not stall the other.
            let read_text = async {
                let mut text = Vec::new();
                stdout.take(MAX_TEXT_BYTES + 1).read_to_end(&mut text).await?;
                Ok::<_, std::io::Error>(text)
            };
            let read_detail = async {
                let mut detail = Vec::new();
                let mut stderr = stderr;
                (&mut stderr).take(4_096).read_to_end(&mut detail).await?;
                // Whatever else it says is drained, not kept.
                tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await?;
                Ok::<_, std::io::Error>(String::from_utf8_lossy(&detail).into_owned())
            };
            let (text, detail) = tokio::try_join!(read_text, read_detail)?;
            if text.len() as u64 > MAX_TEXT_BYTES {
                return Ok::<_, std::io::Error>((text, String::new(), None));
            }
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
    // Its pipes are all it needs: no files opened, none written.
    rlimit::setrlimit(rlimit::Resource::NOFILE, 8, 8)?;
    rlimit::setrlimit(rlimit::Resource::FSIZE, 0, 0)?;
    let mut file = Vec::new();
    std::io::stdin()
        .take(roncho_core::validate::MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut file)?;
    if let Err(error) = roncho_core::files::check_file_size(&file) {
        eprintln!("{error}");
        std::process::exit(UNREADABLE);
    }
    match roncho_pdf::pdf_text(&file) {
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
