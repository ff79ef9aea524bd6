//! The output events of DESIGN.md §2, one struct per topic.
//!
//! Field order is part of the contract: it fixes the serialized bytes and so the `event_id`.

use crate::{OutputEvent, OutputKind, Source};
use serde::{Deserialize, Serialize};

macro_rules! output_event {
    ($ty:ty, $kind:expr, |$s:ident| $key:expr) => {
        impl OutputEvent for $ty {
            const KIND: OutputKind = $kind;
            fn key(&self) -> String {
                let $s = self;
                $key
            }
            fn event_id_mut(&mut self) -> &mut String {
                &mut self.event_id
            }
        }
    };
}

// ------------------------------------------------------------------------------------------
// neardup.signatures
// ------------------------------------------------------------------------------------------

/// `neardup.signatures/v1`: what neardup computed for one fetched page.
///
/// `C` is how the signatures of a page with content are held; a producer that has them as
/// JSON already may use another type that serializes to a [`ContentSignatures`] object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "C: Deserialize<'de>"))]
pub struct SignatureEvent<C = ContentSignatures> {
    /// Always `neardup.signatures/v1`.
    pub schema: String,
    /// Hash of everything else in the event.
    pub event_id: String,
    /// The page URL (also the record key).
    pub url: String,
    /// Fetch time (RFC 3339, UTC, as normalised by neardup).
    pub fetched_at: String,
    /// The crawl round, if the input named one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub crawl_id: Option<String>,
    /// HTTP status of the fetch.
    pub status: u16,
    /// Fingerprint of the parameters the signatures depend on (algorithms, seeds, tokenizer version).
    pub params: String,
    /// Signatures, present when the fetch returned content.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub content: Option<C>,
    /// Change since the previous successful fetch of the URL in the window, if there was one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub change: Option<ChangeSinceLast>,
}

/// The signatures of a page with content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentSignatures {
    /// XXH3-128 of the raw body bytes, 32 hex digits: equal means byte-identical (`exact`).
    pub checksum: String,
    /// XXH3-128 of the normalised token sequence, 32 hex digits: equal means identical visible text.
    pub text_hash: String,
    /// Raw body size in bytes.
    pub body_bytes: u64,
    /// Size of the visible text in bytes (UTF-8): an HTML page's rendered text, a `text/plain`
    /// body's whole text.
    pub text_bytes: u64,
    /// Number of terms (tokens) in the visible text.
    pub tokens: u64,
    /// The charset the body was decoded with, or `binary` for a body that is not text (see
    /// the JSON schema).
    pub charset: String,
    /// True when the page had more terms than the configured cap and only the first were used.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub tokens_truncated: bool,
    /// Alg. B: number of distinct-position shingles (k-term windows) of the page.
    pub shingles: u32,
    /// Alg. B: the 6 supershingles (each a 64-bit hash of 14 min-values), 16 hex digits each.
    pub supershingles: Vec<String>,
    /// Alg. B: the 84 min-values, 16 hex digits each (only when configured: they are large).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub minvalues: Option<Vec<String>>,
    /// Alg. C: the 384-bit simhash, 96 hex digits: its six 64-bit words in order, word 0 first.
    pub simhash: String,
    /// Cho: sorted, distinct 32-bit chunk fingerprints, 8 hex digits each; on a page with more
    /// than the cap (8,192 by default), the smallest ones (a bottom-k sample).
    pub chunks: Vec<String>,
    /// How many chunk fingerprints the cap left out (absent: none).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub chunks_omitted: u32,
    /// Pereira: sorted 64-bit shingle-paragraph fingerprints, 16 hex digits each (repeats kept);
    /// on a page with more than the cap (4,096 by default), the smallest ones.
    pub paragraphs: Vec<String>,
    /// How many paragraph fingerprints the cap left out (absent: none).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub paragraphs_omitted: u32,
    /// Pereira: the visible text is under 450 characters (such pages were left out by the paper).
    pub short_page: bool,
    /// Di Iorio: the K-dimensional random projection of the bag of words, each in [0, 1],
    /// rounded to 6 decimals.
    pub rp: Vec<f64>,
    /// Out-links, resolved to absolute http(s) URLs, fragment dropped, in document order (none
    /// for a `text/plain` body, which has no markup); on a page whose links take more than the
    /// cap (160 KiB of JSON by default), each once, the first that fit.
    pub out_links: Vec<String>,
    /// How many out-links (repeats included) the cap left out (absent: none).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub out_links_omitted: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl<C: Serialize> OutputEvent for SignatureEvent<C> {
    const KIND: OutputKind = OutputKind::Signatures;
    fn key(&self) -> String {
        self.url.clone()
    }
    fn event_id_mut(&mut self) -> &mut String {
        &mut self.event_id
    }
}

/// One of the six change buckets of seed 000 fig. 10, from most to least change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeBucket {
    /// No min-value agrees ("complete change", 0 common features).
    Complete,
    /// 1–28 min-values agree ("large change").
    Large,
    /// 29–56 min-values agree ("medium change").
    Medium,
    /// 57–83 min-values agree, or all 84 while the text changed ("small change").
    Small,
    /// Same visible text, different bytes: only the markup changed ("no text change").
    NoTextChange,
    /// Bitwise-identical content ("no change", fig. 8's value 85).
    NoChange,
}

impl ChangeBucket {
    /// All buckets, from most to least change (the order of `Ord`).
    pub const ALL: [ChangeBucket; 6] = [
        ChangeBucket::Complete,
        ChangeBucket::Large,
        ChangeBucket::Medium,
        ChangeBucket::Small,
        ChangeBucket::NoTextChange,
        ChangeBucket::NoChange,
    ];

    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeBucket::Complete => "complete",
            ChangeBucket::Large => "large",
            ChangeBucket::Medium => "medium",
            ChangeBucket::Small => "small",
            ChangeBucket::NoTextChange => "no_text_change",
            ChangeBucket::NoChange => "no_change",
        }
    }
}

impl std::fmt::Display for ChangeBucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a page changed since the previous successful fetch of the same URL (seed 000 §3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangeSinceLast {
    /// When the previous fetch was made.
    pub previous_fetched_at: String,
    /// Min-values (of 84) the two fetches agree on.
    pub agreeing_minvalues: u8,
    /// Byte-identical bodies.
    pub same_checksum: bool,
    /// Identical normalised text.
    pub same_text: bool,
    /// The change bucket of seed 000 fig. 10.
    pub bucket: ChangeBucket,
}

// ------------------------------------------------------------------------------------------
// neardup.pairs
// ------------------------------------------------------------------------------------------

/// Whether a pair starts or stops holding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairState {
    /// The two pages are near-duplicates (again).
    Detected,
    /// The pair stopped holding: a page changed, vanished or left the window.
    Retracted,
}

/// How close two pages are (DESIGN.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairLevel {
    /// At least the policy's threshold.
    VerySimilar,
    /// 6 of 6 supershingles agree.
    VirtuallyIdentical,
    /// Byte-identical bodies (same content checksum).
    Exact,
}

impl PairLevel {
    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            PairLevel::VerySimilar => "very_similar",
            PairLevel::VirtuallyIdentical => "virtually_identical",
            PairLevel::Exact => "exact",
        }
    }
}

/// `neardup.pairs/v1`: a verified near-duplicate pair, or its retraction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairEvent {
    /// Always `neardup.pairs/v1`.
    pub schema: String,
    /// Hash of everything else in the event.
    pub event_id: String,
    /// `detected` or `retracted`.
    pub state: PairState,
    /// The smaller URL of the pair.
    pub a: String,
    /// The larger URL of the pair.
    pub b: String,
    /// `exact`, `virtually_identical` or `very_similar`.
    pub level: PairLevel,
    /// Agreeing supershingles, 0–6.
    pub b_similarity: u8,
    /// Agreeing simhash bits, 0–384.
    pub c_similarity: u16,
    /// Estimated shingle Jaccard similarity, if known.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub jaccard: Option<f64>,
    /// Both URLs on one site (seed 001: host minus its first label when it has two dots or more).
    pub same_site: bool,
    /// Event time (the `fetched_at` of the page event that caused this change).
    pub at: String,
    /// The crawl round of the page event that caused this change.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub crawl_id: Option<String>,
}

impl PairEvent {
    /// A pair event; `a` and `b` are put in sorted order.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        a: String,
        b: String,
        state: PairState,
        level: PairLevel,
        b_similarity: u8,
        c_similarity: u16,
        jaccard: Option<f64>,
        same_site: bool,
        at: String,
        crawl_id: Option<String>,
    ) -> Self {
        let (a, b) = if a <= b { (a, b) } else { (b, a) };
        // JSON has no NaN: a non-finite estimate is left out rather than written as null.
        let jaccard = jaccard.filter(|j| j.is_finite());
        PairEvent {
            schema: OutputKind::Pairs.schema().into(),
            event_id: String::new(),
            state,
            a,
            b,
            level,
            b_similarity,
            c_similarity,
            jaccard,
            same_site,
            at,
            crawl_id,
        }
    }
}

output_event!(PairEvent, OutputKind::Pairs, |s| format!("{} {}", s.a, s.b));

// ------------------------------------------------------------------------------------------
// neardup.clusters
// ------------------------------------------------------------------------------------------

/// What happened to a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterChangeKind {
    /// A new cluster (two or more members).
    Created,
    /// Pages joined an existing cluster.
    Joined,
    /// Pages left a cluster that still has two or more members.
    Left,
    /// Clusters merged into this one.
    Merged,
    /// This cluster split into several.
    Split,
    /// The cluster fell below two members and no longer exists.
    Dissolved,
    /// The canonical member changed.
    CanonicalChanged,
}

/// `neardup.clusters/v1`: a change to a cluster of near-duplicate pages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterEvent {
    /// Always `neardup.clusters/v1`.
    pub schema: String,
    /// Hash of everything else in the event.
    pub event_id: String,
    /// Stable cluster id (also the record key).
    pub cluster_id: String,
    /// The clustering level: `exact`, `virtually_identical` or `very_similar`.
    pub level: PairLevel,
    /// What happened.
    pub change: ClusterChangeKind,
    /// Members after the change (0 when dissolved).
    pub size: u64,
    /// The canonical member after the change (absent when dissolved).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub canonical: Option<String>,
    /// URLs that joined with this change.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub added: Vec<String>,
    /// URLs that left with this change.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub removed: Vec<String>,
    /// For `merged`: the ids of the clusters merged into this one; for `split`: the ids it split into.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub related: Vec<String>,
    /// Event time of the page event that caused the change.
    pub at: String,
}

output_event!(ClusterEvent, OutputKind::Clusters, |s| s.cluster_id.clone());

// ------------------------------------------------------------------------------------------
// neardup.mirrors
// ------------------------------------------------------------------------------------------

/// The state of a host pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MirrorState {
    /// Enough pages in shared clusters.
    Candidate,
    /// Confirmed by URL-suffix evidence.
    Confirmed,
    /// No longer supported by the evidence.
    Retracted,
    /// The two host names are aliases of one host (leading `www.`, same address).
    Alias,
    /// One host serves the same pages under several paths (reported with `hosts` = [host, host]).
    AutoMirror,
}

/// `neardup.mirrors/v1`: a mirrored host pair (seed 000 §4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MirrorEvent {
    /// Always `neardup.mirrors/v1`.
    pub schema: String,
    /// Hash of everything else in the event.
    pub event_id: String,
    /// The two hosts, sorted.
    pub hosts: [String; 2],
    /// The pair's state.
    pub state: MirrorState,
    /// Pages of the two hosts that share a cluster.
    pub shared_pages: u64,
    /// Path prefixes that correspond on the two hosts (same suffix below them).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub prefixes: Vec<[String; 2]>,
    /// Event time of the change.
    pub at: String,
}

impl MirrorEvent {
    /// A mirror event with the hosts (and each prefix pair, to match) in sorted order.
    pub fn new(
        a: String,
        b: String,
        state: MirrorState,
        shared_pages: u64,
        mut prefixes: Vec<[String; 2]>,
        at: String,
    ) -> Self {
        let hosts = if a <= b {
            [a, b]
        } else {
            prefixes.iter_mut().for_each(|p| p.swap(0, 1));
            [b, a]
        };
        MirrorEvent {
            schema: OutputKind::Mirrors.schema().into(),
            event_id: String::new(),
            hosts,
            state,
            shared_pages,
            prefixes,
            at,
        }
    }
}

output_event!(MirrorEvent, OutputKind::Mirrors, |s| format!(
    "{} {}",
    s.hosts[0], s.hosts[1]
));

// ------------------------------------------------------------------------------------------
// neardup.collections
// ------------------------------------------------------------------------------------------

/// One host's copy of a replicated collection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectionHost {
    /// Host name.
    pub host: String,
    /// Root paths of the collection on that host.
    pub root_paths: Vec<String>,
    /// Pages of the collection on that host.
    pub pages: u64,
}

/// Whether a collection is (still) replicated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectionState {
    /// The collection exists with the stated copies.
    Updated,
    /// The collection is no longer replicated.
    Dissolved,
}

/// `neardup.collections/v1`: a replicated collection (seed 003).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectionEvent {
    /// Always `neardup.collections/v1`.
    pub schema: String,
    /// Hash of everything else in the event.
    pub event_id: String,
    /// Stable collection id (also the record key).
    pub collection_id: String,
    /// `updated` or `dissolved`.
    pub state: CollectionState,
    /// Number of copies (hosts or roots) of the collection.
    pub cardinality: u64,
    /// Pages per copy.
    pub size: u64,
    /// The copies.
    pub hosts: Vec<CollectionHost>,
    /// Event time of the change.
    pub at: String,
}

output_event!(CollectionEvent, OutputKind::Collections, |s| s
    .collection_id
    .clone());

// ------------------------------------------------------------------------------------------
// neardup.recrawl
// ------------------------------------------------------------------------------------------

/// A crawl hint for one URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecrawlHint {
    /// The URL is its cluster's canonical member: keep crawling it as usual.
    Keep,
    /// The URL is a copy of the canonical one: it can be recrawled less often.
    Deprioritize,
    /// The URL is no longer a copy of anything: crawl it as usual again.
    Restore,
}

/// `neardup.recrawl/v1`: a crawl hint (seed 003 §5.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecrawlEvent {
    /// Always `neardup.recrawl/v1`.
    pub schema: String,
    /// Hash of everything else in the event.
    pub event_id: String,
    /// The URL the hint is about (also the record key).
    pub url: String,
    /// `keep`, `deprioritize` or `restore`.
    pub hint: RecrawlHint,
    /// The canonical URL of the URL's cluster (absent for `restore`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub canonical: Option<String>,
    /// The cluster the hint derives from.
    pub cluster_id: String,
    /// Event time of the change.
    pub at: String,
}

output_event!(RecrawlEvent, OutputKind::Recrawl, |s| s.url.clone());

// ------------------------------------------------------------------------------------------
// neardup.dead-letter
// ------------------------------------------------------------------------------------------

/// Why an input record could not be processed. Stable, machine-readable names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeadLetterReason {
    /// The record is not valid UTF-8.
    InvalidUtf8,
    /// The record is not JSON (or truncated JSON).
    NotJson,
    /// The record is JSON but not an object.
    NotAnObject,
    /// A required field (`url`, `fetched_at`, `status`) is missing.
    MissingField,
    /// A field has the wrong JSON type.
    WrongType,
    /// `url` is not an absolute http(s) URL with a host, or is over 8,192 bytes long.
    InvalidUrl,
    /// `fetched_at` is not an RFC 3339 timestamp.
    InvalidTimestamp,
    /// `status` is outside 0 and 100–599.
    StatusOutOfRange,
    /// `body_base64` is not standard base64.
    InvalidBase64,
    /// The body's bytes do not decode in the declared (or sniffed) charset.
    UndecodableBody,
    /// Both `body` and `body_base64` were sent.
    ConflictingBody,
    /// The record or its body is over the configured size limit.
    BodyTooLarge,
    /// An output event the record caused is over the configured output size limit
    /// (`max_output_bytes`, which a Kafka producer and topic must accept): it was not published,
    /// and the dead letter's payload is that event, cut like any payload.
    OutputTooLarge,
    /// A replayed file is damaged where a record should be: a WARC record cut off, or without
    /// its framing (no `WARC/1.x` line where one should start, no valid `Content-Length`), or a
    /// compressed file that stops decompressing. The payload is the damaged bytes (cut like
    /// any payload); the detail names the byte offset and how far the replay skipped. Only
    /// `neardup replay` reads files, so only it gives this reason.
    DamagedInput,
}

impl DeadLetterReason {
    /// Every reason, in a fixed order.
    pub const ALL: [DeadLetterReason; 14] = [
        DeadLetterReason::InvalidUtf8,
        DeadLetterReason::NotJson,
        DeadLetterReason::NotAnObject,
        DeadLetterReason::MissingField,
        DeadLetterReason::WrongType,
        DeadLetterReason::InvalidUrl,
        DeadLetterReason::InvalidTimestamp,
        DeadLetterReason::StatusOutOfRange,
        DeadLetterReason::InvalidBase64,
        DeadLetterReason::UndecodableBody,
        DeadLetterReason::ConflictingBody,
        DeadLetterReason::BodyTooLarge,
        DeadLetterReason::OutputTooLarge,
        DeadLetterReason::DamagedInput,
    ];

    /// The snake_case name used in events and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterReason::InvalidUtf8 => "invalid_utf8",
            DeadLetterReason::NotJson => "not_json",
            DeadLetterReason::NotAnObject => "not_an_object",
            DeadLetterReason::MissingField => "missing_field",
            DeadLetterReason::WrongType => "wrong_type",
            DeadLetterReason::InvalidUrl => "invalid_url",
            DeadLetterReason::InvalidTimestamp => "invalid_timestamp",
            DeadLetterReason::StatusOutOfRange => "status_out_of_range",
            DeadLetterReason::InvalidBase64 => "invalid_base64",
            DeadLetterReason::UndecodableBody => "undecodable_body",
            DeadLetterReason::ConflictingBody => "conflicting_body",
            DeadLetterReason::BodyTooLarge => "body_too_large",
            DeadLetterReason::OutputTooLarge => "output_too_large",
            DeadLetterReason::DamagedInput => "damaged_input",
        }
    }
}

/// `neardup.dead-letter/v1`: an input that could not be processed, never silently dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadLetterEvent {
    /// Always `neardup.dead-letter/v1`.
    pub schema: String,
    /// Hash of everything else in the event.
    pub event_id: String,
    /// Machine-readable reason.
    pub reason: DeadLetterReason,
    /// Human-readable detail: which field, what was wrong, what to do.
    pub detail: String,
    /// Where the record came from (topic/partition/offset or file/line).
    pub source: Source,
    /// Size of the original record in bytes.
    pub payload_bytes: u64,
    /// The original record (lossy UTF-8), cut to the configured limit; for `output_too_large`,
    /// the output event that was not published.
    pub payload: String,
    /// True when `payload` was cut; the source coordinates locate the whole record.
    pub payload_truncated: bool,
}

output_event!(DeadLetterEvent, OutputKind::DeadLetter, |s| s
    .source
    .to_string());
