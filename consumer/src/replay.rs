//! `neardup replay`: the same topology over JSONL / JSONL.gz files or WARC archives
//! ([`crate::warc`], recognised by their first bytes), no broker. A progress bar (bytes, MB/s,
//! ETA, records) is drawn on stderr when it is a terminal.
//!
//! Each input line is one record (bytes, not necessarily UTF-8: a line that is not is a dead
//! letter like any other bad record). Blank lines are not records and are skipped. A damaged
//! file is bad input as well: a compressed file that stops decompressing ends there, with a
//! `damaged_input` dead letter (and a WARC file's damage is found record by record, see
//! [`crate::warc`]); a warning on stderr tells of it, and the replay goes on. Outputs go to
//! `OUT/<kind>.jsonl`, one event value per line, in the order the topology emitted them; the same
//! input gives byte-identical files. Two more files describe the state at the end:
//! `OUT/cluster-map.jsonl` (every clustered URL at each level: cluster id, size, canonical; sorted
//! by URL, then level) and `OUT/evolution.json` (seed 000 §3 between crawl rounds: the share of
//! near-duplicate pages, the cluster-size distribution, and containment Φ, reverse containment
//! and similarity Ψ against round 1 by round-1 cluster size), and the report a person reads,
//! `OUT/report.html` with `OUT/report.json` (see [`crate::report`]).

use crate::buffers::Buffers;
use crate::warc::WarcPage;
use crate::workers::{preparing_threads, take_jobs};
use anyhow::{Context, Result};
use neardup_schemas::{DeadLetterReason, OutputKind, Source};
use neardup_topology::sign_cache::SignCache;
use neardup_topology::{Emit, Prepared, Preparer, Topology};
use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

/// Opens a JSONL or WARC file, transparently decompressing it when it starts with the gzip or
/// the zstd magic bytes ([`open_counted`]).
pub fn open_lines(path: &Path) -> Result<Box<dyn BufRead>> {
    open_counted(path, Arc::default())
}

/// Counts the bytes read through it (for progress).
struct Counted<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// How a file is compressed, told by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    /// zstd frames (skippable ones included, which the decoder passes over).
    Zstd,
    /// The zstd WARC form (`.warc.zst`): a skippable frame of magic `0x184D2A5D` holding the
    /// dictionary the records' frames were compressed with (itself raw or zstd-compressed).
    ZstdDictionary,
}

impl Compression {
    fn of(head: &[u8]) -> Compression {
        match head {
            [0x1f, 0x8b, ..] => Compression::Gzip,
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Compression::Zstd,
            [0x5d, 0x2a, 0x4d, 0x18, ..] => Compression::ZstdDictionary,
            [b, 0x2a, 0x4d, 0x18, ..] if b & 0xf0 == 0x50 => Compression::Zstd,
            _ => Compression::None,
        }
    }
}

/// The largest dictionary a `.warc.zst` file may start with (zstd's trainer makes them of 110 KB
/// by default): a bound on what a damaged length field can make neardup allocate.
const MAX_DICTIONARY: usize = 64 << 20;

/// Reads the dictionary frame at the start of a `.warc.zst` file: its 4-byte magic, 4-byte
/// little-endian length and the dictionary, decompressed when it is a zstd frame itself.
fn zstd_dictionary(r: &mut impl Read) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind};
    let mut header = [0u8; 8];
    r.read_exact(&mut header)?;
    let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
    if len > MAX_DICTIONARY {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("its dictionary frame says {len} bytes, over the {MAX_DICTIONARY} accepted"),
        ));
    }
    let mut dictionary = vec![0u8; len];
    r.read_exact(&mut dictionary)?;
    if Compression::of(&dictionary) == Compression::Zstd {
        let mut plain = Vec::new();
        zstd::stream::read::Decoder::new(&dictionary[..])?
            .take(MAX_DICTIONARY as u64 + 1)
            .read_to_end(&mut plain)?;
        if plain.len() > MAX_DICTIONARY {
            return Err(Error::new(
                ErrorKind::InvalidData,
                format!("its compressed dictionary is over the {MAX_DICTIONARY} bytes accepted"),
            ));
        }
        dictionary = plain;
    }
    Ok(dictionary)
}

/// The largest zstd window accepted (2 GiB, zstd's own limit, which `zstd --long=31` writes):
/// the decoder otherwise refuses frames written with windows over 128 MiB.
const ZSTD_WINDOW_LOG_MAX: u32 = 31;

/// [`open_lines`], adding the bytes read from the file (compressed) to `read`. A file whose
/// first bytes are gzip's is gunzipped (every member, so `.warc.gz` of a member per record too);
/// one whose first bytes are a zstd frame's is decompressed frame after frame (`.jsonl.zst`,
/// `.warc.zst` without a dictionary); one that starts with the `.warc.zst` dictionary frame,
/// with that dictionary. `-` is the standard input. The file is opened once and read from its
/// start to its end, so a pipe (`<(curl ...)`, `/dev/stdin`) reads as a file does.
pub fn open_counted(path: &Path, read: Arc<AtomicU64>) -> Result<Box<dyn BufRead>> {
    let inner: Box<dyn Read> = if is_stdin(path) {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            File::open(path)
                .with_context(|| format!("cannot open input file {}", path.display()))?,
        )
    };
    let mut counted = Counted { inner, read };
    let mut head = Vec::with_capacity(4);
    (&mut counted)
        .take(4)
        .read_to_end(&mut head)
        .with_context(|| format!("cannot read input file {}", path.display()))?;
    let compression = Compression::of(&head);
    // The bytes looked at go back in front of the rest.
    let source = std::io::Cursor::new(head).chain(counted);
    let zstd_error =
        |e: std::io::Error| anyhow::anyhow!("{}: not a readable zstd file: {e}", path.display());
    Ok(match compression {
        Compression::None => Box::new(BufReader::with_capacity(1 << 20, source)),
        Compression::Gzip => Box::new(BufReader::with_capacity(
            1 << 20,
            GzMembers::new(BufReader::with_capacity(1 << 16, source)),
        )),
        Compression::Zstd | Compression::ZstdDictionary => {
            let mut f = BufReader::with_capacity(1 << 20, source);
            // No dictionary is an empty one (what the zstd crate's own plain decoder passes).
            let dictionary = match compression {
                Compression::ZstdDictionary => zstd_dictionary(&mut f).map_err(zstd_error)?,
                _ => Vec::new(),
            };
            let mut d =
                zstd::stream::read::Decoder::with_dictionary(f, &dictionary).map_err(zstd_error)?;
            d.window_log_max(ZSTD_WINDOW_LOG_MAX).map_err(zstd_error)?;
            Box::new(BufReader::with_capacity(1 << 20, d))
        }
    })
}

/// What a read error of a file means for the reader that got it.
#[derive(Debug)]
pub struct Unreadable {
    /// Where, and what went wrong, as a dead letter's detail says it.
    pub detail: String,
    /// Whether reading goes on after it (a gzip member skipped), else the file ends there.
    pub goes_on: bool,
}

/// What a read error of a file means: a gzip member that does not decompress, skipped
/// (`GzMembers`), is damage after which reading goes on; a compressed stream that stops
/// decompressing (or is cut off) is damage that ends the file; an error of the file system
/// itself (a failing disk, a file removed) is an error. `offset` is where the reader was, in
/// the uncompressed bytes.
pub fn unreadable(e: std::io::Error, offset: u64) -> Result<Unreadable> {
    use std::io::ErrorKind::*;
    if let Some(skipped) = e.get_ref().and_then(|e| e.downcast_ref::<SkippedMember>()) {
        return Ok(Unreadable {
            detail: format!("at byte {offset} (of the uncompressed bytes), {skipped}"),
            goes_on: true,
        });
    }
    // flate2 gives `InvalidInput` or `InvalidData` for a damaged stream and `UnexpectedEof`
    // for one cut off; zstd gives `Other`, which the standard library never gives.
    match e.kind() {
        InvalidInput | InvalidData | UnexpectedEof | Other => Ok(Unreadable {
            detail: format!(
                "the file cannot be read past byte {offset} (of its uncompressed bytes): {e}"
            ),
            goes_on: false,
        }),
        _ => Err(e.into()),
    }
}

/// A gzip member that did not decompress, passed over to the next (`GzMembers`).
#[derive(Debug)]
pub struct SkippedMember {
    /// Members read whole before it.
    whole: u64,
    /// Compressed bytes skipped to the next member's header.
    skipped: u64,
    /// The decompressor's error.
    cause: String,
}

impl std::fmt::Display for SkippedMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the gzip member after the {} read whole does not decompress ({}): {} compressed bytes skipped to the next member, where reading goes on",
            self.whole, self.cause, self.skipped
        )
    }
}

impl std::error::Error for SkippedMember {}

/// Gunzips a file of gzip members one after another, as `flate2`'s `MultiGzDecoder` does; but
/// where a member does not decompress (its bytes damaged) in a file that has had a whole member
/// before it (a `.warc.gz` of one member per record, JSON lines gzipped in parts), reading goes
/// on at the next member's header: the read that meets the damage fails with a
/// [`SkippedMember`], and the next read goes on from there, so the reader above makes what it
/// had of the damaged member a dead letter ([`unreadable`]) and reads the members after it. A
/// file of one member (gzipped as a whole) has no next member to go on at: its error ends it.
struct GzMembers {
    decoder: Option<flate2::bufread::GzDecoder<Tally<Box<dyn BufRead>>>>,
    /// Members decompressed whole so far.
    whole: u64,
}

impl GzMembers {
    fn new(source: impl BufRead + 'static) -> Self {
        GzMembers {
            decoder: Some(Self::member(Box::new(source))),
            whole: 0,
        }
    }

    /// A decoder of the member `source` starts with.
    fn member(source: Box<dyn BufRead>) -> flate2::bufread::GzDecoder<Tally<Box<dyn BufRead>>> {
        flate2::bufread::GzDecoder::new(Tally {
            inner: source,
            consumed: 0,
        })
    }
}

/// Counts the bytes taken from a reader: what a gzip member's decoder took of the file.
struct Tally<R> {
    inner: R,
    consumed: u64,
}

impl<R: BufRead> Read for Tally<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Tally<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        self.consumed += amount as u64;
        self.inner.consume(amount);
    }
}

impl Read for GzMembers {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let Some(decoder) = self.decoder.as_mut() else {
                return Ok(0);
            };
            match decoder.read(buf) {
                Ok(0) => {
                    // The member's end: the next begins where it ended, if anything follows.
                    self.whole += 1;
                    let taken = self.decoder.take().expect("a decoder").into_inner();
                    let mut source = taken.inner;
                    if !source.fill_buf()?.is_empty() {
                        self.decoder = Some(Self::member(source));
                    }
                }
                Ok(n) => return Ok(n),
                Err(e) if self.whole > 0 => {
                    let taken = self.decoder.take().expect("a decoder").into_inner();
                    // The next member may begin right here (a member whose checksum failed
                    // was read to its end); a decoder that took nothing is passed by a byte.
                    let on = u64::from(taken.consumed == 0);
                    let Some((source, skipped)) = next_gzip_member(taken.inner, on)? else {
                        return Err(e);
                    };
                    self.decoder = Some(Self::member(source));
                    let skipped = SkippedMember {
                        whole: self.whole,
                        skipped,
                        cause: e.to_string(),
                    };
                    return Err(std::io::Error::other(skipped));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Skips `source` to the next gzip member header (the bytes `1f 8b 08`), `on` bytes on at
/// least; the source from there and the bytes skipped, or `None` at the end.
fn next_gzip_member(
    mut source: Box<dyn BufRead>,
    on: u64,
) -> std::io::Result<Option<(Box<dyn BufRead>, u64)>> {
    const MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];
    let mut skipped = std::io::copy(&mut (&mut source).take(on), &mut std::io::sink())?;
    // The last bytes of a chunk, which may begin a header the next completes.
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let chunk = source.fill_buf()?;
        if chunk.is_empty() {
            return Ok(None);
        }
        let mut hay = std::mem::take(&mut carry);
        hay.extend_from_slice(chunk);
        let n = chunk.len();
        source.consume(n);
        if let Some(i) = hay.windows(MAGIC.len()).position(|w| w == MAGIC) {
            skipped += i as u64;
            let rest = std::io::Cursor::new(hay[i..].to_vec());
            return Ok(Some((Box::new(rest.chain(source)), skipped)));
        }
        let keep = hay.len().min(MAGIC.len() - 1);
        skipped += (hay.len() - keep) as u64;
        carry = hay[hay.len() - keep..].to_vec();
    }
}

/// Whether `path` names the standard input (`-`).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Whether the (decompressed) input starts like a WARC file, and the input to read it from, as
/// it was: the bytes looked at are put back in front.
pub fn sniff_warc(mut r: Box<dyn BufRead>, path: &Path) -> Result<(bool, Box<dyn BufRead>)> {
    let mut head = Vec::with_capacity(5);
    (&mut r)
        .take(5)
        .read_to_end(&mut head)
        .with_context(|| format!("cannot read the start of {}", path.display()))?;
    let warc = head == b"WARC/";
    Ok((warc, Box::new(std::io::Cursor::new(head).chain(r))))
}

/// Calls `f(line_number, Line::Record(bytes))` for every non-blank line of `reader`, the input
/// `path` opened ([`open_counted`]) (1-based numbers). Damage is bad input, not an error: a
/// compressed file that stops decompressing (or is cut off) ends there, and a gzip member that
/// does not decompress is passed over (`GzMembers`); either way what was read of the line it
/// met is `f(line_number, Line::Damaged(bytes, detail))`, for a dead letter. An error of the
/// file system itself is an error.
pub fn for_each_line_of(
    path: &Path,
    mut reader: impl BufRead,
    mut f: impl FnMut(u64, Line<'_>),
) -> Result<()> {
    let mut buf = Vec::with_capacity(1 << 16);
    let mut line_no = 0u64;
    let mut offset = 0u64;
    loop {
        buf.clear();
        let n = match reader.read_until(b'\n', &mut buf) {
            Ok(n) => n,
            Err(e) => {
                let why = unreadable(e, offset)
                    .with_context(|| format!("reading {} after line {line_no}", path.display()))?;
                offset += buf.len() as u64;
                line_no += 1;
                f(line_no, Line::Damaged(std::mem::take(&mut buf), why.detail));
                if why.goes_on {
                    continue;
                }
                return Ok(());
            }
        };
        if n == 0 {
            return Ok(());
        }
        offset += n as u64;
        line_no += 1;
        let mut line = buf.as_slice();
        while let [rest @ .., b'\n' | b'\r'] = line {
            line = rest;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        f(line_no, Line::Record(line));
    }
}

/// What [`for_each_line_of`] passes on.
#[derive(Debug)]
pub enum Line<'a> {
    /// A line that is not blank, without its line break.
    Record(&'a [u8]),
    /// Where the file is damaged: what was read of the line there, and where and what went
    /// wrong.
    Damaged(Vec<u8>, String),
}

/// One JSONL writer per output kind.
pub struct FileSink {
    files: BTreeMap<OutputKind, BufWriter<File>>,
}

impl FileSink {
    /// Creates `dir` and an empty `<kind>.jsonl` for every output kind.
    pub fn create(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create output directory {}", dir.display()))?;
        let mut files = BTreeMap::new();
        for kind in OutputKind::ALL {
            let path = dir.join(format!("{}.jsonl", kind.short_name()));
            let f =
                File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
            files.insert(kind, BufWriter::with_capacity(1 << 20, f));
        }
        Ok(FileSink { files })
    }

    /// Writes one record's value as a line.
    pub fn write(&mut self, e: &Emit) -> Result<()> {
        let w = self.files.get_mut(&e.kind).expect("a file per kind");
        w.write_all(&e.value)?;
        w.write_all(b"\n")?;
        Ok(())
    }

    /// Flushes every file.
    pub fn finish(mut self) -> Result<()> {
        for w in self.files.values_mut() {
            w.flush()?;
        }
        Ok(())
    }
}

/// A progress bar on stderr (records, MB/s, ETA by input bytes); drawn only on a terminal.
pub struct Progress {
    bar: indicatif::ProgressBar,
    done: std::cell::Cell<u64>,
}

impl Progress {
    /// Progress through `total` bytes of input files.
    pub fn bytes(total: u64) -> Self {
        Self::with(
            total,
            "{bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta} · {msg}",
        )
    }

    /// Progress through `total` records (a Kafka range).
    pub fn records(total: u64) -> Self {
        Self::with(total, "{bar:30} {pos}/{len} records {per_sec} ETA {eta}")
    }

    fn with(total: u64, template: &str) -> Self {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(total),
            indicatif::ProgressDrawTarget::stderr_with_hz(4),
        );
        bar.set_style(indicatif::ProgressStyle::with_template(template).expect("a valid template"));
        Progress {
            bar,
            done: std::cell::Cell::new(0),
        }
    }

    /// `records` so far; `read` bytes (or records) of the current input.
    pub fn update(&self, records: u64, read: u64) {
        self.bar.set_position(self.done.get() + read);
        self.bar.set_message(format!("{records} records"));
    }

    /// The current input is done after `read` bytes (or records).
    pub fn file_done(&self, read: u64) {
        self.done.set(self.done.get() + read);
        self.bar.set_position(self.done.get());
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// What a replay did.
pub struct ReplayReport {
    /// The summary text.
    pub summary: String,
    /// The topology at the end (its stats and state).
    pub topology: Topology,
}

/// Records being prepared at once, per core: enough that a thread finishing a record always
/// finds the next one waiting, while another signs a long page.
const DEPTH_PER_CORE: usize = 64;

/// A record with its preparation: what a preparing thread answers.
type Answer = (Vec<u8>, Prepared);

/// A record to prepare, and where its answer goes.
type Job = (Input, mpsc::SyncSender<Answer>);

/// A record as the input gave it.
enum Input {
    /// A record's bytes (a line, a Kafka record, a WARC revisit's page event).
    Raw(Vec<u8>),
    /// A WARC record: a page event, a `response` or `resource` record made into its page event
    /// by the preparing thread, or the start of a record too large to hold (a dead letter).
    Warc(WarcPage),
}

/// One replay in progress: the topology and the output files.
///
/// Decoding and signing, most of the work, run on every core: on one thread per core and one
/// more, as in `neardup run` (`workers::preparing_threads`), with one [`Preparer`] each, that
/// take the next record as soon as they are free (a page to sign costs some twenty times one
/// the sign cache knows). This thread reads the input, hands each record to them and applies the
/// results to the one topology in input order while they prepare the records after it, so the
/// outputs are those of a sequential replay.
pub struct Replayer {
    topo: Topology,
    /// Records for the preparing threads; `None` once the input has ended.
    jobs: Option<mpsc::Sender<Job>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Records handed out and not yet applied, in input order, with their answers to come.
    pending: VecDeque<(Source, mpsc::Receiver<Answer>)>,
    depth: usize,
    buffers: Buffers,
    sign_cache: Arc<SignCache>,
    sink: FileSink,
    out: Vec<Emit>,
    write_err: Option<anyhow::Error>,
    out_dir: PathBuf,
    started: Instant,
    /// Records handled so far.
    pub records: u64,
}

impl Replayer {
    /// A fresh topology writing into `out_dir` (created), its preparers sharing a sign cache of
    /// `sign_cache` bytes. The figures by crawl round (seed 000 §3) are made when
    /// `cfg.track_evolution` is on (`neardup replay` turns it on unless `--no-round-figures`).
    pub fn new(out_dir: &Path, cfg: neardup_topology::Config, sign_cache: usize) -> Result<Self> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let sign_cache = Arc::new(SignCache::new(sign_cache, cfg.window_ms));
        let sink = FileSink::create(out_dir)?;
        let (jobs, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..preparing_threads())
            .map(|i| {
                let mut preparer = Preparer::with_cache(&cfg, Arc::clone(&sign_cache));
                let max_body = cfg.decode.max_body_bytes;
                let rx = Arc::clone(&rx);
                std::thread::Builder::new()
                    .name(format!("neardup-prepare-{i}"))
                    .spawn(move || {
                        take_jobs(&rx, |(input, reply): Job| {
                            let raw = match input {
                                Input::Raw(raw) | Input::Warc(WarcPage::Event(raw)) => raw,
                                Input::Warc(WarcPage::Response(record)) => record.into_event(),
                                Input::Warc(WarcPage::Damaged { bytes, detail }) => {
                                    let reason = DeadLetterReason::DamagedInput;
                                    let _ = reply.send((bytes, Prepared::rejected(reason, detail)));
                                    return;
                                }
                                Input::Warc(WarcPage::TooLarge { start, len }) => {
                                    let detail = format!(
                                        "WARC record block is {len} bytes, over the limit for a {max_body}-byte body (raise --max-body-bytes to accept it); the payload is its start"
                                    );
                                    let reason = DeadLetterReason::BodyTooLarge;
                                    let _ = reply.send((start, Prepared::rejected(reason, detail)));
                                    return;
                                }
                            };
                            let prepared = preparer.prepare(&raw);
                            // A replay that stopped early no longer waits: nothing to do then.
                            let _ = reply.send((raw, prepared));
                        })
                    })
                    .context("cannot start a preparing thread")
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Replayer {
            topo: Topology::new(cfg),
            jobs: Some(jobs),
            threads,
            pending: VecDeque::new(),
            depth: DEPTH_PER_CORE * cores,
            buffers: Buffers::default(),
            sign_cache,
            sink,
            out: Vec::new(),
            write_err: None,
            out_dir: out_dir.to_owned(),
            started: Instant::now(),
            records: 0,
        })
    }

    /// Takes one input record: hands it to the preparing threads, and applies the records
    /// before it whose turn has come.
    pub fn record(&mut self, bytes: &[u8], src: &Source) {
        let raw = self.buffers.copy(bytes);
        self.hand_out(Input::Raw(raw), src);
    }

    /// [`Self::record`] for a WARC record.
    pub fn record_warc(&mut self, page: WarcPage, src: &Source) {
        self.hand_out(Input::Warc(page), src);
    }

    fn hand_out(&mut self, input: Input, src: &Source) {
        let (reply, answer) = mpsc::sync_channel(1);
        let job = (input, reply);
        self.jobs
            .as_ref()
            .expect("records come only before the end")
            .send(job)
            .expect("preparing never panics");
        self.pending.push_back((src.clone(), answer));
        self.records += 1;
        while self.pending.len() > self.depth {
            self.apply_next();
        }
    }

    /// Applies the oldest record handed out, waiting for its preparation.
    fn apply_next(&mut self) {
        let Some((src, answer)) = self.pending.pop_front() else {
            return;
        };
        let (raw, prepared) = answer.recv().expect("preparing never panics");
        self.topo.apply(prepared, &raw, &src, &mut self.out);
        for e in self.out.drain(..) {
            if let Err(err) = self.sink.write(&e) {
                self.write_err.get_or_insert(err);
            }
        }
        self.buffers.put(raw);
    }

    /// Applies every record handed out, and stops the preparing threads.
    fn flush(&mut self) {
        while !self.pending.is_empty() {
            self.apply_next();
        }
        self.jobs = None;
        for t in self.threads.drain(..) {
            t.join().expect("preparing never panics");
        }
    }

    /// The first write error so far, if any.
    fn check(&mut self) -> Result<()> {
        match self.write_err.take() {
            Some(err) => Err(err.context(format!("writing outputs to {}", self.out_dir.display()))),
            None => Ok(()),
        }
    }

    /// Ends the input: closes the last epoch and round, writes the state files and the report
    /// (with `source`, what the inputs held beyond their records, e.g. a WARC archive's record
    /// counts, under `"source"` in `report.json`), and renders the summary (with `notes`
    /// appended).
    pub fn end(
        mut self,
        inputs: &[String],
        notes: &str,
        source: Option<serde_json::Value>,
    ) -> Result<ReplayReport> {
        self.flush();
        self.check()?;
        let (topo, out_dir) = (&mut self.topo, &self.out_dir);
        // The end of the input closes the last collections epoch and crawl round.
        topo.finish(&mut self.out);
        for e in self.out.drain(..) {
            self.sink
                .write(&e)
                .with_context(|| format!("writing outputs to {}", out_dir.display()))?;
        }
        self.sink.finish()?;
        write_cluster_map(topo, &out_dir.join("cluster-map.jsonl"))?;
        let rounds = topo.finish_evolution().to_vec();
        let evolution = serde_json::json!({ "rounds": rounds });
        write_file(
            &out_dir.join("evolution.json"),
            serde_json::to_string_pretty(&evolution)? + "\n",
        )?;
        let mut doc = crate::report::json(topo, &rounds, inputs);
        if let Some(source) = source {
            doc["source"] = source;
        }
        write_file(
            &out_dir.join("report.json"),
            serde_json::to_string_pretty(&doc)? + "\n",
        )?;
        write_file(
            &out_dir.join("report.html"),
            crate::report::html(&doc, &rounds),
        )?;
        let mut summary = crate::summary::render(topo, self.started.elapsed());
        if !rounds.is_empty() {
            let shares: Vec<String> = rounds
                .iter()
                .map(|r| {
                    let share = format!("{} {:.1} %", r.crawl_id, 100.0 * r.near_duplicate_share);
                    match r.late_events {
                        0 => share,
                        n => format!("{share} ({n} late events left out)"),
                    }
                })
                .collect();
            summary.push_str(&format!(
                "  near-duplicate pages by round: {} (evolution.json)\n",
                shares.join(", ")
            ));
        }
        summary.push_str(&crate::summary::sign_cache(&self.sign_cache.stats()));
        summary.push_str(&format!("  {}\n", topo.config().near.describe()));
        summary.push_str(notes);
        summary.push_str(&format!(
            "  report: {} (and report.json)\n",
            out_dir.join("report.html").display()
        ));
        Ok(ReplayReport {
            summary,
            topology: self.topo,
        })
    }
}

/// Replays `inputs` in order through a fresh topology, writing outputs into `out_dir`; WARC
/// files keep up to `revisit_cache` bytes of their bodies for revisits of other URLs
/// ([`crate::warc::Captures`]).
pub fn replay_files(
    inputs: &[PathBuf],
    out_dir: &Path,
    cfg: neardup_topology::Config,
    sign_cache: usize,
    revisit_cache: usize,
) -> Result<ReplayReport> {
    // Every input is checked before any output is created, so a mistyped path leaves nothing
    // behind that looks like an empty result.
    for path in inputs.iter().filter(|p| !is_stdin(p)) {
        File::open(path).with_context(|| format!("cannot open input file {}", path.display()))?;
    }
    // A WARC block over this is not held: no page in it can be accepted (room for the HTTP
    // header, chunk framing).
    let max_block = cfg.decode.max_body_bytes as u64 + (64 << 10);
    let mut r = Replayer::new(out_dir, cfg, sign_cache)?;
    let total: u64 = inputs
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum();
    let progress = Progress::bytes(total);
    let mut warc = crate::warc::WarcCounts::default();
    let mut captures = crate::warc::Captures::new(revisit_cache);
    // Damaged stretches of the inputs, each a dead letter (`damaged_input`).
    let mut damaged = 0u64;
    for path in inputs {
        let file = path.display().to_string();
        let read = Arc::new(AtomicU64::new(0));
        let src = |line: u64| Source::File {
            file: file.clone(),
            line,
        };
        let progress_of = |r: &Replayer| {
            if r.records % 1024 == 0 {
                progress.update(r.records, read.load(Ordering::Relaxed));
            }
        };
        let (is_warc, reader) = sniff_warc(open_counted(path, read.clone())?, path)?;
        if is_warc {
            let handle = |line: u64, page: WarcPage| {
                if let WarcPage::Damaged { detail, .. } = &page {
                    warn_damaged(&file, detail, &mut damaged);
                }
                r.record_warc(page, &src(line));
                progress_of(&r);
            };
            crate::warc::for_each_page_counted(
                path,
                reader,
                &mut captures,
                max_block,
                &mut warc,
                handle,
            )?;
        } else {
            let handle = |line: u64, record: Line<'_>| {
                match record {
                    Line::Record(bytes) => r.record(bytes, &src(line)),
                    Line::Damaged(bytes, detail) => {
                        warn_damaged(&file, &detail, &mut damaged);
                        r.record_warc(WarcPage::Damaged { bytes, detail }, &src(line));
                    }
                }
                progress_of(&r);
            };
            for_each_line_of(path, reader, handle)?;
        }
        progress.file_done(read.load(Ordering::Relaxed));
        r.check()?;
    }
    progress.finish();
    let notes = if warc.records > 0 {
        format!(
            "  WARC records: {}, responses replayed {}, resources replayed {}, conversions (extracted text) replayed {}, conversions of a page read before them skipped {}, revisits replayed as 304 {}, revisits of other URLs replayed with their capture's body {}, revisits of other URLs skipped (capture not read before them, or no longer in --revisit-cache) {}, records too large to hold (dead letters) {}, records of other schemes than http(s) skipped {}, other records skipped {}, damaged stretches (dead letters) {}\n",
            warc.records,
            warc.responses,
            warc.resources,
            warc.conversions,
            warc.conversions_of_pages,
            warc.revisits,
            warc.revisits_of_others,
            warc.revisits_elsewhere,
            warc.too_large,
            warc.not_http,
            warc.other,
            warc.damaged
        )
    } else {
        String::new()
    };
    let notes = match damaged {
        0 => notes,
        n => format!(
            "{notes}  damaged input: {n} stretch(es) of the input files could not be read as records; each is a dead letter (reason damaged_input) with its bytes and where it is\n"
        ),
    };
    let names: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
    let source = (warc.records > 0).then(|| serde_json::json!({ "warc": warc }));
    r.end(&names, &notes, source)
}

/// Damage warnings shown on stderr; the rest are counted in the summary.
const DAMAGE_WARNINGS: u64 = 10;

/// Tells of a damaged stretch of `file` on stderr as it is found (the first
/// [`DAMAGE_WARNINGS`]), and counts it in `seen`.
fn warn_damaged(file: &str, detail: &str, seen: &mut u64) {
    *seen += 1;
    if *seen <= DAMAGE_WARNINGS {
        eprintln!(
            "neardup: warning: {file}: {detail}; its bytes go to a dead letter (damaged_input), and the replay goes on"
        );
    }
    if *seen == DAMAGE_WARNINGS {
        eprintln!("neardup: warning: further damage is counted in the summary, not shown");
    }
}

fn write_file(path: &Path, text: String) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Writes the cluster map: one line per clustered URL and level (`very_similar`, then
/// `virtually_identical`), sorted by URL, with the cluster's id, size and canonical URL.
pub fn write_cluster_map(topo: &Topology, path: &Path) -> Result<()> {
    use neardup_schemas::PairLevel;
    let mut rows = vec![];
    for level in [PairLevel::VerySimilar, PairLevel::VirtuallyIdentical] {
        let name = serde_json::to_value(level)?;
        for (url, info) in topo.clusters(level).map(|c| c.map()).unwrap_or_default() {
            rows.push((url, name.clone(), info));
        }
    }
    // Stable: sorted by URL, and per URL the levels in the order above.
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut w = BufWriter::new(f);
    for (url, level, info) in rows {
        let row = serde_json::json!({
            "url": url, "level": level, "cluster_id": info.id, "size": info.size,
            "canonical": info.canonical,
        });
        writeln!(w, "{row}")?;
    }
    w.flush()?;
    Ok(())
}

/// Runs `records` (e.g. a sample crawl) through a fresh topology in memory; the test oracle for
/// the Kafka path. Sources are `name:index` (0-based), as the Kafka path would give offsets.
pub fn replay_records(
    records: &[Vec<u8>],
    cfg: neardup_topology::Config,
    mut source: impl FnMut(usize) -> Source,
) -> Vec<Emit> {
    let mut topo = Topology::new(cfg);
    let mut out = Vec::new();
    for (i, r) in records.iter().enumerate() {
        topo.process(r, &source(i), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_is_told_by_the_first_bytes() {
        assert_eq!(Compression::of(&[0x1f, 0x8b, 8, 0]), Compression::Gzip);
        assert_eq!(
            Compression::of(&[0x28, 0xb5, 0x2f, 0xfd]),
            Compression::Zstd
        );
        let dictionary_frame = [0x5d, 0x2a, 0x4d, 0x18];
        assert_eq!(
            Compression::of(&dictionary_frame),
            Compression::ZstdDictionary
        );
        // Other skippable frames the decoder passes over.
        for first in [0x50, 0x5c, 0x5e, 0x5f] {
            assert_eq!(
                Compression::of(&[first, 0x2a, 0x4d, 0x18]),
                Compression::Zstd
            );
        }
        for plain in [
            &b"WARC/1.1"[..],
            b"{\"url\"",
            &[0x1f],
            &[0x4f, 0x2a, 0x4d, 0x18],
            b"",
        ] {
            assert_eq!(Compression::of(plain), Compression::None, "{plain:?}");
        }
    }

    #[test]
    fn a_gzip_file_cut_off_gives_its_lines_before_and_the_damage() {
        use std::io::Write as _;
        let text: String = (1..=2000).map(|i| format!("{{\"line\": {i}}}\n")).collect();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(text.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        let path = std::env::temp_dir().join(format!("cut-{}.jsonl.gz", std::process::id()));
        std::fs::write(&path, &gz[..gz.len() / 2]).unwrap();
        let reader = open_counted(&path, Arc::default()).unwrap();
        let mut got = Vec::new();
        let mut damage = Vec::new();
        let read = for_each_line_of(&path, reader, |n, l| match l {
            Line::Record(l) => got.push((n, l.to_vec())),
            Line::Damaged(_, detail) => damage.push((n, detail)),
        });
        std::fs::remove_file(&path).unwrap();
        read.unwrap();
        // Every whole line before the cut, in order, then the damage at the next line.
        assert!(got.len() > 100, "{}", got.len());
        for (i, (n, l)) in got.iter().enumerate() {
            assert_eq!(*n, i as u64 + 1);
            assert_eq!(l, format!("{{\"line\": {}}}", i + 1).as_bytes());
        }
        assert_eq!(damage.len(), 1);
        assert_eq!(damage[0].0, got.len() as u64 + 1);
        assert!(
            damage[0].1.contains("cannot be read past byte"),
            "{}",
            damage[0].1
        );
        // The whole file has none.
        let mut n = 0;
        for_each_line_of(&path, &gz_reader(&gz)[..], |_, l| match l {
            Line::Record(_) => n += 1,
            Line::Damaged(..) => panic!("no damage"),
        })
        .unwrap();
        assert_eq!(n, 2000);
    }

    #[test]
    fn a_gzip_member_that_does_not_decompress_is_passed_over() {
        use std::io::Write as _;
        // Ten members of a hundred lines each; the fifth's compressed bytes damaged.
        let mut file = Vec::new();
        let mut fifth = 0..0;
        for m in 0..10 {
            let text: String = (0..100)
                .map(|i| format!("{{\"member\": {m}, \"line\": {i}}}\n"))
                .collect();
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(text.as_bytes()).unwrap();
            let gz = gz.finish().unwrap();
            if m == 4 {
                fifth = file.len()..file.len() + gz.len();
            }
            file.extend(gz);
        }
        let path = Path::new("members.jsonl.gz");
        let want: Vec<String> = (0..10)
            .filter(|&m| m != 4)
            .flat_map(|m| (0..100).map(move |i| format!("{{\"member\": {m}, \"line\": {i}}}")))
            .collect();
        // Its deflate stream damaged, or its checksum (the member read to its end, so the
        // next begins right after it).
        for damage_at in [
            fifth.start + 20..fifth.end - 20,
            fifth.end - 8..fifth.end - 7,
        ] {
            let mut file = file.clone();
            for b in &mut file[damage_at.clone()] {
                *b ^= 0x5a;
            }
            let reader = BufReader::new(GzMembers::new(std::io::Cursor::new(file)));
            let mut got = Vec::new();
            let mut damage = Vec::new();
            for_each_line_of(path, reader, |n, l| match l {
                Line::Record(l) => got.push((n, String::from_utf8_lossy(l).into_owned())),
                Line::Damaged(_, detail) => damage.push((n, detail)),
            })
            .unwrap();
            assert_eq!(damage.len(), 1, "{damage_at:?}: {damage:?}");
            assert!(
                damage[0].1.contains("does not decompress"),
                "{}",
                damage[0].1
            );
            assert!(
                damage[0].1.contains("after the 4 read whole"),
                "{}",
                damage[0].1
            );
            // Every line of the other members is read, in order.
            let whole: Vec<&String> = got
                .iter()
                .map(|(_, l)| l)
                .filter(|l| !l.contains("\"member\": 4,"))
                .collect();
            let missing: Vec<&String> = want.iter().filter(|l| !whole.contains(l)).collect();
            assert!(
                missing.is_empty(),
                "{damage_at:?}: {} lines missing, from {:?}",
                missing.len(),
                missing.first()
            );
            assert_eq!(whole.len(), want.len(), "{damage_at:?}: every line once");
        }
        // A file of one member has no next member to go on at: its damage ends it.
        let mut one = Vec::new();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&b"{}\n".repeat(5000)).unwrap();
        one.extend(gz.finish().unwrap());
        let len = one.len();
        for b in &mut one[len / 2..len / 2 + 16] {
            *b ^= 0x5a;
        }
        let mut damage = 0;
        for_each_line_of(
            path,
            BufReader::new(GzMembers::new(std::io::Cursor::new(one))),
            |_, l| {
                if let Line::Damaged(..) = l {
                    damage += 1;
                }
            },
        )
        .unwrap();
        assert_eq!(damage, 1);
    }

    /// The decompressed bytes of `gz`.
    fn gz_reader(gz: &[u8]) -> Vec<u8> {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut plain)
            .unwrap();
        plain
    }

    #[test]
    fn a_dictionary_frame_too_long_or_cut_off_is_refused() {
        let frame = |len: u32, body: &[u8]| {
            let mut f = vec![0x5d, 0x2a, 0x4d, 0x18];
            f.extend(len.to_le_bytes());
            f.extend(body);
            f
        };
        // Refused from its length alone, before anything is allocated for it.
        let err = zstd_dictionary(&mut &frame(MAX_DICTIONARY as u32 + 1, b"")[..]).unwrap_err();
        assert!(err.to_string().contains("over the"), "{err}");
        let err = zstd_dictionary(&mut &frame(10, b"abc")[..]).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
        // A raw dictionary is taken as it is, a compressed one decompressed.
        let raw = b"any bytes at all".to_vec();
        assert_eq!(zstd_dictionary(&mut &frame(16, &raw)[..]).unwrap(), raw);
        let packed = zstd::bulk::compress(&raw, 3).unwrap();
        let f = frame(packed.len() as u32, &packed);
        assert_eq!(zstd_dictionary(&mut &f[..]).unwrap(), raw);
    }
}
