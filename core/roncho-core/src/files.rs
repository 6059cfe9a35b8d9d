//! File upload: decoding text and JSON files (PDFs are read behind the
//! [`PdfReader`] port, by an adapter) and splitting text into message-sized
//! chunks on paragraph, line, sentence, then word boundaries.

use serde_json::Value;

use crate::validate::{MAX_FILE_BYTES, MAX_MESSAGE_CHARS};
use crate::{Error, Result};

/// Most characters of text one upload may yield (its messages' total):
/// a PDF or JSON file's text can be far larger than the file.
pub const MAX_FILE_TEXT_CHARS: usize = 6_000_000;

/// Reads the text of PDF files: a parser of hostile input, run where its
/// time and memory are bounded.
#[async_trait::async_trait]
pub trait PdfReader: Send + Sync {
    /// Returns the text of a PDF, pages headed `[Page N]`.
    async fn text(&self, bytes: Vec<u8>) -> Result<String>;
}

/// The reader of a service given none: it reads no PDF (the binary wires
/// `roncho-pdf`'s).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPdfReader;

#[async_trait::async_trait]
impl PdfReader for NoPdfReader {
    async fn text(&self, _bytes: Vec<u8>) -> Result<String> {
        Err(crate::Error::Internal(
            "no PDF reader is wired into this service".into(),
        ))
    }
}

/// Returns the media type of a content type, lowercase, without parameters.
pub fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Returns whether a content type names a PDF.
pub fn is_pdf(content_type: &str) -> bool {
    media_type(content_type) == "application/pdf"
}

/// Returns whether files of `content_type` can become messages: text,
/// JSON and PDF.
pub fn is_supported(content_type: &str) -> bool {
    let media = media_type(content_type);
    media == "application/json" || media == "application/pdf" || media.starts_with("text/")
}

/// Checks a file's size before anything reads it.
pub fn check_file_size(bytes: &[u8]) -> Result<()> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(Error::invalid(
            "file",
            format!(
                "is {} bytes, at most {MAX_FILE_BYTES} bytes (5 MiB) are allowed",
                bytes.len()
            ),
        ));
    }
    Ok(())
}

/// Returns a file's extracted text without NULs, refusing an empty one and
/// one longer than [`MAX_FILE_TEXT_CHARS`].
pub fn checked_text(text: &str) -> Result<String> {
    let text = crate::validate::strip_nul(text);
    if text.trim().is_empty() {
        return Err(Error::invalid("file", "contains no text"));
    }
    let chars = text.chars().count();
    if chars > MAX_FILE_TEXT_CHARS {
        return Err(Error::invalid(
            "file",
            format!("holds {chars} characters of text, at most {MAX_FILE_TEXT_CHARS} are allowed"),
        ));
    }
    Ok(text)
}

/// One chunk of an uploaded file, with its character range in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChunk {
    pub content: String,
    pub chunk_index: usize,
    pub total_chunks: usize,
    /// Character offset of the first character (inclusive).
    pub start: usize,
    /// Character offset after the last character (exclusive).
    pub end: usize,
}

/// Returns the text of a text or JSON file, or a clear refusal. PDFs are
/// read by a [`PdfReader`] (an adapter's), where their parse is bounded.
pub fn extract_text(content_type: &str, bytes: &[u8]) -> Result<String> {
    check_file_size(bytes)?;
    let text = match media_type(content_type).as_str() {
        "application/json" => {
            let value: Value = serde_json::from_slice(bytes)
                .map_err(|error| Error::invalid("file", format!("is not valid JSON: {error}")))?;
            python_json_dumps(&value)
        }
        "application/pdf" => {
            return Err(Error::Internal(
                "a PDF's text is read by the PDF reader, not here".into(),
            ));
        }
        text if text.starts_with("text/") => decode_text(bytes),
        _ => {
            return Err(Error::invalid(
                "content_type",
                format!("`{content_type}` is not supported; use text/*, application/json or application/pdf"),
            ));
        }
    };
    checked_text(&text)
}

/// Decodes UTF-8, then UTF-16 with a byte-order mark, else Latin-1.
fn decode_text(bytes: &[u8]) -> String {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return text.strip_prefix('\u{feff}').unwrap_or(text).to_owned();
    }
    let utf16 = |chunks: Vec<u16>| String::from_utf16(&chunks).ok();
    let decoded = match bytes {
        [0xff, 0xfe, rest @ ..] if rest.len() % 2 == 0 => utf16(
            rest.chunks_exact(2)
                .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
                .collect(),
        ),
        [0xfe, 0xff, rest @ ..] if rest.len() % 2 == 0 => utf16(
            rest.chunks_exact(2)
                .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
                .collect(),
        ),
        _ => None,
    };
    decoded.unwrap_or_else(|| bytes.iter().map(|&byte| char::from(byte)).collect())
}

/// Serialises JSON the way Python's `json.dumps(value, ensure_ascii=False)` does,
/// so uploads produce the same text as in Honcho.
fn python_json_dumps(value: &Value) -> String {
    match value {
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(python_json_dumps).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(object) => format!(
            "{{{}}}",
            object
                .iter()
                .map(|(key, value)| format!("{}: {}", Value::String(key.clone()), python_json_dumps(value)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        scalar => scalar.to_string(),
    }
}

/// Splits `text` into chunks of at most `max_chars` characters, cutting after
/// the last paragraph break, else line break, else sentence end, else space
/// that fits; a run with none of these is cut at `max_chars`. The chunks
/// concatenate back to `text` exactly.
pub fn chunk_text(text: &str, max_chars: usize) -> Vec<FileChunk> {
    let chars: Vec<char> = text.chars().collect();
    let mut ranges = Vec::new();
    let mut start = 0;
    while start < chars.len() {
        let limit = (start + max_chars).min(chars.len());
        let end = if limit == chars.len() {
            limit
        } else {
            cut_point(&chars[start..limit]).map_or(limit, |cut| start + cut)
        };
        ranges.push((start, end));
        start = end;
    }
    let total_chunks = ranges.len();
    ranges
        .into_iter()
        .enumerate()
        .map(|(chunk_index, (start, end))| FileChunk {
            content: chars[start..end].iter().collect(),
            chunk_index,
            total_chunks,
            start,
            end,
        })
        .collect()
}

/// Returns the offset just after the best separator inside `window`.
fn cut_point(window: &[char]) -> Option<usize> {
    const SEPARATORS: [&[char]; 4] = [&['\n', '\n'], &['\n'], &['.', ' '], &[' ']];
    SEPARATORS.iter().find_map(|separator| {
        window
            .windows(separator.len())
            .rposition(|candidate| candidate == *separator)
            .map(|position| position + separator.len())
            .filter(|&cut| cut > 0)
    })
}

/// Returns the chunks of an uploaded file, each fitting in one message.
pub fn file_chunks(content_type: &str, bytes: &[u8]) -> Result<Vec<FileChunk>> {
    Ok(chunk_text(&extract_text(content_type, bytes)?, MAX_MESSAGE_CHARS))
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    #[test]
    fn text_just_over_the_bound_is_refused_naming_it() {
        let fits = "a".repeat(MAX_FILE_TEXT_CHARS);
        assert!(checked_text(&fits).is_ok());
        let over = "a".repeat(MAX_FILE_TEXT_CHARS + 1);
        match checked_text(&over) {
            Err(Error::InvalidArgument { field, reason }) => {
                assert_eq!(field, "file");
                assert!(reason.contains("at most 6000000"), "{reason}");
            }
            other => panic!("expected invalid argument, got {other:?}"),
        }
    }

    #[test]
    fn json_that_expands_past_the_bound_is_refused() {
        // Python's separators add a space per element: 3.2 M elements of `0,`
        // fit in 5 MiB as a file and expand past 6 M characters as text.
        let items = vec!["0"; 2_600_000].join(",");
        let file = format!("[{items}]");
        assert!(file.len() <= MAX_FILE_BYTES);
        let error = extract_text("application/json", file.as_bytes()).unwrap_err();
        assert!(
            matches!(error, Error::InvalidArgument { ref field, .. } if field == "file"),
            "{error}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejoin(chunks: &[FileChunk]) -> String {
        chunks.iter().map(|chunk| chunk.content.as_str()).collect()
    }

    #[test]
    fn short_text_is_one_chunk() {
        let chunks = chunk_text("hello", 10);
        assert_eq!(
            chunks,
            vec![FileChunk {
                content: "hello".into(),
                chunk_index: 0,
                total_chunks: 1,
                start: 0,
                end: 5
            }]
        );
    }

    #[test]
    fn splits_prefer_paragraphs_then_lines_then_sentences_then_words() {
        let text = "aaaa bbbb.\ncccc\n\ndddd eeee. ffff gggg";
        let chunks = chunk_text(text, 20);
        assert_eq!(chunks[0].content, "aaaa bbbb.\ncccc\n\n");
        assert_eq!(rejoin(&chunks), text);
        let chunks = chunk_text("one two. three four five", 12);
        assert_eq!(chunks[0].content, "one two. ");
        let chunks = chunk_text("abcdefghij", 4);
        assert_eq!(
            chunks.iter().map(|c| c.content.as_str()).collect::<Vec<_>>(),
            ["abcd", "efgh", "ij"]
        );
        assert!(chunks.iter().all(|c| c.total_chunks == 3));
        assert_eq!((chunks[2].start, chunks[2].end), (8, 10));
    }

    #[test]
    fn chunks_never_exceed_the_limit_and_rejoin_exactly() {
        let text = "Lorem ipsum dolor sit amet, consectetur. ".repeat(2000) + &"x".repeat(30_000);
        let chunks = chunk_text(&text, MAX_MESSAGE_CHARS);
        assert!(
            chunks
                .iter()
                .all(|chunk| chunk.content.chars().count() <= MAX_MESSAGE_CHARS)
        );
        assert_eq!(rejoin(&chunks), text);
    }

    #[test]
    fn json_is_reserialised_like_python() {
        let text = extract_text("application/json", br#"{"a":[1,2,{"b":"\u00e9"}],"c":null}"#).unwrap();
        assert_eq!(text, r#"{"a": [1, 2, {"b": "é"}], "c": null}"#);
    }

    #[test]
    fn text_decodes_utf8_utf16_and_latin1() {
        assert_eq!(
            extract_text("text/plain; charset=utf-8", "héllo".as_bytes()).unwrap(),
            "héllo"
        );
        assert_eq!(
            extract_text("text/plain", &[0xff, 0xfe, b'h', 0, b'i', 0]).unwrap(),
            "hi"
        );
        assert_eq!(extract_text("text/markdown", &[b'c', 0xe9]).unwrap(), "cé");
    }

    #[test]
    fn unsupported_types_empty_and_oversized_files_are_refused() {
        let error = extract_text("image/png", b"\x89PNG").unwrap_err();
        assert!(matches!(error, Error::InvalidArgument { field, .. } if field == "content_type"));
        assert!(extract_text("text/plain", b"  \n").is_err());
        assert!(extract_text("text/plain", &vec![b'a'; MAX_FILE_BYTES + 1]).is_err());
        assert!(extract_text("application/pdf", b"not a pdf").is_err());
    }
}
