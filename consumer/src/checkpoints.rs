//! Checkpoints on a volume (`--checkpoint-dir`): the bytes of
//! [`neardup_topology::checkpoint`] in one file, replaced atomically.
//!
//! **Why a volume, not a compacted Kafka topic.** The state is one piece: near-duplicates,
//! clusters and mirrors join pages from every input partition, so no part of it belongs to one
//! partition that another instance could take over alone, and its size (hundreds of bytes per
//! windowed page, hundreds of megabytes for a million pages) is far past a Kafka record's
//! default limit of 1 MB. A persistent volume per instance (the Helm chart's StatefulSet claim)
//! holds it whole and is written at disk speed; the input offsets it reflects travel inside it.
//!
//! **Writing.** A temporary file of the writing process's own (see [`temp_file_name`]) is
//! written and synced, then renamed over `checkpoint` and the directory synced: a crash leaves
//! the previous checkpoint or the new one, never half of one.
//!
//! **Shared by the instances of a leased stage.** With `--lease`, only the holder writes, and
//! an instance taking the lease over loads the checkpoint then (not the one it found at its
//! start), so the instances of one stage may share the directory (a ReadWriteMany volume):
//! the new holder starts from the old one's last checkpoint and re-reads only the records
//! after it. A holder frozen past its session (the lease taken from it) may still finish a
//! write when it thaws; since each process writes its own temporary file, that leaves a whole
//! checkpoint, an older one, whose offsets the group held when it was taken.

use anyhow::{anyhow, Context as _, Result};
use metrics::{counter, gauge, histogram};
use neardup_topology::checkpoint::{self, Header};
use neardup_topology::{Config, Topology};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Instant;
use tracing::{info, warn};

/// A checkpoint directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// Opens (creating it if needed) the directory, and checks that it is writable.
    pub fn open(dir: &Path) -> Result<Store> {
        fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the checkpoint directory {}", dir.display()))?;
        let probe = dir.join(".write-probe");
        fs::write(&probe, b"").with_context(|| {
            format!(
                "the checkpoint directory {} is not writable (mount a volume there, or fix its owner: neardup runs as uid 10001 in its image)",
                dir.display()
            )
        })?;
        let _ = fs::remove_file(probe);
        remove_stale_temp_files(dir);
        Ok(Store {
            dir: dir.to_owned(),
        })
    }

    /// The checkpoint file's length and time of last change, to tell whether it was replaced
    /// (`None`: there is none, or it cannot be read).
    pub fn file_stamp(&self) -> Option<(u64, std::time::SystemTime)> {
        let m = fs::metadata(self.path()).ok()?;
        Some((m.len(), m.modified().ok()?))
    }

    /// Where this process writes a checkpoint before renaming it into place.
    pub fn temp_path(&self) -> PathBuf {
        self.dir.join(temp_file_name(std::process::id()))
    }

    /// The checkpoint file.
    pub fn path(&self) -> PathBuf {
        self.dir.join("checkpoint")
    }

    /// The topology restored from the checkpoint, if there is one. A checkpoint that cannot be
    /// restored (another version or configuration, another topic, damaged) is an error that
    /// names the file and says what to do.
    pub fn load(&self, cfg: Config, topic: &str) -> Result<Option<(Topology, Header)>> {
        let path = self.path();
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let restored = checkpoint::restore(cfg, topic, &bytes)
            .with_context(|| format!("cannot restore the checkpoint {}", path.display()))?;
        Ok(Some(restored))
    }

    /// Replaces the checkpoint with what `write` writes to a new file, atomically and durably;
    /// returns what `write` returns.
    pub fn save<T>(&self, write: impl FnOnce(&mut fs::File) -> std::io::Result<T>) -> Result<T> {
        let tmp = self.temp_path();
        let path = self.path();
        let save = || -> std::io::Result<T> {
            let mut f = fs::File::create(&tmp)?;
            let written = write(&mut f)?;
            f.sync_all()?;
            fs::rename(&tmp, &path)?;
            // The rename itself is durable once the directory is synced.
            fs::File::open(&self.dir)?.sync_all()?;
            Ok(written)
        };
        save().with_context(|| format!("cannot write the checkpoint {}", path.display()))
    }
}

/// The name of the temporary file process `pid` of this host writes a checkpoint into:
/// `checkpoint.HOST-PID.tmp`. The host tells apart the pods sharing a directory (each is
/// process 1 of its own container), the process id the processes of one host.
pub fn temp_file_name(pid: u32) -> String {
    format!("checkpoint.{}-{pid}.tmp", host_name())
}

/// This host's name (a Kubernetes pod's name), or `localhost` where it cannot be read.
fn host_name() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty() && !h.contains(['/', '\\']))
        .unwrap_or_else(|| "localhost".into())
}

/// Removes the temporary files that processes of this host no longer running left in `dir`
/// (killed while writing), and `checkpoint.tmp`, which versions before the thirtieth session
/// wrote, once it is an hour old. Another host's files are its own to remove: only its
/// processes are known to it.
fn remove_stale_temp_files(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("checkpoint.{}-", host_name());
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let stale = if let Some(pid) = name
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(".tmp"))
        {
            pid.parse::<u32>().is_ok_and(|pid| {
                pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
            })
        } else {
            name == "checkpoint.tmp"
                && entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().is_ok_and(|age| age.as_secs() > 3600))
        };
        if stale && fs::remove_file(entry.path()).is_ok() {
            info!(file = %entry.path().display(), "removed the temporary file of a checkpoint whose writer is gone");
        }
    }
}

/// Takes checkpoints into a [`Store`]: the state is copied at once, while the run loop waits
/// (the state must not change under it), and the copy is serialized into the file, which is
/// synced, on a thread of its own, so input resumes without waiting for either.
///
/// Serializing the medium crawl's state took 0.06-0.11 s, and writing the file of it (26-31 MB)
/// 0.2 to 1.3 times as long on this machine's disk (a network volume syncs slower); both grow
/// with the window (1.5-1.9 GB at 1,000,000 pages). Input waited for both until the
/// twenty-fourth session, and for the serialization until the twenty-fifth; a copy takes about
/// a quarter of its time ([`checkpoint::Snapshot`]). A crash while the file is written leaves
/// the previous checkpoint, which is still valid: it names the offsets its state reflects, and
/// a restart re-reads from there. One save at a time: [`Saver::begin`] first waits for the one
/// before (the run loop skips a periodic checkpoint while [`Saver::busy`]).
#[derive(Debug)]
pub struct Saver {
    store: Store,
    saving: Option<Saving>,
}

/// A checkpoint whose state is copied and whose file is being written.
#[derive(Debug)]
struct Saving {
    /// The thread writing the file; it returns the seconds that took and the file's length.
    thread: JoinHandle<Result<(f64, u64)>>,
    /// When the state was copied: the age of the checkpoint counts from here.
    at: Instant,
    /// Seconds the state took to copy (input waited for them).
    copied: f64,
    /// Seconds input waited for the checkpoint, the copy included.
    paused: f64,
    /// Seconds of that the offsets took to commit.
    commit: f64,
    offsets: BTreeMap<i32, i64>,
}

impl Saver {
    /// A saver into `store`.
    pub fn new(store: Store) -> Saver {
        Saver {
            store,
            saving: None,
        }
    }

    /// The checkpoint directory.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Copies the state of `topo`, which reflects the records of `topic` before `offsets`, and
    /// starts writing it, after the write under way (if any) has finished. Returns when
    /// that earlier checkpoint was taken, if it was written (see [`Saver::poll`]). `paused`:
    /// when input stopped for this checkpoint (the records read drained, their outputs
    /// acknowledged, the offsets committed, which took `commit`), which it resumes after this.
    pub fn begin(
        &mut self,
        topo: &Topology,
        topic: &str,
        offsets: &BTreeMap<i32, i64>,
        paused: Instant,
        commit: std::time::Duration,
    ) -> Option<Instant> {
        let before = self.wait();
        let t0 = Instant::now();
        let snapshot = checkpoint::snapshot(topo, topic, offsets);
        let copied = t0.elapsed().as_secs_f64();
        let paused = paused.elapsed().as_secs_f64();
        histogram!("neardup_checkpoint_pause_seconds").record(paused);
        let store = self.store.clone();
        let thread =
            std::thread::Builder::new()
                .name("checkpoint".into())
                .spawn(crate::telemetry::staged(move || {
                    let t = Instant::now();
                    let bytes = store.save(|file| {
                        let bytes = snapshot.write_to(file);
                        // The copy's memory goes back before the sync.
                        drop(snapshot);
                        bytes
                    })?;
                    Ok((t.elapsed().as_secs_f64(), bytes))
                }));
        match thread {
            Ok(thread) => {
                self.saving = Some(Saving {
                    thread,
                    at: t0,
                    copied,
                    paused,
                    commit: commit.as_secs_f64(),
                    offsets: offsets.clone(),
                })
            }
            Err(e) => failed(&anyhow!(e).context("cannot start the thread that writes it")),
        }
        before
    }

    /// Whether a checkpoint's file is still being written.
    pub fn busy(&self) -> bool {
        self.saving
            .as_ref()
            .is_some_and(|s| !s.thread.is_finished())
    }

    /// If the write under way has finished: when its checkpoint was taken, if it was written
    /// (it is logged and counted either way). Does not wait.
    pub fn poll(&mut self) -> Option<Instant> {
        match &self.saving {
            Some(s) if s.thread.is_finished() => self.wait(),
            _ => None,
        }
    }

    /// Waits up to `limit` for the write under way, if any (a volume that hangs must not hang
    /// the shutdown): when its checkpoint was taken, if it was written in time. A write that
    /// takes longer is left to the thread, and the process may exit under it: the last
    /// checkpoint written stays, whole.
    pub fn wait_within(&mut self, limit: std::time::Duration) -> Option<Instant> {
        let started = Instant::now();
        while self.busy() {
            if started.elapsed() >= limit {
                warn!(
                    limit_seconds = limit.as_secs_f64(),
                    "the checkpoint being written did not finish in time (--drain-timeout): the last one written stays"
                );
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        self.wait()
    }

    /// Waits for the write under way, if any: when its checkpoint was taken, if it was
    /// written.
    pub fn wait(&mut self) -> Option<Instant> {
        let s = self.saving.take()?;
        let result = s
            .thread
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the thread that wrote it panicked")));
        let (written, bytes) = match result {
            Ok(done) => done,
            Err(e) => {
                failed(&e);
                return None;
            }
        };
        let seconds = s.copied + written;
        histogram!("neardup_checkpoint_write_seconds").record(seconds);
        gauge!("neardup_checkpoint_bytes").set(bytes as f64);
        gauge!("neardup_checkpoint_age_seconds").set(s.at.elapsed().as_secs_f64());
        counter!("neardup_checkpoints_total").increment(1);
        info!(offsets = ?s.offsets, bytes, input_paused = s.paused, commit = s.commit, copied = s.copied, seconds, "checkpoint written");
        Some(s.at)
    }
}

/// A checkpoint that cannot be written (a full or read-only volume) does not stop the run: the
/// last one stays valid, since it names the offsets its state reflects and a restart re-reads
/// from there, so the run goes on producing and committing, and tries again at the next
/// interval. Stopping instead would not save the state either, and a restarted process would
/// stop again at its first checkpoint, re-reading everything since the last one each time.
fn failed(e: &anyhow::Error) {
    counter!("neardup_checkpoint_failures_total").increment(1);
    warn!(error = %format!("{e:#}"), "checkpoint not written: the last one stays, and a restart re-reads from its offsets; the next is tried at the next interval (free space on the volume, or check its permissions)");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::io::Write as _;

    /// An empty directory of this process's own under the temporary directory.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("neardup-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn saves_atomically_and_loads_what_it_saved() {
        let dir = scratch("ckpt");
        let store = Store::open(&dir).unwrap();
        assert!(store.load(Config::default(), "t").unwrap().is_none());
        let topo = Topology::new(Config::default());
        let offsets = BTreeMap::from([(0, 7), (3, 9)]);
        let bytes = checkpoint::write(&topo, "t", &offsets);
        for _ in 0..2 {
            store.save(|f| f.write_all(&bytes)).unwrap();
        }
        assert!(!store.temp_path().exists());
        let (_, header) = store.load(Config::default(), "t").unwrap().unwrap();
        assert_eq!(header.offsets, offsets);
        let Err(err) = store.load(Config::default(), "u") else {
            panic!("a checkpoint of another topic was restored");
        };
        let msg = format!("{err:#}");
        assert!(
            msg.contains("checkpoint") && msg.contains("input topic"),
            "{msg}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Opening a directory removes the temporary files of this host's processes that are gone
    /// and an old `checkpoint.tmp` of an earlier version, and nothing else: another host's,
    /// a running process's, and a recent `checkpoint.tmp` (an earlier version may still be
    /// writing it).
    #[test]
    fn opening_removes_only_the_temporary_files_whose_writer_is_gone() {
        let dir = scratch("stale");
        fs::create_dir_all(&dir).unwrap();
        // Beyond any pid_max (at most 2^22 on Linux).
        let gone = dir.join(temp_file_name(4_000_000_000));
        let running = dir.join(temp_file_name(1));
        let mine = dir.join(temp_file_name(std::process::id()));
        let other_host = dir.join("checkpoint.another-host-7.tmp");
        let legacy = dir.join("checkpoint.tmp");
        for f in [&gone, &running, &mine, &other_host, &legacy] {
            fs::write(f, b"partial").unwrap();
        }
        Store::open(&dir).unwrap();
        assert!(!gone.exists());
        for f in [&running, &mine, &other_host, &legacy] {
            assert!(f.exists(), "{} removed", f.display());
        }
        let aged = std::process::Command::new("touch")
            .args(["-d", "2 hours ago"])
            .arg(&legacy)
            .status();
        if aged.is_ok_and(|s| s.success()) {
            Store::open(&dir).unwrap();
            assert!(!legacy.exists(), "an old checkpoint.tmp stayed");
        }
        assert!(running.exists() && mine.exists() && other_host.exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    /// The saver writes each checkpoint whole, one at a time, and a write that fails leaves
    /// the one before it in place.
    #[test]
    fn the_saver_writes_in_the_background_and_keeps_the_last_on_failure() {
        let dir = scratch("saver");
        let mut saver = Saver::new(Store::open(&dir).unwrap());
        assert!(
            saver.poll().is_none() && saver.wait().is_none(),
            "nothing under way"
        );
        let topo = Topology::new(Config::default());
        let first = BTreeMap::from([(0, 7)]);
        let before = Instant::now();
        assert!(saver
            .begin(&topo, "t", &first, Instant::now(), Default::default())
            .is_none());
        // The second waits for the first, and says when the first was taken.
        let second = BTreeMap::from([(0, 9)]);
        let at = saver
            .begin(&topo, "t", &second, Instant::now(), Default::default())
            .expect("the first was written");
        assert!(at >= before);
        assert!(saver.wait().is_some_and(|t| t >= at));
        let offsets = |saver: &Saver| {
            saver
                .store()
                .load(Config::default(), "t")
                .unwrap()
                .unwrap()
                .1
                .offsets
        };
        assert_eq!(offsets(&saver), second);
        // A write that cannot be made (the temporary file's place taken) is not a checkpoint.
        fs::create_dir(saver.store().temp_path()).unwrap();
        assert!(saver
            .begin(
                &topo,
                "t",
                &BTreeMap::from([(0, 11)]),
                Instant::now(),
                Default::default()
            )
            .is_none());
        let started = Instant::now();
        while saver.saving.is_some() {
            assert!(saver.poll().is_none(), "a failed write counted as written");
            assert!(started.elapsed() < std::time::Duration::from_secs(30));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(offsets(&saver), second);
        // Once the volume works again: busy while the file is written, then polled.
        fs::remove_dir(saver.store().temp_path()).unwrap();
        let third = BTreeMap::from([(0, 13)]);
        assert!(saver
            .begin(&topo, "t", &third, Instant::now(), Default::default())
            .is_none());
        while saver.busy() {
            assert!(started.elapsed() < std::time::Duration::from_secs(30));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(
            saver.poll().is_some(),
            "a finished write is collected by poll"
        );
        assert!(!saver.busy() && saver.poll().is_none());
        assert_eq!(offsets(&saver), third);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A volume that hangs does not hang the shutdown: the wait for the write is bounded.
    /// (A FIFO in the temporary file's place: opening it to write blocks until it is read.)
    #[test]
    fn a_write_that_hangs_is_waited_for_within_the_limit() {
        let dir = scratch("hang");
        let mut saver = Saver::new(Store::open(&dir).unwrap());
        let fifo = saver.store().temp_path();
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("no mkfifo here: nothing checked");
            return;
        }
        let topo = Topology::new(Config::default());
        let offsets = BTreeMap::from([(0, 5)]);
        saver.begin(&topo, "t", &offsets, Instant::now(), Default::default());
        let limit = std::time::Duration::from_millis(200);
        // Should the wait not be bounded, the write is let through after 10 s, so the test
        // fails on the time it took instead of hanging.
        let watchdog = fifo.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(10));
            if let Ok(mut f) = fs::File::open(watchdog) {
                let _ = std::io::copy(&mut f, &mut std::io::sink());
            }
        });
        let t = Instant::now();
        assert!(saver.wait_within(limit).is_none());
        assert!(t.elapsed() >= limit && t.elapsed() < limit * 20);
        assert!(saver.busy(), "the write was not blocked");
        // The volume answers: the write ends (a FIFO cannot be synced, so it fails).
        let mut read = fs::File::open(&fifo).unwrap();
        assert!(std::io::copy(&mut read, &mut std::io::sink()).unwrap() > 0);
        assert!(saver.wait().is_none() && !saver.busy());
        fs::remove_dir_all(&dir).unwrap();
    }
}
