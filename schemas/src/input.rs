//! The input contract: a fetched-page event (DESIGN.md §2, `../shared/bench/README.md` "Event format").

use serde::{Deserialize, Serialize};

/// A fetched-page event after validation: every required field present and well-typed.
///
/// On the wire it is one JSON object with `url`, `fetched_at` (RFC 3339) and `status` required,
/// `content_type`, `ip`, `crawl_id` optional, and the body as `body` (UTF-8 text) or
/// `body_base64` (raw bytes). Unknown fields are ignored. See `schemas/json/crawl.pages.v1.schema.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageEvent {
    /// Absolute http(s) URL, as sent.
    pub url: String,
    /// Fetch time as sent (RFC 3339).
    pub fetched_at: String,
    /// Fetch time in milliseconds since the Unix epoch, UTC.
    pub fetched_at_ms: i64,
    /// HTTP status; 0 = DNS/TCP failure.
    pub status: u16,
    /// The `Content-Type` header, if sent.
    pub content_type: Option<String>,
    /// The server's address, if sent.
    pub ip: Option<String>,
    /// The crawl round, e.g. `week-01`.
    pub crawl_id: Option<String>,
    /// The body's raw bytes (the UTF-8 of `body`, or the decoded `body_base64`), if any.
    pub body: Option<Body>,
}

/// A page body as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Sent as `body`: already Unicode text.
    Text(String),
    /// Sent as `body_base64`: raw bytes in the declared or a sniffed charset.
    Bytes(Vec<u8>),
}

impl Body {
    /// The raw bytes the checksum is taken over (UTF-8 for text bodies).
    pub fn raw(&self) -> &[u8] {
        match self {
            Body::Text(s) => s.as_bytes(),
            Body::Bytes(b) => b,
        }
    }
}

impl PageEvent {
    /// True when the fetch returned content (2xx); other statuses mean "no content now", but
    /// for the [inconclusive](Self::is_inconclusive) ones.
    pub fn has_content(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// True when the fetch tells nothing new of the URL's content, so the URL keeps the content
    /// it had: 304 Not Modified (the crawler's copy is current: a conditional request, which
    /// carries no body; the content is then as if fetched again), 429 Too Many Requests and 5xx
    /// server errors (the server did not answer this time). Treating these as "no content"
    /// would retract every pair and cluster of a page a crawler revalidates, or of a whole site
    /// whose server failed for a moment.
    pub fn is_inconclusive(&self) -> bool {
        matches!(self.status, 304 | 429 | 500..=599)
    }
}

/// Where an input record came from: dead letters carry it so the original can be found again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Source {
    /// A Kafka record.
    Kafka {
        /// Topic name.
        topic: String,
        /// Partition number.
        partition: i32,
        /// Offset within the partition.
        offset: i64,
    },
    /// A line of a file (1-based line number).
    File {
        /// File path as given on the command line.
        file: String,
        /// 1-based line number.
        line: u64,
    },
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Kafka {
                topic,
                partition,
                offset,
            } => write!(f, "{topic}/{partition}/{offset}"),
            Source::File { file, line } => write!(f, "{file}:{line}"),
        }
    }
}
