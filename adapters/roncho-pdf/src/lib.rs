//! Reading the text of uploaded PDFs: pdf-extract, a parser of hostile
//! input, behind roncho-core's [`PdfReader`] port. [`pdf_text`] parses in
//! the calling thread; [`InProcessPdf`] bounds how many parses run and how
//! long each is waited for; the server runs [`pdf_text`] in a child process
//! whose memory and CPU are limited (`roncho::pdf`).

use std::sync::Arc;

use roncho_core::files::PdfReader;
use roncho_core::{Error, Result};

/// Returns the text of a PDF, pages headed `[Page N]`, parsed in this thread
/// with no bound on its time or memory (see [`InProcessPdf`] and the server's sandboxed reader).
pub fn pdf_text(bytes: &[u8]) -> Result<String> {
    // pdf-extract panics on some malformed files; a bad upload must be an error, not a crash.
    let pages = std::panic::catch_unwind(|| pdf_extract::extract_text_from_mem_by_pages(bytes))
        .map_err(|_| Error::invalid("file", "is not a readable PDF"))?
        .map_err(|error| Error::invalid("file", format!("is not a readable PDF: {error}")))?;
    let text = pages
        .iter()
        .enumerate()
        .map(|(index, page)| format!("[Page {}]\n{}", index + 1, page.trim()))
        .collect::<Vec<_>>()
        .join("\n\n");
    Ok(text)
}

/// Reads PDFs in this process: at most `permits` at once, each answered
/// within `deadline` (a parse past it keeps its permit until it ends, so
/// abandoned parses cannot pile up). Memory is not bounded here; the server
/// runs its parses in a sandboxed process instead (`roncho::pdf`).
#[derive(Debug)]
pub struct InProcessPdf {
    permits: Arc<tokio::sync::Semaphore>,
    deadline: std::time::Duration,
}

impl InProcessPdf {
    /// Returns the reader running `permits` parses at once, each answered within `deadline`.
    pub fn new(permits: usize, deadline: std::time::Duration) -> Self {
        Self {
            permits: Arc::new(tokio::sync::Semaphore::new(permits.max(1))),
            deadline,
        }
    }
}

impl Default for InProcessPdf {
    fn default() -> Self {
        Self::new(2, std::time::Duration::from_secs(30))
    }
}

#[async_trait::async_trait]
impl PdfReader for InProcessPdf {
    async fn text(&self, bytes: Vec<u8>) -> Result<String> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::Unavailable("the PDF reader is shutting down".into()))?;
        let parse = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            pdf_text(&bytes)
        });
        match tokio::time::timeout(self.deadline, parse).await {
            Ok(joined) => joined.map_err(|error| Error::Internal(format!("PDF parsing task failed: {error}")))?,
            Err(_) => Err(Error::invalid(
                "file",
                format!(
                    "is a PDF that takes longer than {} s to read",
                    self.deadline.as_secs_f32()
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn what_is_not_a_pdf_is_refused_as_the_callers_file() {
        for bytes in [&b"not a pdf"[..], b"%PDF-1.7\n", b""] {
            let error = InProcessPdf::default().text(bytes.to_vec()).await.unwrap_err();
            assert!(
                matches!(&error, Error::InvalidArgument { field, .. } if field == "file"),
                "{error:?}"
            );
        }
    }
}
