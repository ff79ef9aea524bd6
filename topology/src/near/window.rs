//! The window's bookkeeping: which URL is in which slot, when each was fetched, and which page
//! leaves next by event time or by the page budget. It decides from URLs, event times and
//! whether a fetch brings new content, never from verification, so a [`super::Sequencer`] can
//! run it ahead of the verifying index.

use super::{reserve_an_eighth, Fetch, NearStats, Sketch};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// When the page in a slot was fetched ([`Stamp::FREE`]: the slot holds none), in 8 bytes.
///
/// An expiry entry is current while its slot's stamp has the entry's time. An entry can also
/// match a later page of the slot with the very same fetch time; it then stands for that page,
/// as that page's own entry does (the same time and slot, so the same place in the order), and
/// whichever of the two comes first removes it, at the time its own entry would. (A fetch
/// counter in each stamp and entry told the two apart, for 8 bytes more per page and 4 per entry;
/// it changed no outcome.)
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Stamp {
    pub(super) at_ms: i64,
}

impl Stamp {
    /// The stamp of a free slot; a fetch at this time is stamped a millisecond later.
    pub(super) const FREE: i64 = i64::MIN;

    #[cfg(test)]
    fn live(self) -> bool {
        self.at_ms != Self::FREE
    }
}

impl Default for Stamp {
    fn default() -> Self {
        Stamp { at_ms: Stamp::FREE }
    }
}

/// An expiry entry: a fetch time, split into its high half (signed) and its low half so that
/// the entry orders as (time, slot) in 12 bytes (an `(i64, u32)` takes 16), and the slot.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub(super) struct Due(i32, u32, u32);

impl Due {
    pub(super) fn new(at_ms: i64, slot: u32) -> Due {
        Due((at_ms >> 32) as i32, at_ms as u32, slot)
    }

    pub(super) fn at_ms(self) -> i64 {
        i64::from(self.0) << 32 | i64::from(self.1)
    }

    pub(super) fn slot(self) -> u32 {
        self.2
    }

    /// Whether this is the expiry entry of the page its slot holds in `stamps` (see [`Stamp`]).
    fn is_current_in(self, stamps: &[Stamp]) -> bool {
        stamps[self.slot() as usize].at_ms == self.at_ms()
    }
}

/// What the window did, for its host to carry out.
pub(super) enum Change<'a> {
    /// The page in `slot` left (no content, out of the window by event time, or over the
    /// budget); the slot is free.
    Removed {
        slot: u32,
        crawl_id: Option<&'a str>,
    },
    /// The fetch's content is in `slot` under `url`; the URL's previous content left `replaced`.
    Filed {
        slot: u32,
        replaced: Option<u32>,
        url: Arc<str>,
        fetch: &'a Fetch<'a>,
    },
}

/// What keeps the pages of a [`Window`]: it tells a slot's URL and whether a slot holds a given
/// content, and carries out the window's changes in the order they happen.
pub(super) trait WindowHost {
    fn url(&self, slot: u32) -> &str;
    fn holds(&self, slot: u32, sketch: &Sketch) -> bool;
    fn change(&mut self, change: Change<'_>);
}

/// Which slot holds which URL: a table of bare slot numbers, each found by the hash of the URL
/// its slot holds, which the caller reads from wherever the pages keep their URLs (`url_of`).
/// A map keyed by the URL (`HashMap<Arc<str>, u32>`) kept a second pointer to every URL beside
/// the page's own: 24 bytes an entry against 4.
#[derive(Debug, Default, Clone)]
pub(super) struct UrlSlots {
    pub(super) table: hashbrown::HashTable<u32>,
}

impl UrlSlots {
    pub(super) fn hash(url: &str) -> u64 {
        use std::hash::BuildHasher;
        crate::hash::StrBuild::default().hash_one(url)
    }

    pub(super) fn get<'a>(&self, url: &str, url_of: impl Fn(u32) -> &'a str) -> Option<u32> {
        self.table
            .find(Self::hash(url), |&s| url_of(s) == url)
            .copied()
    }

    /// Adds `url` in `slot` (not held yet; every slot held already is `url_of` it).
    pub(super) fn insert<'a>(&mut self, url: &str, slot: u32, url_of: impl Fn(u32) -> &'a str) {
        self.table
            .insert_unique(Self::hash(url), slot, |&s| Self::hash(url_of(s)));
    }

    pub(super) fn remove<'a>(&mut self, url: &str, url_of: impl Fn(u32) -> &'a str) -> Option<u32> {
        match self
            .table
            .find_entry(Self::hash(url), |&s| url_of(s) == url)
        {
            Ok(entry) => Some(entry.remove().0),
            Err(_) => None,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    /// Bytes of the table (a control byte beside each entry).
    pub(super) fn bytes(&self) -> usize {
        self.table.capacity() * (std::mem::size_of::<u32>() + 1)
    }
}

/// The window's bookkeeping: which URL is in which slot, when each was fetched, and which page
/// leaves next by event time or by the page budget. It decides from URLs, event times and
/// whether a fetch brings new content, never from verification, so a [`Sequencer`] can run it
/// ahead of the verification, with key shards answering in between.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Window {
    /// Rebuilt from the pages after a restore.
    #[serde(skip)]
    pub(super) by_url: UrlSlots,
    pub(super) stamps: Vec<Stamp>,
    pub(super) free: Vec<u32>,
    pub(super) expiry: BinaryHeap<Reverse<Due>>,
    /// Fetches before this event time are outside the window.
    pub(super) horizon_ms: i64,
    pub(super) stale: u64,
    pub(super) evicted_by_time: u64,
    pub(super) evicted_by_budget: u64,
    /// The URLs the page budget evicted since the last [`Window::take_over_budget`]: the parts
    /// downstream that keep URLs of the window (exact groups, change history, in-links) let
    /// them go too, so the budget bounds them as well.
    #[serde(skip)]
    pub(super) over_budget: Vec<Arc<str>>,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            by_url: UrlSlots::default(),
            stamps: Vec::new(),
            free: Vec::new(),
            expiry: BinaryHeap::new(),
            horizon_ms: i64::MIN,
            stale: 0,
            evicted_by_time: 0,
            evicted_by_budget: 0,
            over_budget: Vec::new(),
        }
    }
}

impl Window {
    /// Rebuilds the URL map (which a checkpoint leaves out) from the URL held in each slot.
    pub(super) fn restore_urls<'a>(
        &mut self,
        slots: usize,
        url_in: impl Fn(u32) -> Option<&'a str>,
    ) {
        let mut by_url = UrlSlots::default();
        let url_of = |s: u32| url_in(s).expect("a held slot");
        for slot in 0..slots as u32 {
            if let Some(url) = url_in(slot) {
                by_url.insert(url, slot, url_of);
            }
        }
        self.by_url = by_url;
    }

    /// `base` with the window's own counters: stale fetches and evictions.
    pub(super) fn counted(&self, base: NearStats) -> NearStats {
        NearStats {
            stale: self.stale,
            evicted_by_time: self.evicted_by_time,
            evicted_by_budget: self.evicted_by_budget,
            ..base
        }
    }

    /// Handles one fetch: a fetch older than the URL's entry, or already outside the window, is
    /// ignored (counted as stale); no content removes the URL's page; the same content only
    /// moves its fetch time; new or changed content is filed (replacing the URL's previous
    /// content), then the oldest pages leave while the window is over `max_pages`.
    pub(super) fn observe(
        &mut self,
        f: &Fetch<'_>,
        max_pages: usize,
        host: &mut impl WindowHost,
        url_of: impl FnOnce(&str) -> Arc<str>,
    ) {
        if f.fetched_at_ms < self.horizon_ms {
            self.stale += 1;
            return;
        }
        let existing = self.by_url.get(f.url, |s| host.url(s));
        if let Some(slot) = existing {
            if f.fetched_at_ms < self.stamps[slot as usize].at_ms {
                self.stale += 1;
                return;
            }
        }
        let Some(sketch) = f.sketch else {
            if let Some(slot) = existing {
                self.remove(slot, f.crawl_id, host);
            }
            return;
        };
        if let Some(slot) = existing {
            if host.holds(slot, sketch) {
                self.stamp(slot, f.fetched_at_ms);
                return;
            }
            self.close(slot, host);
        }
        let url = url_of(f.url);
        let slot = self.free.pop().unwrap_or_else(|| {
            reserve_an_eighth(&mut self.stamps);
            self.stamps.push(Stamp::default());
            (self.stamps.len() - 1) as u32
        });
        self.by_url.insert(&url, slot, |s| host.url(s));
        self.stamp(slot, f.fetched_at_ms);
        host.change(Change::Filed {
            slot,
            replaced: existing,
            url,
            fetch: f,
        });
        while self.by_url.len() > max_pages {
            let Some(Reverse(due)) = self.expiry.pop() else {
                break;
            };
            let slot = due.slot();
            if self.is_current(due) {
                self.evicted_by_budget += 1;
                self.over_budget.push(Arc::from(host.url(slot)));
                self.remove(slot, f.crawl_id, host);
            }
        }
    }

    /// Moves the window to end at `watermark_ms`: the pages fetched before its start leave.
    pub(super) fn advance(
        &mut self,
        watermark_ms: i64,
        window_ms: i64,
        crawl_id: Option<&str>,
        host: &mut impl WindowHost,
    ) {
        let horizon = watermark_ms.saturating_sub(window_ms);
        self.horizon_ms = self.horizon_ms.max(horizon);
        while let Some(&Reverse(due)) = self.expiry.peek() {
            if due.at_ms() >= horizon {
                break;
            }
            self.expiry.pop();
            if self.is_current(due) {
                self.evicted_by_time += 1;
                self.remove(due.slot(), crawl_id, host);
            }
        }
    }

    /// Whether `due` is the expiry entry of the page its slot holds (see [`Stamp`]).
    pub(super) fn is_current(&self, due: Due) -> bool {
        due.is_current_in(&self.stamps)
    }

    /// Records a fetch of the page in `slot` at `at_ms`.
    pub(super) fn stamp(&mut self, slot: u32, at_ms: i64) {
        let at_ms = at_ms.max(Stamp::FREE + 1);
        let stamp = &mut self.stamps[slot as usize];
        if stamp.at_ms == at_ms {
            // The page's fetch time again (a record delivered twice): its entry stands for it.
            return;
        }
        *stamp = Stamp { at_ms };
        if self.expiry.len() == self.expiry.capacity() {
            // Every fetch of a page stays in the heap until its time leaves the window, so a
            // page refetched often would fill it with stale entries (hourly fetches in a week's
            // window, 168 per page). When a quarter of a full heap is stale, those are dropped
            // instead of growing it (each live page has one current entry: `by_url.len()`).
            // Stale entries are skipped when popped, so this changes no outcome.
            let stale = self.expiry.len().saturating_sub(self.by_url.len());
            if stale > 0 && stale * 4 >= self.expiry.len() {
                let stamps = &self.stamps;
                self.expiry
                    .retain(|&Reverse(due)| due.is_current_in(stamps));
            }
            // Entries that name a later page of their slot (see [`Stamp`]) count as stale above
            // and stay: a heap that the compaction did not free by an eighth grows, by an eighth
            // as the per-slot vectors ([`reserve_an_eighth`]), else every push would scan it.
            if self.expiry.len() * 8 >= self.expiry.capacity() * 7 {
                self.expiry
                    .reserve_exact((self.expiry.capacity() / 8).max(64));
            }
        }
        self.expiry.push(Reverse(Due::new(at_ms, slot)));
    }

    /// Frees `slot` (the host still holds its page).
    pub(super) fn close(&mut self, slot: u32, host: &impl WindowHost) {
        self.by_url.remove(host.url(slot), |s| host.url(s));
        self.stamps[slot as usize] = Stamp::default();
        self.free.push(slot);
    }

    pub(super) fn remove(&mut self, slot: u32, crawl_id: Option<&str>, host: &mut impl WindowHost) {
        self.close(slot, host);
        host.change(Change::Removed { slot, crawl_id });
    }

    pub(super) fn take_over_budget(&mut self) -> Vec<Arc<str>> {
        std::mem::take(&mut self.over_budget)
    }

    pub(super) fn bytes(&self) -> usize {
        self.stamps.capacity() * std::mem::size_of::<Stamp>()
            + self.free.capacity() * 4
            + self.expiry.capacity() * std::mem::size_of::<Reverse<Due>>()
    }
}

#[cfg(test)]
mod url_slots_props {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// The URL a slot of `held` holds.
    fn url_of<'a>(held: &'a [Option<String>]) -> impl Fn(u32) -> &'a str {
        |s| held[s as usize].as_deref().expect("held")
    }

    proptest! {
        /// The table of bare slot numbers finds the slot of every URL held, and none of a URL
        /// let go, as a map keyed by URL does, through growth and removals, with slots reused
        /// the way the window reuses them; rebuilt from the slots, it answers the same.
        #[test]
        fn url_slots_agree_with_a_map(ops in prop::collection::vec((0u16..300, any::<bool>()), 0..600)) {
            let mut slots = UrlSlots::default();
            let mut held: Vec<Option<String>> = Vec::new();
            let mut free: Vec<u32> = Vec::new();
            let mut model: HashMap<String, u32> = HashMap::new();
            for (n, add) in ops {
                let url = format!("http://h{}.example/p{n}", n % 7);
                if add && !model.contains_key(&url) {
                    let slot = free.pop().unwrap_or_else(|| {
                        held.push(None);
                        (held.len() - 1) as u32
                    });
                    slots.insert(&url, slot, url_of(&held));
                    held[slot as usize] = Some(url.clone());
                    model.insert(url.clone(), slot);
                } else if !add {
                    let got = slots.remove(&url, url_of(&held));
                    prop_assert_eq!(got, model.remove(&url));
                    if let Some(s) = got {
                        held[s as usize] = None;
                        free.push(s);
                    }
                }
                prop_assert_eq!(slots.len(), model.len());
                let found = slots.get(&url, url_of(&held));
                prop_assert_eq!(found, model.get(&url).copied());
                if let Some(s) = found {
                    prop_assert_eq!(url_of(&held)(s), url.as_str());
                }
            }
            let mut window = Window::default();
            window.restore_urls(held.len(), |s| held[s as usize].as_deref());
            for (url, &slot) in &model {
                prop_assert_eq!(window.by_url.get(url, url_of(&held)), Some(slot));
            }
            prop_assert_eq!(window.by_url.len(), model.len());
        }
    }
}

#[cfg(test)]
mod due_props {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_stamp_takes_8_bytes_and_an_expiry_entry_12() {
        assert_eq!(std::mem::size_of::<Stamp>(), 8);
        assert_eq!(std::mem::size_of::<Reverse<Due>>(), 12);
        assert!(!Stamp::default().live());
    }

    /// A fetch at the time that marks a free slot is stamped a millisecond later, so its page
    /// is live and its expiry entry current.
    #[test]
    fn a_fetch_at_the_free_stamps_time_stays_live() {
        let mut w = Window::default();
        w.stamps.push(Stamp::default());
        w.stamp(0, i64::MIN);
        assert!(w.stamps[0].live());
        let due = w.expiry.peek().expect("an entry").0;
        assert!(w.is_current(due));
    }

    /// A fetch repeated at its own time (at-least-once delivery repeats records) adds no
    /// expiry entry: the page's entry stands for it.
    #[test]
    fn a_repeated_fetch_adds_no_entry() {
        let mut w = Window::default();
        w.stamps.push(Stamp::default());
        for _ in 0..1000 {
            w.stamp(0, 5_000);
        }
        assert_eq!(w.expiry.len(), 1);
        w.stamp(0, 6_000);
        assert_eq!(w.expiry.len(), 2);
        assert!(w.is_current(Due::new(6_000, 0)) && !w.is_current(Due::new(5_000, 0)));
    }

    proptest! {
        /// Entries order as their (time, slot) would, over the whole range of times, and give
        /// back the time they were made with.
        #[test]
        fn entries_order_by_time_then_slot(
            a in (prop_oneof![any::<i64>(), -5i64..5, (i64::MAX - 3)..=i64::MAX], any::<u32>()),
            b in (prop_oneof![any::<i64>(), -5i64..5, (i64::MAX - 3)..=i64::MAX], any::<u32>()),
        ) {
            let (da, db) = (Due::new(a.0, a.1), Due::new(b.0, b.1));
            prop_assert_eq!(da.cmp(&db), a.cmp(&b));
            prop_assert_eq!((da.at_ms(), da.slot()), a);
            prop_assert_eq!((db.at_ms(), db.slot()), b);
        }
    }
}
