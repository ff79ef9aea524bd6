//! Checkpoints: the topology's whole state (windows, pair store, clusters, host-pair evidence,
//! collections, history, counters) as bytes, with the input offsets it reflects (DESIGN.md §5).
//!
//! A checkpoint is a byte string, built and read here without I/O (the consumer decides where it
//! lives):
//!
//! ```text
//! NEARDUP-CHECKPOINT\n
//! {"format":1,"version":"0.1.0","state":"s1-…","topic":"crawl.pages","offsets":{"0":1234},…}\n
//! <body: the state, postcard-encoded>
//! ```
//!
//! The JSON header line can be read without the body ([`read_header`]: `head -c 4096` shows it).
//! Restoring refuses, with an error that says what to do, a checkpoint of another format or
//! neardup version, of other state parameters ([`Config::state_fingerprint`]), of another input
//! topic, or whose body is truncated or corrupt (its length and XXH3 hash are in the header).
//! Offsets are the *next* offset to read in each input partition: the state reflects every
//! record before them and none after.

use crate::{Config, State, Topology};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The layout of the header and body. Bump on any change to a serialized structure.
pub const FORMAT: u32 = 12;

const MAGIC: &[u8] = b"NEARDUP-CHECKPOINT\n";

/// What a checkpoint says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`] of the writer.
    pub format: u32,
    /// The neardup version that wrote it.
    pub version: String,
    /// [`Config::state_fingerprint`] of the writer's configuration.
    pub state: String,
    /// The input topic the offsets belong to.
    pub topic: String,
    /// Per input partition, the next offset to read: the state reflects every record before it.
    pub offsets: BTreeMap<i32, i64>,
    /// The largest event time the state has seen (RFC 3339), for people reading the header.
    pub watermark: Option<String>,
    /// Records the state has seen.
    pub records: u64,
    /// Length of the body in bytes.
    pub body_bytes: u64,
    /// XXH3-64 of the body, hex.
    pub body_xxh3: String,
}

/// Why a checkpoint cannot be restored.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Not a checkpoint, or its header is damaged.
    #[error(
        "not a neardup checkpoint ({0}); remove the file to rebuild the state from the input topic"
    )]
    NotACheckpoint(String),
    /// Written by another format or version.
    #[error("checkpoint written by neardup {found_version} (format {found_format}), this is {version} (format {format}); checkpoints are read by the version that wrote them: remove the file to rebuild the state from the input topic, or run neardup {found_version}")]
    Version {
        /// The writer's version.
        found_version: String,
        /// The writer's format.
        found_format: u32,
        /// This version.
        version: &'static str,
        /// This format.
        format: u32,
    },
    /// Written under other state parameters.
    #[error("checkpoint state parameters {found} differ from this configuration's {expected} (window, pair policy and thresholds, canonical policy, hint level, mirrors, collections, HM veto, signature parameters); restore the configuration it was written with, or remove the file to rebuild the state under the new one")]
    Parameters {
        /// The checkpoint's fingerprint.
        found: String,
        /// This configuration's fingerprint.
        expected: String,
    },
    /// Written for another input topic.
    #[error("checkpoint is of input topic {found}, this run reads {expected}; point the checkpoint directory elsewhere or remove the file")]
    Topic {
        /// The checkpoint's topic.
        found: String,
        /// This run's topic.
        expected: String,
    },
    /// The body is cut short or altered.
    #[error("checkpoint body is damaged ({0}); remove the file to rebuild the state from the input topic")]
    Damaged(String),
}

/// The checkpoint of `topo`, whose state reflects the records of `topic` before `offsets`.
pub fn write(topo: &Topology, topic: &str, offsets: &BTreeMap<i32, i64>) -> Vec<u8> {
    // Serializing owned, plain data into a Vec cannot fail.
    let body = postcard::to_stdvec(&topo.state).expect("the state serializes");
    let header = Header {
        format: FORMAT,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        state: topo.state_fingerprint.clone(),
        topic: topic.to_owned(),
        offsets: offsets.clone(),
        watermark: topo.watermark_ms().map(crate::format_time),
        records: topo.state.stats.records,
        body_bytes: body.len() as u64,
        body_xxh3: format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&body)),
    };
    let mut out = MAGIC.to_vec();
    serde_json::to_writer(&mut out, &header).expect("the header serializes");
    out.push(b'\n');
    out.extend_from_slice(&body);
    out
}

/// The header of a checkpoint, and where its body starts.
pub fn read_header(bytes: &[u8]) -> Result<(Header, usize), CheckpointError> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| CheckpointError::NotACheckpoint("no NEARDUP-CHECKPOINT line".into()))?;
    let end = rest
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| CheckpointError::NotACheckpoint("the header line is cut short".into()))?;
    let header: Header = serde_json::from_slice(&rest[..end])
        .map_err(|e| CheckpointError::NotACheckpoint(format!("header: {e}")))?;
    Ok((header, MAGIC.len() + end + 1))
}

/// Restores a topology of configuration `cfg` reading `topic` from a checkpoint, after checking
/// that it was written by this format and version, under the same state parameters, for the same
/// topic, and arrived whole.
pub fn restore(
    cfg: Config,
    topic: &str,
    bytes: &[u8],
) -> Result<(Topology, Header), CheckpointError> {
    let (header, start) = read_header(bytes)?;
    if header.format != FORMAT || header.version != env!("CARGO_PKG_VERSION") {
        return Err(CheckpointError::Version {
            found_version: header.version,
            found_format: header.format,
            version: env!("CARGO_PKG_VERSION"),
            format: FORMAT,
        });
    }
    let expected = cfg.state_fingerprint();
    if header.state != expected {
        return Err(CheckpointError::Parameters {
            found: header.state,
            expected,
        });
    }
    if header.topic != topic {
        return Err(CheckpointError::Topic {
            found: header.topic,
            expected: topic.to_owned(),
        });
    }
    let body = &bytes[start..];
    if body.len() as u64 != header.body_bytes {
        return Err(CheckpointError::Damaged(format!(
            "{} bytes of body, the header says {}",
            body.len(),
            header.body_bytes
        )));
    }
    let hash = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(body));
    if hash != header.body_xxh3 {
        return Err(CheckpointError::Damaged(format!(
            "body hash {hash}, the header says {}",
            header.body_xxh3
        )));
    }
    let (state, rest): (State, &[u8]) =
        postcard::take_from_bytes(body).map_err(|e| CheckpointError::Damaged(e.to_string()))?;
    if !rest.is_empty() {
        return Err(CheckpointError::Damaged(format!(
            "{} bytes left after the state",
            rest.len()
        )));
    }
    let mut topo = Topology::new(cfg);
    topo.state = state;
    topo.after_restore();
    Ok((topo, header))
}
