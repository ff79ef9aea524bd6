//! neardup's processing logic: sans-IO and clock-free (DESIGN.md §1).
//!
//! Every decision uses the event's own time (`fetched_at`), never the wall clock, so replaying the
//! same input gives the same output bytes. The consumer crate only moves bytes in and out.
//!
//! ```
//! use neardup_schemas::{OutputKind, Source};
//! use neardup_topology::{Config, Topology};
//!
//! let mut topo = Topology::new(Config::default());
//! let page = |url: &str, t: &str| format!(
//!     r#"{{"url":"{url}","fetched_at":"{t}","status":200,"body":"<p>the same page</p>"}}"#);
//! let src = Source::File { file: "doc".into(), line: 1 };
//! let mut out = Vec::new();
//! topo.process(page("http://a.example/x", "2026-11-02T10:00:00Z").as_bytes(), &src, &mut out);
//! topo.process(page("http://b.example/x", "2026-11-02T10:00:01Z").as_bytes(), &src, &mut out);
//! let pairs: Vec<_> = out.iter().filter(|e| e.kind == OutputKind::Pairs).collect();
//! assert_eq!(pairs.len(), 1);
//! assert_eq!(pairs[0].key, "http://a.example/x http://b.example/x");
//! ```
//!
//! # Where things are
//! - the pipeline: [`Topology`] (`pipeline.rs`) applies [`Prepared`] records (`prepare.rs`:
//!   decoding and signing, on any thread) in order; [`Config`] (`config.rs`) holds every
//!   parameter; the split stages' internal records and the sign stage are in `internal.rs`;
//! - input: `decode` (the page event), `charset`, `text` (visible text, terms, links);
//! - signatures: `signer`, `sketch` (shingles, min-hash, simhash, chunks, paragraphs, random
//!   projection), `sign_cache`;
//! - pairs: `near` (the sliding-window sketch index and the pair policies), `exact`;
//! - downstream of the pairs: `clusters`, `hints`, `mirrors`, `collections`, `replicas`,
//!   `inlinks`, `resolve`, `history`, `evolution`;
//! - time and state: `clock` (the watermark), `window` (event-time expiry), `checkpoint`.

pub mod charset;
pub mod checkpoint;
mod chunked;
pub mod clock;
pub mod clusters;
pub mod collections;
mod config;
pub mod decode;
mod emit;
pub mod evolution;
pub mod exact;
mod fixed;
pub mod hash;
pub mod hints;
pub mod history;
pub mod inlinks;
mod intern;
mod internal;
pub mod mirrors;
mod multimap;
pub mod near;
mod pipeline;
mod prepare;
pub mod replicas;
pub mod resolve;
mod rounds;
pub mod sign_cache;
mod signed;
pub mod signer;
pub mod site;
pub mod sketch;
mod small;
#[cfg(test)]
mod testutil;
pub mod text;
pub mod window;

pub use config::Config;
pub use decode::{decode, DecodeError, DecodeLimits, MAX_URL_BYTES};
pub use emit::{Emit, Emitter};
pub use internal::{
    Clustered, Indexed, InternalReader, InternalRecordError, Sharded, SignOutput, SignStage,
};
pub use pipeline::{KeptUrls, Role, RoleError, Stats, Topology};
pub use prepare::{Prepared, Preparer};

use time::format_description::well_known::Rfc3339;

/// Version of the tokenizer rules (visible text + terms). Bump on any change that alters terms.
/// v2: `<img>` URL terms (seed 001 §2), block-level line breaks. v3: each character of a
/// script written without spaces (Chinese, Japanese) is a term. v4: also of Thai, Lao, Khmer,
/// Myanmar and Tai Tham.
pub const TOKENIZER_VERSION: u32 = 4;

/// Milliseconds since the Unix epoch of an RFC 3339 time (`2026-11-02T10:15:00Z`).
pub fn parse_time(s: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(s, &Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// Event time as RFC 3339 UTC (`2026-11-02T10:15:00Z`; fractional seconds only when present).
pub fn format_time(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}
