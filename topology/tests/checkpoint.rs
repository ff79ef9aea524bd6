//! A topology restored from a checkpoint continues exactly as the one that wrote it: for every
//! split point, processing the first records, checkpointing, restoring into a fresh topology and
//! processing the rest gives the same output bytes, in the same order, as one uninterrupted run.
//! Every stateful part is switched on (exact and near windows, both cluster levels, hints with
//! in-link ranking, mirrors, collections, the Hyperlink Map veto, evolution, change history), and
//! the stream exercises what they keep: mirrored and near-duplicate pages over three crawl rounds,
//! refetches with changes, removals, malformed lines and a jump past the window.
//!
//! Also: a damaged, foreign or differently configured checkpoint is refused with an error that
//! names the cause.

use neardup_schemas::Source;
use neardup_topology::checkpoint::{self, CheckpointError};
use neardup_topology::{Config, Emit, Topology};
use std::collections::BTreeMap;

mod common;
use common::{everything_on as config, mixed_stream as stream};

const TOPIC: &str = "crawl.pages";

fn process(topo: &mut Topology, lines: &[Vec<u8>], first: usize, out: &mut Vec<Emit>) {
    for (n, line) in lines.iter().enumerate() {
        let src = Source::Kafka {
            topic: TOPIC.into(),
            partition: 0,
            offset: (first + n) as i64,
        };
        topo.process(line, &src, out);
    }
}

fn bytes(out: &[Emit]) -> Vec<(String, String, String)> {
    out.iter()
        .map(|e| {
            (
                format!("{:?}", e.kind),
                e.key.clone(),
                String::from_utf8_lossy(&e.value).into_owned(),
            )
        })
        .collect()
}

#[test]
fn a_restored_topology_continues_as_the_one_that_wrote_the_checkpoint() {
    let lines = stream();
    let mut whole = Topology::new(config());
    let mut expected = Vec::new();
    process(&mut whole, &lines, 0, &mut expected);
    let kinds: std::collections::BTreeSet<_> = expected.iter().map(|e| e.kind).collect();
    assert!(
        kinds.len() >= 6,
        "the stream must exercise most outputs: {kinds:?}"
    );

    for split in [
        1,
        lines.len() / 5,
        lines.len() / 2,
        2 * lines.len() / 3,
        lines.len() - 3,
    ] {
        let mut first = Topology::new(config());
        let mut out = Vec::new();
        process(&mut first, &lines[..split], 0, &mut out);
        let offsets = BTreeMap::from([(0, split as i64)]);
        let ck = checkpoint::write(&first, TOPIC, &offsets);
        drop(first);
        let (mut restored, header) = checkpoint::restore(config(), TOPIC, &ck).expect("restores");
        assert_eq!(header.offsets, offsets);
        assert_eq!(header.records, split as u64);
        // A restored topology checkpoints the same state again (the same size: maps with
        // per-process hash seeds list their entries in another order).
        let again = checkpoint::write(&restored, TOPIC, &offsets);
        assert_eq!(again.len(), ck.len(), "split {split}");
        process(&mut restored, &lines[split..], split, &mut out);
        assert_eq!(
            bytes(&out),
            bytes(&expected),
            "outputs differ when restored at {split}"
        );
        assert_eq!(restored.stats(), whole.stats());
    }
}

/// A snapshot taken at a barrier and written after the topology has gone on is the checkpoint
/// of the barrier, byte for byte; a write that fails says why.
#[test]
fn a_snapshot_written_later_is_the_checkpoint_of_its_barrier() {
    let lines = stream();
    let split = lines.len() / 2;
    let mut topo = Topology::new(config());
    process(&mut topo, &lines[..split], 0, &mut Vec::new());
    let offsets = BTreeMap::from([(0, split as i64)]);
    let at_barrier = checkpoint::write(&topo, TOPIC, &offsets);
    let snap = checkpoint::snapshot(&topo, TOPIC, &offsets);
    process(&mut topo, &lines[split..], split, &mut Vec::new());
    assert_ne!(checkpoint::write(&topo, TOPIC, &offsets), at_barrier);
    let mut out = std::io::Cursor::new(Vec::new());
    let n = snap.write_to(&mut out).expect("written");
    let later = out.into_inner();
    assert_eq!(n as usize, later.len());
    assert!(later == at_barrier, "the snapshot's bytes differ");
    let (_, header) = checkpoint::restore(config(), TOPIC, &later).expect("restores");
    assert_eq!(header.records, split as u64);

    /// A volume that fills up after `room` bytes.
    struct Full {
        room: u64,
        at: u64,
    }
    impl std::io::Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.at + buf.len() as u64 > self.room {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "no space left",
                ));
            }
            self.at += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl std::io::Seek for Full {
        fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
            match to {
                std::io::SeekFrom::Start(at) => self.at = at,
                _ => unreachable!("the writer seeks from the start"),
            }
            Ok(self.at)
        }
    }
    // Full in the header, in the body, and at its last byte.
    for room in [10, at_barrier.len() as u64 / 2, at_barrier.len() as u64 - 1] {
        let err = snap
            .write_to(Full { room, at: 0 })
            .expect_err("a full volume");
        assert_eq!(err.kind(), std::io::ErrorKind::StorageFull, "{room}: {err}");
    }
}

#[test]
fn a_checkpoint_that_does_not_fit_is_refused_with_its_cause() {
    let lines = stream();
    let mut topo = Topology::new(config());
    process(&mut topo, &lines[..40], 0, &mut Vec::new());
    let ck = checkpoint::write(&topo, TOPIC, &BTreeMap::from([(0, 40)]));

    let (header, start) = checkpoint::read_header(&ck).expect("header");
    assert_eq!(header.format, checkpoint::FORMAT);
    assert!(start < 1000 && header.body_bytes as usize == ck.len() - start);

    let other = Config {
        window_ms: 7 * 24 * 3600 * 1000,
        ..config()
    };
    let err = checkpoint::restore(other, TOPIC, &ck)
        .err()
        .expect("refused");
    assert!(matches!(err, CheckpointError::Parameters { .. }), "{err}");
    assert!(err.to_string().contains("remove the file"), "{err}");

    let err = checkpoint::restore(config(), "other.topic", &ck)
        .err()
        .expect("refused");
    assert!(matches!(err, CheckpointError::Topic { .. }), "{err}");

    let err = checkpoint::restore(config(), TOPIC, &ck[..ck.len() - 1])
        .err()
        .expect("refused");
    assert!(matches!(err, CheckpointError::Damaged(_)), "{err}");

    let mut flipped = ck.clone();
    let last = flipped.len() - 10;
    flipped[last] ^= 1;
    let err = checkpoint::restore(config(), TOPIC, &flipped)
        .err()
        .expect("refused");
    assert!(matches!(err, CheckpointError::Damaged(_)), "{err}");

    let err = checkpoint::restore(config(), TOPIC, b"{\"url\":1}\n")
        .err()
        .expect("refused");
    assert!(matches!(err, CheckpointError::NotACheckpoint(_)), "{err}");

    let header = String::from_utf8_lossy(&ck[..start]).into_owned();
    let current = format!("\"format\":{}", checkpoint::FORMAT);
    assert!(header.contains(&current), "{header}");
    let old = header.replace(&current, &format!("\"format\":{}", checkpoint::FORMAT - 1));
    let mut older = old.into_bytes();
    older.extend_from_slice(&ck[start..]);
    let err = checkpoint::restore(config(), TOPIC, &older)
        .err()
        .expect("refused");
    assert!(matches!(err, CheckpointError::Version { .. }), "{err}");
}
