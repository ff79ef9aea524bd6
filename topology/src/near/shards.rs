//! The key tables split by key into shards, asked by request and answer (DESIGN.md §3: the
//! index partitioned by sketch key), so N shards give exactly the answers of one.

use super::{NearConfig, MAX_KEYS};
use crate::multimap::MultiMap;

/// The shard that holds `key` among `shards`. Keys are mixed hashes, so a multiply-shift
/// spreads them evenly.
pub(super) fn shard_of(key: u32, shards: usize) -> usize {
    ((u64::from(key) * shards as u64) >> 32) as usize
}

/// A page's keys that one shard holds, with their positions in the page's key list (0 the
/// checksum, then the bands or pieces).
#[derive(Debug, Clone, Copy)]
pub(super) struct ShardKeys {
    pub(super) positions: [u8; MAX_KEYS],
    pub(super) keys: [u32; MAX_KEYS],
    pub(super) n: usize,
}

impl ShardKeys {
    /// The keys of `keys` that shard `index` of `of` holds.
    pub(super) fn of(keys: &[u32], index: usize, of: usize) -> ShardKeys {
        let mut out = ShardKeys {
            positions: [0; MAX_KEYS],
            keys: [0; MAX_KEYS],
            n: 0,
        };
        for (position, &k) in keys.iter().enumerate() {
            if shard_of(k, of) == index {
                out.positions[out.n] = position as u8;
                out.keys[out.n] = k;
                out.n += 1;
            }
        }
        out
    }
}

/// How much of a bucket a filing's answer carries: the lookup needs a band or piece bucket's
/// newest `max_bucket − 1` pages (its candidates when the bucket is hot) and newest
/// `4 · boilerplate_sample` (where it samples the site), and a checksum bucket whole unless it
/// has `max_pairs_per_join` pages or more (then none).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub(super) struct ViewLimits {
    pub(super) checksum: usize,
    pub(super) other: usize,
}

impl ViewLimits {
    pub(super) fn of(cfg: &NearConfig) -> ViewLimits {
        ViewLimits {
            checksum: cfg.max_pairs_per_join,
            other: cfg
                .max_bucket
                .saturating_sub(1)
                .max(4 * cfg.boilerplate_sample),
        }
    }
}

/// A filing's answer, merged over the shards by key position: each bucket's length before the
/// filing and its pages that the lookup needs (the newest, oldest first).
pub(super) struct Answer<'a> {
    pub(super) lens: [usize; MAX_KEYS],
    pub(super) buckets: [&'a [u32]; MAX_KEYS],
}

impl Answer<'_> {
    pub(super) fn empty() -> Self {
        Answer {
            lens: [0; MAX_KEYS],
            buckets: [&[][..]; MAX_KEYS],
        }
    }
}

/// One part of the key tables, split by key (DESIGN.md §3: the index partitioned by sketch
/// key). A shard knows pages only by slot. To file a page, the index asks each shard for its
/// part of the answer (what the page's lookup needs of each of its buckets), then has it file
/// the page under its keys; it asks shards to drop a page the same way. Every key lives in
/// exactly one shard and a bucket lists its pages in filing order (removals keep the order), so
/// the merged answers are the same for any number of shards. In one process an answer borrows
/// the buckets; a shard in another process would send the same pages.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct KeyShard {
    pub(super) table: MultiMap,
}

impl KeyShard {
    /// Writes this shard's part of a filing's answer for `keys` into `answer`.
    pub(super) fn answer<'a>(
        &'a self,
        keys: &ShardKeys,
        limits: ViewLimits,
        answer: &mut Answer<'a>,
    ) {
        let buckets: [&[u32]; MAX_KEYS] = self.table.get_all(&keys.keys[..keys.n]);
        for (&position, bucket) in keys.positions[..keys.n].iter().zip(buckets) {
            let len = bucket.len();
            let keep = match position {
                0 if len < limits.checksum => len,
                0 => 0,
                _ => len.min(limits.other),
            };
            answer.lens[position as usize] = len;
            answer.buckets[position as usize] = &bucket[len - keep..];
        }
    }

    /// Files `slot` under `keys`.
    pub(super) fn file(&mut self, slot: u32, keys: &ShardKeys) {
        for &k in &keys.keys[..keys.n] {
            self.table.insert(k, slot);
        }
    }

    /// Removes `slot` from the buckets of `keys`.
    pub(super) fn drop(&mut self, slot: u32, keys: &ShardKeys) {
        // Every bucket read first, so that their misses overlap before any is changed.
        let _: [&[u32]; MAX_KEYS] = self.table.get_all(&keys.keys[..keys.n]);
        for &k in &keys.keys[..keys.n] {
            self.table.remove(k, slot);
        }
    }
}
