//! In-link counts over the window's link graph, for the `inlinks` canonical criterion (a
//! cluster's canonical member is the one more pages link to: the copy the web treats as the
//! original, after Nutch's `DeduplicationJob`, which prefers the higher score).
//!
//! A URL's in-links are the distinct pages in the window whose latest fetch links to it (self
//! links do not count). A re-fetch replaces the page's out-links, a fetch without content
//! removes them, and so does the page's last fetch leaving the event-time window (a 304 Not
//! Modified renews that fetch). Kept only when the criterion is configured: it stores every
//! windowed page's distinct out-links.

use crate::window::{Expiry, Ticket};
use std::collections::HashMap;
use std::sync::Arc;

/// A page's distinct out-links, with its place in the expiry order.
type OutLinks = (Box<[Arc<str>]>, Ticket);

/// In-link counts and the out-links they come from.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct InLinks {
    window_ms: i64,
    /// Target URL -> distinct windowed pages linking to it (absent when 0).
    count: HashMap<Arc<str>, u32, crate::hash::StrBuild>,
    /// Page URL -> its distinct out-links (sharing the keys of `count`) and its expiry ticket.
    out: HashMap<Arc<str>, OutLinks, crate::hash::StrBuild>,
    expiry: Expiry<Arc<str>>,
    /// Targets whose count changed since the last `take_changed`.
    changed: Vec<Arc<str>>,
}

impl InLinks {
    /// Empty, with pages leaving after `window_ms` of event time.
    pub fn new(window_ms: i64) -> Self {
        InLinks {
            window_ms,
            ..Self::default()
        }
    }

    /// The in-link count of `url`.
    pub fn of(&self, url: &str) -> u32 {
        self.count.get(url).copied().unwrap_or(0)
    }

    /// A fetch of `page` at `at_ms`: its out-links now (`None`: no content, it has none).
    pub fn fetched<'a>(
        &mut self,
        page: &str,
        at_ms: i64,
        links: Option<impl Iterator<Item = &'a str>>,
    ) {
        self.forget(page);
        let Some(links) = links else {
            return;
        };
        let mut targets: Vec<Arc<str>> = Vec::new();
        for l in links {
            if l == page {
                continue;
            }
            let key = match self.count.get_key_value(l) {
                Some((k, _)) => k.clone(),
                None => Arc::from(l),
            };
            targets.push(key);
        }
        targets.sort_unstable();
        targets.dedup();
        for t in &targets {
            *self.count.entry(t.clone()).or_default() += 1;
            self.changed.push(t.clone());
        }
        let page: Arc<str> = Arc::from(page);
        let ticket = self.expiry.insert(at_ms, page.clone());
        self.out.insert(page, (targets.into_boxed_slice(), ticket));
    }

    /// A fetch of `page` at `at_ms` that found its content unchanged (304 Not Modified): its
    /// out-links stay a window from then.
    pub fn renew(&mut self, page: &str, at_ms: i64) {
        if let Some((_, ticket)) = self.out.get_mut(page) {
            self.expiry.renew(ticket, at_ms);
        }
    }

    /// Takes out the pages whose last fetch is older than the window before `watermark_ms`.
    pub fn advance(&mut self, watermark_ms: i64) {
        while let Some(page) = self.expiry.pop_before(watermark_ms - self.window_ms) {
            if let Some((targets, _)) = self.out.remove(&page) {
                self.unlink(&targets);
            }
        }
    }

    /// The targets whose counts changed since the last call (repeats possible, in order).
    pub fn take_changed(&mut self) -> Vec<Arc<str>> {
        std::mem::take(&mut self.changed)
    }

    /// Takes `page`'s out-links out of the counts: before its next fetch counts them again, and
    /// when the sketch window's page budget evicted the page (as its fetch leaving the window
    /// by event time would).
    pub fn forget(&mut self, page: &str) {
        if let Some((targets, ticket)) = self.out.remove(page) {
            self.expiry.remove(ticket);
            self.unlink(&targets);
        }
    }

    fn unlink(&mut self, targets: &[Arc<str>]) {
        for t in targets {
            if let Some(n) = self.count.get_mut(t) {
                *n -= 1;
                if *n == 0 {
                    self.count.remove(t);
                }
            }
            self.changed.push(t.clone());
        }
    }

    /// Pages whose out-links are held.
    pub fn pages(&self) -> usize {
        self.out.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_refetches_gone_pages_and_the_window() {
        let mut l = InLinks::new(1000);
        l.fetched(
            "http://a/",
            0,
            Some(["http://t/", "http://t/", "http://a/"].into_iter()),
        );
        l.fetched(
            "http://b/",
            10,
            Some(["http://t/", "http://u/"].into_iter()),
        );
        // Duplicate links and self links do not count.
        assert_eq!(
            (l.of("http://t/"), l.of("http://u/"), l.of("http://a/")),
            (2, 1, 0)
        );
        // A re-fetch replaces the page's links.
        l.fetched("http://b/", 20, Some(["http://u/"].into_iter()));
        assert_eq!((l.of("http://t/"), l.of("http://u/")), (1, 1));
        // No content: no links.
        l.fetched("http://b/", 30, None::<std::iter::Empty<&str>>);
        assert_eq!(l.of("http://u/"), 0);
        // a's fetch at 0 leaves the window at watermark 1001.
        l.advance(1000);
        assert_eq!(l.of("http://t/"), 1);
        l.advance(1001);
        assert_eq!(l.of("http://t/"), 0);
        assert_eq!(l.pages(), 0);
        assert!(l.take_changed().iter().any(|t| &**t == "http://t/"));
        assert!(l.take_changed().is_empty());
    }
}
