//! The previous successful fetch of each URL in the window, for the change buckets of seed 000
//! §3 (figs. 8-10).
//!
//! Per URL it keeps the content checksum, the normalised-text hash and the 84 min-values cut to
//! their low 16 bits (168 bytes instead of 672). Two cut min-values agree by accident with
//! probability 2^-16, so over 84 values the agreeing count is overstated by 0.0013 on average:
//! far below the width of a change bucket (28 values).

use crate::sketch::change::{change_bucket, ChangeBucket};
use crate::sketch::minhash::{BSketch, MINVALUES};
use crate::window::{Expiry, Ticket};
use std::collections::HashMap;
use std::sync::Arc;

/// What is kept of a fetch.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Fetch {
    /// Hashes are written in their 16 bytes, not as varints (19 bytes for most).
    #[serde(with = "postcard::fixint::le")]
    checksum: u128,
    #[serde(with = "postcard::fixint::le")]
    text_hash: u128,
    #[serde(with = "crate::fixed::le")]
    minvalues: [u16; MINVALUES],
    ticket: Ticket,
}

/// A fetch compared with the previous one of its URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Change {
    /// When the previous fetch was made (ms since the epoch).
    pub previous_ms: i64,
    /// Agreeing min-values, 0-84.
    pub agreeing_minvalues: u8,
    /// Byte-identical bodies.
    pub same_checksum: bool,
    /// Identical normalised text.
    pub same_text: bool,
    /// The bucket.
    pub bucket: ChangeBucket,
}

/// The last fetch with content of every URL in the window.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct History {
    window_ms: i64,
    /// Boxed: a fetch is 224 bytes, and a map holding them inline keeps its free buckets at
    /// that size too (up to half the table after it grows), where boxed they cost 8 bytes.
    by_url: HashMap<Arc<str>, Box<Fetch>>,
    expiry: Expiry<Arc<str>>,
}

impl History {
    /// Empty, keeping fetches for `window_ms` of event time.
    pub fn new(window_ms: i64) -> Self {
        History {
            window_ms,
            ..History::default()
        }
    }

    /// After a restore: makes every URL the pool's copy ([`crate::intern`]).
    pub(crate) fn fit_restored(&mut self, pool: &mut crate::intern::UrlPool) {
        pool.share_keys(&mut self.by_url);
        self.expiry.fit_restored(pool);
    }

    /// Every URL held, as often as held.
    #[cfg(test)]
    pub(crate) fn url_copies(&self) -> impl Iterator<Item = &Arc<str>> {
        self.by_url.keys().chain(self.expiry.keys())
    }

    /// URLs held.
    pub fn len(&self) -> usize {
        self.by_url.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.by_url.is_empty()
    }

    /// Forgets fetches older than the window.
    pub fn advance(&mut self, watermark_ms: i64) {
        let horizon = watermark_ms.saturating_sub(self.window_ms);
        while let Some(url) = self.expiry.pop_before(horizon) {
            self.by_url.remove(&url);
        }
    }

    /// Forgets `url`'s fetch (the sketch window's page budget evicted the page): the history
    /// keeps no more URLs than that window, and the URL's next fetch has no change to report.
    pub fn forget(&mut self, url: &str) {
        if let Some(f) = self.by_url.remove(url) {
            self.expiry.remove(f.ticket);
        }
    }

    /// A fetch at `at_ms` that found `url`'s content unchanged (304 Not Modified): the fetch held
    /// is current as of then, so it stays a window from then and the next fetch's change is
    /// since then. False when no fetch of `url` is held, or a later one is.
    pub fn renew(&mut self, url: &str, at_ms: i64) -> bool {
        self.by_url
            .get_mut(url)
            .is_some_and(|f| self.expiry.renew(&mut f.ticket, at_ms))
    }

    /// Records a fetch with content and returns its change since the previous one, if any.
    /// A fetch older than the one held is stale: it is neither compared nor kept. A URL not
    /// held yet is kept as `url_of` gives it (the state's `crate::intern::UrlPool`, to share
    /// it with the other parts; or `Arc::from`).
    pub fn record(
        &mut self,
        url: &str,
        at_ms: i64,
        checksum: u128,
        text_hash: u128,
        b: &BSketch,
        url_of: impl FnOnce(&str) -> Arc<str>,
    ) -> Option<Change> {
        let mut cut = [0u16; MINVALUES];
        for (c, m) in cut.iter_mut().zip(b.minvalues.iter()) {
            *c = *m as u16;
        }
        match self.by_url.get_mut(url) {
            Some(prev) => {
                if at_ms < prev.ticket.at_ms() {
                    return None;
                }
                let agreeing = prev
                    .minvalues
                    .iter()
                    .zip(cut.iter())
                    .filter(|(a, b)| a == b)
                    .count() as u8;
                let (same_checksum, same_text) =
                    (prev.checksum == checksum, prev.text_hash == text_hash);
                // The expiry holds the URL of every fetch held (the same `Arc` as the map).
                let key = self
                    .expiry
                    .remove(prev.ticket)
                    .unwrap_or_else(|| url_of(url));
                let change = Change {
                    previous_ms: prev.ticket.at_ms(),
                    agreeing_minvalues: agreeing,
                    same_checksum,
                    same_text,
                    bucket: change_bucket(agreeing, same_checksum, same_text),
                };
                **prev = Fetch {
                    checksum,
                    text_hash,
                    minvalues: cut,
                    ticket: self.expiry.insert(at_ms, key),
                };
                Some(change)
            }
            None => {
                let key = url_of(url);
                let ticket = self.expiry.insert(at_ms, key.clone());
                let fetch = Fetch {
                    checksum,
                    text_hash,
                    minvalues: cut,
                    ticket,
                };
                self.by_url.insert(key, Box::new(fetch));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sketch(v: u64) -> BSketch {
        BSketch {
            minvalues: [v; MINVALUES],
            ..BSketch::default()
        }
    }

    #[test]
    fn compares_with_the_previous_fetch_and_forgets_after_the_window() {
        let url = |u: &str| Arc::from(u);
        let mut h = History::new(100);
        assert_eq!(h.record("u", 10, 1, 1, &sketch(5), url), None);
        let c = h.record("u", 20, 1, 1, &sketch(5), url).unwrap();
        assert_eq!(
            (c.bucket, c.previous_ms, c.agreeing_minvalues),
            (ChangeBucket::NoChange, 10, 84)
        );
        let mut half = sketch(5);
        half.minvalues[..42].fill(6);
        let c = h.record("u", 30, 2, 2, &half, url).unwrap();
        assert_eq!((c.bucket, c.agreeing_minvalues), (ChangeBucket::Medium, 42));
        assert_eq!(h.record("u", 25, 2, 2, &half, url), None, "stale fetch");
        h.advance(131);
        assert!(h.is_empty());
        assert_eq!(h.record("u", 140, 2, 2, &half, url), None);
    }
}
