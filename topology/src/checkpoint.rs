//! Checkpoints: the topology's whole state (windows, pair store, clusters, host-pair evidence,
//! collections, history, counters) as bytes, with the input offsets it reflects (DESIGN.md §5).
//!
//! A checkpoint is a byte string, built and read here without I/O of this crate's own: it is
//! written into any `Write + Seek` the consumer gives ([`Snapshot::write_to`]: a file) or into
//! memory ([`write()`]), and read from bytes (the consumer decides where it lives):
//!
//! ```text
//! NEARDUP-CHECKPOINT\n
//! {"format":1,"version":"0.1.0","state":"s1-…","topic":"crawl.pages","offsets":{"0":1234},…}   \n
//! <body: the state, postcard-encoded>
//! ```
//!
//! (the header line padded with spaces, as it is written before the body's length and hash are
//! known and again after).
//!
//! The JSON header line can be read without the body ([`read_header`]: `head -c 4096` shows it).
//! Restoring refuses, with an error that says what to do, a checkpoint of another format or
//! neardup version, of other state parameters ([`Config::state_fingerprint`]), of another input
//! topic, or whose body is truncated or corrupt (its length and XXH3 hash are in the header).
//! Offsets are the *next* offset to read in each input partition: the state reflects every
//! record before them and none after.

use crate::pipeline::State;
use crate::{Config, Topology};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, Seek, SeekFrom, Write};
use xxhash_rust::xxh3::Xxh3;

/// The layout of the header and body. Bump on any change to a serialized structure.
pub const FORMAT: u32 = 19;

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
    let mut out = std::io::Cursor::new(Vec::new());
    write_state(&topo.state, header(topo, topic, offsets), &mut out, CHUNK)
        .expect("writing to memory cannot fail");
    out.into_inner()
}

/// The state of a topology at a barrier, with the offsets it reflects, to be written while the
/// topology goes on: [`snapshot`] copies the state, and [`Snapshot::write_to`] writes it as
/// [`write()`] would have at the barrier.
///
/// Input waits while a checkpoint's state is taken, and serializing it took 3-5 µs per windowed
/// page (10-15 µs under load: seconds for a window of a million pages). A copy takes about a
/// quarter of that (`checkpoint_bench`, the medium crawl's state: 0.018-0.020 s against
/// 0.074-0.130 s, 0.011-0.015 against 0.050-0.056 s without collections), and holds less
/// memory than the bytes of the checkpoint, since it shares the URLs' strings with the state;
/// the checkpoint's bytes are then written out in pieces, never held whole.
pub struct Snapshot {
    state: State,
    header: Header,
}

/// A [`Snapshot`] of `topo`, whose state reflects the records of `topic` before `offsets`.
pub fn snapshot(topo: &Topology, topic: &str, offsets: &BTreeMap<i32, i64>) -> Snapshot {
    Snapshot {
        state: topo.state.snapshot(),
        header: header(topo, topic, offsets),
    }
}

impl Snapshot {
    /// Writes the checkpoint to `out`, which must be at its start (a new file): the same bytes
    /// as [`write()`] at the barrier. Returns how many.
    pub fn write_to<W: Write + Seek>(&self, out: W) -> std::io::Result<u64> {
        write_state(&self.state, self.header.clone(), out, CHUNK)
    }
}

/// The header of a checkpoint of `topo`, but for the body's length and hash.
pub(crate) fn header(topo: &Topology, topic: &str, offsets: &BTreeMap<i32, i64>) -> Header {
    Header {
        format: FORMAT,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        state: topo.state_fingerprint.clone(),
        topic: topic.to_owned(),
        offsets: offsets.clone(),
        watermark: topo.watermark_ms().map(crate::format_time),
        records: topo.state.stats.records,
        body_bytes: 0,
        body_xxh3: String::new(),
    }
}

/// How many bytes of the body are written at a time.
const CHUNK: usize = 1 << 20;

/// Writes the checkpoint of `state` to `out`, from its start: the header line is written first
/// with the widest body length there is and a blank hash, the body is streamed after it
/// `chunk` bytes at a time while its length and hash are counted, and the header is then
/// written again in place with both, padded with spaces to the same width (JSON whitespace,
/// which [`read_header`] skips).
pub(crate) fn write_state<W: Write + Seek>(
    state: &State,
    mut header: Header,
    mut out: W,
    chunk: usize,
) -> io::Result<u64> {
    header.body_bytes = u64::MAX;
    header.body_xxh3 = format!("{:016x}", 0);
    let width = serde_json::to_vec(&header)?.len();
    out.write_all(MAGIC)?;
    out.write_all(&vec![b' '; width])?;
    out.write_all(b"\n")?;
    let mut error = None;
    let body = Body {
        chunk: Vec::with_capacity(chunk),
        size: chunk,
        out: &mut out,
        hash: Xxh3::new(),
        bytes: 0,
        error: &mut error,
    };
    let (bytes, hash) = match postcard::serialize_with_flavor(state, body) {
        Ok(done) => done,
        Err(e) => return Err(error.unwrap_or_else(|| io::Error::other(e))),
    };
    header.body_bytes = bytes;
    header.body_xxh3 = format!("{hash:016x}");
    let mut line = serde_json::to_vec(&header)?;
    if line.len() > width {
        // Cannot happen (the length was written at its widest, the hash is of fixed width),
        // but a header cut short would make the checkpoint unreadable.
        return Err(io::Error::other("the checkpoint header outgrew its place"));
    }
    line.resize(width, b' ');
    out.seek(SeekFrom::Start(MAGIC.len() as u64))?;
    out.write_all(&line)?;
    let end = (MAGIC.len() + width + 1) as u64 + bytes;
    out.seek(SeekFrom::Start(end))?;
    Ok(end)
}

/// A postcard output that writes the body to `out` a chunk at a time, counting its length and
/// hash; a write that fails is kept in `error` (postcard's own error cannot carry it).
struct Body<'a, W: Write> {
    chunk: Vec<u8>,
    /// The length at which `chunk` is written out.
    size: usize,
    out: &'a mut W,
    hash: Xxh3,
    bytes: u64,
    error: &'a mut Option<io::Error>,
}

impl<W: Write> Body<'_, W> {
    fn flush(&mut self) -> postcard::Result<()> {
        self.hash.update(&self.chunk);
        self.bytes += self.chunk.len() as u64;
        let written = self.out.write_all(&self.chunk);
        self.chunk.clear();
        written.map_err(|e| {
            *self.error = Some(e);
            postcard::Error::SerializeBufferFull
        })
    }
}

impl<W: Write> postcard::ser_flavors::Flavor for Body<'_, W> {
    /// The body's length and hash.
    type Output = (u64, u64);

    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        self.chunk.push(byte);
        if self.chunk.len() >= self.size {
            self.flush()?;
        }
        Ok(())
    }

    fn try_extend(&mut self, bytes: &[u8]) -> postcard::Result<()> {
        self.chunk.extend_from_slice(bytes);
        if self.chunk.len() >= self.size {
            self.flush()?;
        }
        Ok(())
    }

    fn finalize(mut self) -> postcard::Result<(u64, u64)> {
        self.flush()?;
        Ok((self.bytes, self.hash.digest()))
    }
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
