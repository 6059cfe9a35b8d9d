//! Uploads are bounded on what they expand to: a PDF's text is read by a
//! sandboxed child process, so a PDF whose streams inflate to a gigabyte is
//! refused while the server's memory stays where it was.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use roncho::config::Role;
use roncho::pdf::SandboxedPdf;
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use tonic_types::StatusExt;

use crate::support;

/// A one-page PDF whose content stream is `stream`, encoded by `filters`.
fn pdf(stream: &[u8], filters: &str) -> Vec<u8> {
    let contents = [
        format!("<< /Length {} {filters} >>\nstream\n", stream.len()).into_bytes(),
        stream.to_vec(),
        b"\nendstream".to_vec(),
    ]
    .concat();
    let objects: Vec<Vec<u8>> = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>"
            .to_vec(),
        contents,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_vec(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (number, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", number + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

fn deflate(chunks: impl Iterator<Item = Vec<u8>>) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    for chunk in chunks {
        encoder.write_all(&chunk).unwrap();
    }
    encoder.finish().unwrap()
}

/// A PDF of a few kilobytes whose content stream inflates, through two
/// FlateDecode filters, to 1 GiB of whitespace.
fn bomb() -> Vec<u8> {
    let inner = deflate((0..1024).map(|_| vec![b' '; 1024 * 1024]));
    let outer = deflate(std::iter::once(inner));
    pdf(&outer, "/Filter [/FlateDecode /FlateDecode]")
}

/// This process's peak resident memory, in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Serves `roles` with PDFs read by this build's `roncho extract-pdf` in 256 MiB.
async fn serve_sandboxed(dir: &std::path::Path, roles: &[Role]) -> support::Served {
    let store = roncho_store::testing::open_embedded(dir).await;
    let mut services = roncho::server::Serving::store_only(store);
    services.domain.pdf = Some(Arc::new(SandboxedPdf::new(
        env!("CARGO_BIN_EXE_roncho").into(),
        256,
        Duration::from_secs(30),
        2,
    )));
    support::serve(services, roles).await
}

fn upload(file: Vec<u8>, name: &str) -> pb::UploadFileRequest {
    pb::UploadFileRequest {
        workspace_id: "w".into(),
        session_id: "docs".into(),
        peer_id: "alice".into(),
        file,
        filename: name.into(),
        content_type: "application/pdf".into(),
        ..Default::default()
    }
}

/// How many messages session `docs` holds.
async fn stored_in_docs(served: &support::Served) -> i64 {
    RecallServiceClient::new(served.channel.clone())
        .list_messages(pb::ListMessagesRequest {
            workspace_id: "w".into(),
            session_id: "docs".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .total
}

#[tokio::test]
async fn a_pdf_that_inflates_to_a_gigabyte_is_refused_without_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve_sandboxed(dir.path(), &[Role::Ingest, Role::Recall]).await;
    let mut ingest = IngestServiceClient::new(served.channel.clone());

    // An honest PDF goes through the sandbox.
    let honest = pdf(b"BT /F1 12 Tf 72 720 Td (Hello from a PDF) Tj ET", "");
    let messages = ingest
        .upload_file(upload(honest, "hello.pdf"))
        .await
        .unwrap()
        .into_inner()
        .messages;
    assert!(
        messages[0].content.contains("Hello from a PDF"),
        "{:?}",
        messages[0].content
    );

    let bomb = bomb();
    assert!(bomb.len() < 64 * 1024, "the bomb is {} bytes", bomb.len());
    let before = peak_rss_kib();
    let refused = ingest.upload_file(upload(bomb, "bomb.pdf")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    let violation = &refused.get_details_bad_request().expect("the field").field_violations[0];
    assert_eq!(violation.field, "file");
    assert!(violation.description.contains("256 MiB"), "{}", violation.description);
    let after = peak_rss_kib();
    assert!(
        after < before + 200 * 1024,
        "the server's peak memory grew from {before} KiB to {after} KiB"
    );

    // Nothing of the bomb was written, and the server goes on serving.
    let listed = stored_in_docs(&served).await;
    assert_eq!(listed, 1, "only the honest PDF's message");
    served.shutdown.cancel();
}

#[tokio::test]
async fn a_broken_pdf_is_invalid_with_the_readers_reason() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve_sandboxed(dir.path(), &[Role::Ingest]).await;
    let refused = IngestServiceClient::new(served.channel.clone())
        .upload_file(upload(b"%PDF-1.4 this is not really a pdf".to_vec(), "broken.pdf"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("PDF"), "{refused:?}");
    served.shutdown.cancel();
}

#[tokio::test]
async fn a_pdf_past_the_read_deadline_is_refused() {
    let reader = SandboxedPdf::new(env!("CARGO_BIN_EXE_roncho").into(), 256, Duration::from_millis(1), 2);
    let error = roncho_core::files::PdfReader::text(&reader, bomb()).await.unwrap_err();
    assert!(
        matches!(&error, roncho_core::Error::InvalidArgument { field, reason } if field == "file" && reason.contains("longer than")),
        "{error}"
    );
}

/// Broken and hostile PDFs (a valid one with bytes flipped, cut short,
/// spliced or repeated) through the sandboxed reader the server uses: each
/// is text or an INVALID_ARGUMENT naming the file, never a crash, a hang
/// or another kind of error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_mangled_pdf_is_read_or_refused_cleanly() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let reader = SandboxedPdf::new(env!("CARGO_BIN_EXE_roncho").into(), 256, Duration::from_secs(10), 2);
    let runtime = tokio::runtime::Handle::current();
    let mangled = (
        "[ -~]{0,200}",
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 0..24),
    )
        .prop_map(|(text, edits)| {
            let mut bytes = pdf(format!("BT /F1 12 Tf 72 720 Td ({text}) Tj ET").as_bytes(), "");
            for (at, byte, kind) in edits {
                if bytes.is_empty() {
                    break;
                }
                let at = at.index(bytes.len());
                match kind {
                    0 => bytes[at] = byte,
                    1 => bytes.truncate(at),
                    2 => bytes.insert(at, byte),
                    _ => {
                        let copy = bytes[at..].to_vec();
                        bytes.extend_from_slice(&copy);
                    }
                }
            }
            bytes
        });
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let (read, refused) = (
        std::sync::atomic::AtomicUsize::new(0),
        std::sync::atomic::AtomicUsize::new(0),
    );
    // Each refusal's reason, counted: what a run that refuses everything says.
    let reasons = std::sync::Mutex::new(std::collections::BTreeMap::<String, usize>::new());
    let outcome = runner.run(&mangled, |bytes| {
        let outcome = tokio::task::block_in_place(|| {
            runtime.block_on(roncho_core::files::PdfReader::text(&reader, bytes.clone()))
        });
        match outcome {
            Ok(_) => {
                read.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(roncho_core::Error::InvalidArgument { field, reason }) => {
                refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                *reasons.lock().unwrap().entry(reason).or_default() += 1;
                prop_assert_eq!(field, "file");
            }
            Err(other) => prop_assert!(false, "{other:?} for a PDF of {} bytes", bytes.len()),
        }
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    let (read, refused) = (read.into_inner(), refused.into_inner());
    assert!(
        read > 0 && refused > 0,
        "both outcomes occur: {read} read, {refused} refused, for these reasons: {:?}",
        reasons.into_inner().unwrap()
    );
}

/// A PDF reader counting its reads.
#[derive(Debug)]
struct Counting {
    inner: SandboxedPdf,
    reads: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl roncho_core::files::PdfReader for Counting {
    async fn text(&self, pdf: Vec<u8>) -> roncho_core::Result<String> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.text(pdf).await
    }
}

#[tokio::test]
async fn a_repeated_upload_with_its_key_is_stored_once_and_not_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let reader = Arc::new(Counting {
        inner: SandboxedPdf::new(env!("CARGO_BIN_EXE_roncho").into(), 256, Duration::from_secs(30), 2),
        reads: Default::default(),
    });
    let mut services = roncho::server::Serving::store_only(store);
    services.domain.pdf = Some(reader.clone());
    let served = support::serve(services, &[Role::Ingest, Role::Recall]).await;
    let mut ingest = IngestServiceClient::new(served.channel.clone());
    let keyed = |text: &[u8]| pb::UploadFileRequest {
        idempotency_key: Some("upload-1".into()),
        ..upload(pdf(text, ""), "hello.pdf")
    };
    let hello = b"BT /F1 12 Tf 72 720 Td (Hello from a PDF) Tj ET";
    let first = ingest.upload_file(keyed(hello)).await.unwrap().into_inner().messages;
    let again = ingest.upload_file(keyed(hello)).await.unwrap().into_inner().messages;
    assert_eq!(again, first, "the repeat answers with the first upload's messages");
    assert_eq!(
        reader.reads.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "and is not read again"
    );
    let other = ingest
        .upload_file(keyed(b"BT /F1 12 Tf 72 720 Td (Another PDF) Tj ET"))
        .await
        .unwrap_err();
    assert_eq!(other.code(), tonic::Code::FailedPrecondition, "{other:?}");
    assert!(other.message().contains("upload-1"), "{other:?}");
    let listed = stored_in_docs(&served).await;
    assert_eq!(listed, 1, "stored once");
    served.shutdown.cancel();
}
