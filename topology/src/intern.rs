//! One copy of each URL for the whole state.
//!
//! Each part of the state kept its own copy of a page's URL (about 96 bytes on the benchmark
//! crawls): the sketch index's record, the exact groups, the change history, each cluster
//! level, the collections. The running state now takes a new URL's string from one
//! [`UrlPool`], and pair changes carry the index's own copy to the clusters (medium crawl:
//! 2,064 -> 1,861 bytes per windowed page).
//!
//! A restore needed it more. A checkpoint writes a URL once for every place that holds it, and
//! reading it back made a string of each: up to a dozen per URL (the maps, groups and expiry
//! queues of each part, the crawl hints). With the room that reading arrays leaves beyond their
//! lengths, the restored state took 20-28 % more memory than the state it was written from
//! (2,478 against 2,064 bytes per windowed page on the medium crawl, 3,470 against 2,705 on the
//! large one with collections), and that is what sizing must plan for: a process restarts from
//! its checkpoint with all of its state at once. After a restore each part hands its URLs to the
//! pool, which gives back the one copy it holds of each (1,629 bytes per page on the medium
//! crawl).
//!
//! A string's contents decide where it goes in every map, so exchanging it for an equal one
//! changes nothing but the allocation.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

/// The URLs met so far, one copy each.
#[derive(Debug, Default)]
pub(crate) struct UrlPool {
    urls: HashSet<Arc<str>, crate::hash::StrBuild>,
    /// URLs held after the last sweep ([`Self::url`]).
    swept: usize,
}

impl UrlPool {
    /// The pool's copy of `url`, made if it has none. The running state takes each new URL's
    /// string from here, so that its parts share one. The URLs that no part holds any more
    /// leave when the pool has grown by a quarter (and 1,024) since it last looked: at most a
    /// fifth of it is URLs no part holds, and each sweep is paid for by the quarter of
    /// insertions before it.
    pub(crate) fn url(&mut self, url: &str) -> Arc<str> {
        if let Some(held) = self.urls.get(url) {
            return Arc::clone(held);
        }
        if self.urls.len() >= self.swept + self.swept / 4 + 1024 {
            self.urls.retain(|u| Arc::strong_count(u) > 1);
            self.swept = self.urls.len();
        }
        let shared: Arc<str> = Arc::from(url);
        self.urls.insert(Arc::clone(&shared));
        shared
    }

    /// URLs in the pool (some may be held by no part until the next sweep).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.urls.len()
    }

    /// Makes `url` the pool's copy of its string (the pool keeps `url` if it has none yet).
    pub(crate) fn share(&mut self, url: &mut Arc<str>) {
        match self.urls.get(&**url) {
            Some(held) => {
                if !Arc::ptr_eq(held, url) {
                    *url = Arc::clone(held);
                }
            }
            None => {
                self.urls.insert(Arc::clone(url));
            }
        }
    }

    /// Shares the keys of `map`, which is built again (a map's keys cannot be changed in
    /// place) with room for its entries only.
    pub(crate) fn share_keys<V, S: BuildHasher + Clone>(
        &mut self,
        map: &mut HashMap<Arc<str>, V, S>,
    ) {
        let mut shared = HashMap::with_capacity_and_hasher(map.len(), map.hasher().clone());
        for (mut url, v) in map.drain() {
            self.share(&mut url);
            shared.insert(url, v);
        }
        *map = shared;
    }

    /// Shares the keys of `map`, as [`Self::share_keys`].
    pub(crate) fn share_ordered_keys<V>(&mut self, map: &mut BTreeMap<Arc<str>, V>) {
        *map = std::mem::take(map)
            .into_iter()
            .map(|(mut url, v)| {
                self.share(&mut url);
                (url, v)
            })
            .collect();
    }

    /// Shares the members of `set`, as [`Self::share_keys`].
    pub(crate) fn share_ordered_set(&mut self, set: &mut BTreeSet<Arc<str>>) {
        *set = std::mem::take(set)
            .into_iter()
            .map(|mut url| {
                self.share(&mut url);
                url
            })
            .collect();
    }

    /// Shares the members of `set`, as [`Self::share_keys`].
    pub(crate) fn share_set<S: BuildHasher + Clone>(&mut self, set: &mut HashSet<Arc<str>, S>) {
        let mut shared = HashSet::with_capacity_and_hasher(set.len(), set.hasher().clone());
        for mut url in set.drain() {
            self.share(&mut url);
            shared.insert(url);
        }
        *set = shared;
    }

    /// Shares the values of `map`.
    pub(crate) fn share_values<K: Hash + Eq, S: BuildHasher>(
        &mut self,
        map: &mut HashMap<K, Arc<str>, S>,
    ) {
        for url in map.values_mut() {
            self.share(url);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_pool_gives_one_copy_and_forgets_urls_no_one_holds() {
        let mut pool = UrlPool::default();
        let a = pool.url("http://a.example/");
        assert!(Arc::ptr_eq(&a, &pool.url("http://a.example/")));
        // A thousand URLs that nothing keeps, then one more: the sweep leaves only `a`.
        for n in 0..1023 {
            drop(pool.url(&format!("http://h/{n}")));
        }
        assert_eq!(pool.len(), 1024);
        let b = pool.url("http://b.example/");
        assert_eq!(pool.len(), 2, "a, kept by its holder, and b");
        // Held URLs stay through the sweeps: the next comes after a quarter more.
        let held: Vec<Arc<str>> = (0..2000)
            .map(|n| pool.url(&format!("http://k/{n}")))
            .collect();
        assert_eq!(pool.len(), 2002);
        assert!(Arc::ptr_eq(&held[0], &pool.url("http://k/0")));
        assert!(Arc::ptr_eq(&a, &pool.url("http://a.example/")));
        assert!(Arc::ptr_eq(&b, &pool.url("http://b.example/")));
    }

    #[test]
    fn equal_urls_end_as_one_allocation_and_maps_keep_their_entries() {
        let mut pool = UrlPool::default();
        let mut a: Arc<str> = Arc::from("http://a.example/x");
        let mut b: Arc<str> = Arc::from("http://a.example/x");
        let mut c: Arc<str> = Arc::from("http://b.example/x");
        assert!(!Arc::ptr_eq(&a, &b));
        pool.share(&mut a);
        pool.share(&mut b);
        pool.share(&mut c);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(&*c, "http://b.example/x");

        let mut map: HashMap<Arc<str>, u32, crate::hash::StrBuild> = HashMap::default();
        for n in 0..100 {
            map.insert(Arc::from(format!("http://h/{n}")), n);
        }
        map.insert(Arc::from("http://a.example/x"), 1000);
        let before: BTreeMap<String, u32> = map.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        pool.share_keys(&mut map);
        let after: BTreeMap<String, u32> = map.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(before, after);
        let (key, _) = map.get_key_value("http://a.example/x").expect("kept");
        assert!(Arc::ptr_eq(key, &a));

        let mut ordered: BTreeMap<Arc<str>, u8> =
            BTreeMap::from([(Arc::from("http://a.example/x"), 7)]);
        pool.share_ordered_keys(&mut ordered);
        assert!(Arc::ptr_eq(ordered.keys().next().expect("one"), &a));
    }
}
