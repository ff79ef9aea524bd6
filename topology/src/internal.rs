//! The split topology's internal records (DESIGN.md §3): what the sign, index, shard, verify
//! and cluster stages publish for the next, read back with their format and parameters checked,
//! and the sign stage itself ([`SignStage`]).

use crate::near;
use crate::pipeline::{ClusteredPage, IndexedPage, ShardedPage};
use crate::prepare::{Prepared, PreparedPage};
use crate::signed::{Signed, SignedParts};
use crate::{Config, DecodeError, DecodeLimits, Emit, Emitter, Topology};
use neardup_schemas::{DeadLetterReason, OutputKind, PageEvent, Source};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Layout of the internal records between the sign and index stages; bump on any change.
pub(crate) const INTERNAL_FORMAT: u32 = 10;

/// A signed page as the sign stage hands it to the index stage (the body stays behind: the
/// signatures are all the rest of the topology reads of it).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct InternalPage {
    pub(crate) format: u32,
    /// [`Config::params_fingerprint`] of the signing configuration.
    pub(crate) params: String,
    pub(crate) url: String,
    pub(crate) fetched_at: String,
    pub(crate) fetched_at_ms: i64,
    pub(crate) status: u16,
    pub(crate) content_type: Option<String>,
    pub(crate) ip: Option<String>,
    pub(crate) crawl_id: Option<String>,
    pub(crate) signed: Option<Signed>,
    /// Where the sign stage read the record (partition, offset of the input topic).
    pub(crate) origin: (i32, i64),
}

/// What the sign stage publishes for one input record.
#[derive(Debug)]
pub enum SignOutput {
    /// A decodable record: the internal record for the index stage, keyed by URL. It goes to
    /// the partition of the internal topic with the input partition's number, so each of them
    /// holds one input partition's records in their order, whichever instance signed them.
    Internal {
        /// The page's URL (the record key).
        key: String,
        /// The encoded page with its signatures.
        value: Vec<u8>,
    },
    /// A record that cannot be decoded: its dead letter.
    DeadLetter(Emit),
}

/// A record of the index stage for the cluster stage, read back.
pub struct Indexed(pub(crate) Box<IndexedPage>);

/// A record of an index stage split by key, read back ([`Topology::apply_sharded`]).
pub struct Sharded(pub(crate) Box<ShardedPage>);

/// A record of the cluster stage for the mirror stage, read back.
pub struct Clustered(pub(crate) Box<ClusteredPage>);

/// The filings among `steps` (each gets the key shards' answers).
pub(crate) fn filings(steps: &[near::Step]) -> usize {
    steps
        .iter()
        .filter(|s| matches!(s, near::Step::File { .. }))
        .count()
}

/// True when `origin` (partition, offset of a previous stage's input) is at or below the last
/// one applied of its partition; otherwise notes it as applied.
pub(crate) fn already_applied(
    upto: &mut BTreeMap<i32, i64>,
    (partition, offset): (i32, i64),
) -> bool {
    match upto.get(&partition) {
        Some(&last) if offset <= last => true,
        _ => {
            upto.insert(partition, offset);
            false
        }
    }
}

/// Reads the split topology's internal records back (on any thread), refusing those of another
/// format or made under other parameters. It holds the parameter fingerprints, so they are
/// computed once, not for every record.
pub struct InternalReader {
    pub(crate) params: String,
    pub(crate) state: String,
}

impl InternalReader {
    /// A reader for stages of configuration `cfg`.
    pub fn new(cfg: &Config) -> Self {
        InternalReader {
            params: cfg.params_fingerprint(),
            state: cfg.state_fingerprint(),
        }
    }

    /// The index stage: a page from the sign stage's internal record, ready for
    /// [`Topology::apply`] (where it gives exactly what the original input record gives).
    pub fn signed(&self, value: &[u8]) -> Result<Prepared, InternalRecordError> {
        let p: InternalPage = read_internal(value, |p: &InternalPage| p.format)?;
        same_parameters("signed", &p.params, &self.params)?;
        let page = PageEvent {
            url: p.url,
            fetched_at: p.fetched_at,
            fetched_at_ms: p.fetched_at_ms,
            status: p.status,
            content_type: p.content_type,
            ip: p.ip,
            crawl_id: p.crawl_id,
            body: None,
        };
        Ok(Prepared(Ok(Box::new(PreparedPage {
            page,
            signed: p.signed,
            origin: Some(p.origin),
        }))))
    }

    /// The cluster stage: a record of [`Topology::take_indexed`], for
    /// [`Topology::apply_indexed`].
    pub fn indexed(&self, value: &[u8]) -> Result<Indexed, InternalRecordError> {
        let r: IndexedPage = read_internal(value, |r: &IndexedPage| r.format)?;
        same_parameters("indexed", &r.state, &self.state)?;
        Ok(Indexed(Box::new(r)))
    }

    /// The mirror stage: a record of the cluster stage ([`Topology::take_indexed`] with
    /// `mirror_stage`), for [`Topology::apply_clustered`].
    pub fn clustered(&self, value: &[u8]) -> Result<Clustered, InternalRecordError> {
        let r: ClusteredPage = read_internal(value, |r: &ClusteredPage| r.page.format)?;
        same_parameters("clustered", &r.page.state, &self.state)?;
        Ok(Clustered(Box::new(r)))
    }

    /// The shard and verify stages of an index split by key: a record of the index stage or
    /// of a key shard, for [`Topology::apply_sharded`].
    pub fn sharded(&self, value: &[u8]) -> Result<Sharded, InternalRecordError> {
        let r: ShardedPage = read_internal(value, |r: &ShardedPage| r.page.format)?;
        same_parameters("sharded", &r.page.state, &self.state)?;
        Ok(Sharded(Box::new(r)))
    }
}

/// An internal record of the split topology, read back: one value of the current format and
/// nothing after it.
pub(crate) fn read_internal<T: serde::de::DeserializeOwned>(
    value: &[u8],
    format: impl Fn(&T) -> u32,
) -> Result<T, InternalRecordError> {
    let (r, rest): (T, &[u8]) =
        postcard::take_from_bytes(value).map_err(|e| InternalRecordError(e.to_string()))?;
    if format(&r) != INTERNAL_FORMAT || !rest.is_empty() {
        return Err(InternalRecordError(format!(
            "format {} (this is {INTERNAL_FORMAT}), {} bytes left over",
            format(&r),
            rest.len()
        )));
    }
    Ok(r)
}

/// Refuses an internal record made (`what`: signed, indexed) under other parameters.
pub(crate) fn same_parameters(
    what: &str,
    found: &str,
    ours: &str,
) -> Result<(), InternalRecordError> {
    if found == ours {
        Ok(())
    } else {
        Err(InternalRecordError(format!(
            "{what} under parameters {found}, this stage's are {ours}"
        )))
    }
}

/// Why an internal record cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("an internal record of the split topology cannot be read ({0}); its stages must run the same neardup version and parameters")]
pub struct InternalRecordError(pub(crate) String);

/// The split topology's sign stage: turns each prepared input record into what the stage
/// publishes. It holds the signing parameters' fingerprint, so that is computed once, not for
/// every record.
pub struct SignStage {
    pub(crate) params: String,
    pub(crate) decode: DecodeLimits,
    /// What the stages after it read of a page's signatures besides the signature event's
    /// `content` (the same numbers, already written as JSON): the rest is left out of the
    /// internal record.
    pub(crate) keep: KeptParts,
    /// [`Config::max_output_bytes`]: a larger record for the index stage becomes a dead letter.
    pub(crate) max_output_bytes: usize,
}

/// The parts of a page's signatures the topology reads besides its signature event's content,
/// under a configuration (the checksums and Alg. B always: the change since the last fetch).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeptParts {
    /// Collections, the in-link ranking, the Hyperlink Map and evolution read out-links.
    pub(crate) links: bool,
    /// The Hyperlink Map veto reads the random projection.
    pub(crate) rp: bool,
    /// Evolution reads the paragraph fingerprints.
    pub(crate) paragraphs: bool,
}

impl KeptParts {
    pub(crate) fn of(cfg: &Config) -> Self {
        KeptParts {
            links: cfg.collections
                || cfg.canonical.uses_inlinks()
                || cfg.hm_veto.is_some()
                || cfg.track_evolution,
            rp: cfg.hm_veto.is_some(),
            paragraphs: cfg.track_evolution,
        }
    }

    /// `parts` without what the topology does not read; the chunks it never does (they are in
    /// the content).
    pub(crate) fn of_parts(self, p: &SignedParts) -> SignedParts {
        fn kept<T: Clone + Default>(keep: bool, v: &T) -> T {
            if keep {
                v.clone()
            } else {
                T::default()
            }
        }
        SignedParts {
            charset: p.charset.clone(),
            chunks: Vec::new(),
            paragraphs: kept(self.paragraphs, &p.paragraphs),
            rp: kept(self.rp, &p.rp),
            links: kept(self.links, &p.links),
            link_ends: kept(self.links, &p.link_ends),
            ..*p
        }
    }
}

impl SignStage {
    /// The sign stage of configuration `cfg`.
    pub fn new(cfg: &Config) -> Self {
        SignStage {
            params: cfg.params_fingerprint(),
            decode: cfg.decode.clone(),
            keep: KeptParts::of(cfg),
            max_output_bytes: cfg.max_output_bytes,
        }
    }

    /// The record for the index stage, or the dead letter of a record that cannot be decoded
    /// (`raw` and `source` are the input record and where it came from), counted in `topo`'s
    /// stats as the all-in-one stage counts them (for the stage's summary and metrics).
    pub fn output(
        &self,
        prepared: Prepared,
        raw: &[u8],
        source: &Source,
        topo: &mut Topology,
    ) -> SignOutput {
        let stats = &mut topo.state.stats;
        stats.records += 1;
        match &prepared.0 {
            Ok(p) => stats.count(p.signed.is_some(), p.page.is_inconclusive()),
            Err(e) => {
                *stats.dead_letters.entry(e.reason).or_default() += 1;
                *stats.outputs.entry(OutputKind::DeadLetter).or_default() += 1;
            }
        }
        match prepared.0 {
            Ok(p) => {
                let PreparedPage { page, signed, .. } = *p;
                let key = page.url.clone();
                let internal = InternalPage {
                    format: INTERNAL_FORMAT,
                    params: self.params.clone(),
                    url: page.url,
                    fetched_at: page.fetched_at,
                    fetched_at_ms: page.fetched_at_ms,
                    status: page.status,
                    content_type: page.content_type,
                    ip: page.ip,
                    crawl_id: page.crawl_id,
                    signed: signed.map(|sg| Signed {
                        parts: Arc::new(self.keep.of_parts(&sg.parts)),
                        ..sg
                    }),
                    origin: match source {
                        Source::Kafka {
                            partition, offset, ..
                        } => (*partition, *offset),
                        Source::File { line, .. } => (0, *line as i64),
                    },
                };
                let value = postcard::to_stdvec(&internal).expect("a signed page serializes");
                let size = key.len() + value.len();
                if size <= self.max_output_bytes {
                    return SignOutput::Internal { key, value };
                }
                // Its signature event would be about as large: the all-in-one topology
                // publishes the dead letter of that instead, and indexes the page.
                let reason = DeadLetterReason::OutputTooLarge;
                *stats.dead_letters.entry(reason).or_default() += 1;
                *stats.outputs.entry(OutputKind::DeadLetter).or_default() += 1;
                let detail = format!(
                    "its record for the index stage is {size} bytes, over the {}-byte output limit (max_output_bytes): the page was not indexed; to index such pages, raise max_output_bytes and the internal topic's max.message.bytes",
                    self.max_output_bytes
                );
                self.dead_letter(DecodeError { reason, detail }, raw, source)
            }
            Err(e) => self.dead_letter(e, raw, source),
        }
    }

    /// The dead letter of the input record `raw` from `source`.
    pub(crate) fn dead_letter(&self, e: DecodeError, raw: &[u8], source: &Source) -> SignOutput {
        let mut emitter = Emitter::new();
        emitter.emit(e.into_dead_letter(raw, source, &self.decode));
        let dead = emitter.drain().next().expect("one dead letter");
        SignOutput::DeadLetter(dead)
    }
}
