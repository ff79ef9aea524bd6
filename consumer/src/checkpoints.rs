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
//! **Writing.** `checkpoint.tmp` is written and synced, then renamed over `checkpoint` and the
//! directory synced: a crash leaves the previous checkpoint or the new one, never half of one.

use anyhow::{Context as _, Result};
use neardup_topology::checkpoint::{self, Header};
use neardup_topology::{Config, Topology};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

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
        Ok(Store {
            dir: dir.to_owned(),
        })
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

    /// Replaces the checkpoint with `bytes`, atomically and durably.
    pub fn save(&self, bytes: &[u8]) -> Result<()> {
        let tmp = self.dir.join("checkpoint.tmp");
        let path = self.path();
        let write = || -> std::io::Result<()> {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            fs::rename(&tmp, &path)?;
            // The rename itself is durable once the directory is synced.
            fs::File::open(&self.dir)?.sync_all()
        };
        write().with_context(|| format!("cannot write the checkpoint {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn saves_atomically_and_loads_what_it_saved() {
        let dir = std::env::temp_dir().join(format!("neardup-ckpt-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let store = Store::open(&dir).unwrap();
        assert!(store.load(Config::default(), "t").unwrap().is_none());
        let topo = Topology::new(Config::default());
        let offsets = BTreeMap::from([(0, 7), (3, 9)]);
        store
            .save(&checkpoint::write(&topo, "t", &offsets))
            .unwrap();
        store
            .save(&checkpoint::write(&topo, "t", &offsets))
            .unwrap();
        assert!(!dir.join("checkpoint.tmp").exists());
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
}
