//! The sketch index's key tables: `u32 key -> pages`, in flat arrays.
//!
//! The key tables hold about 22 keys per windowed page, so what one key costs is most of the
//! index's memory, and one lookup per key most of its time. Of those keys some are held by one
//! page only, the others by several (the bands of a site's template, the bands of copies).
//!
//! - [`FlatMap`] maps each key to its page, or to a block or list of pages: `(key, value)`
//!   pairs of 8 bytes in one array, ordered by key (linear probing with ordered runs, the Robin
//!   Hood layout). The keys are mixed hashes, so a key's home is a multiply-shift of it over
//!   any number of home positions: homes rise with keys, the array needs no power-of-two size
//!   and grows by an eighth, running between 80 % and 90 % full (75 % to 85 % until the
//!   forty-fifth session: 17-19 B more per page at a million pages, for about 5 % of the
//!   index's speed; at 92 %, runs grew long enough to cost a fifth of it). A lookup reads one
//!   run from the key's home, stopping at the key, a greater one or a hole (one cache miss,
//!   mostly); an insertion shifts the rest of its run up by one; a removal shifts back the
//!   entries after it that are not at home; growing places every entry again in one ordered
//!   pass. A general-purpose hash map (hashbrown) keeps a control byte per bucket in a second
//!   array (two misses per lookup) and doubles its buckets, running between 44 % and 88 % full.
//! - [`Blocks`] keep the pages of keys held by two or by three, in blocks of exactly that many
//!   numbered by the map's value, with no head: most keys held by several are held by two or
//!   three.
//! - [`Lists`] keeps the pages of keys held by four or more in blocks of one array, sized in
//!   steps of about √2, with a head of 8 bytes per list (a `Vec` per list takes 24, a heap
//!   allocation of its own, and doubles). The array is packed when the blocks that lists have
//!   outgrown add up to a quarter of it.
//!
//! The flat map and the lists took the key tables from 308 to 231 bytes per windowed page on
//! `index_bench`'s million pages (the flat map 14 million keys, the lists another 14 million
//! pages in 2.6 million lists), at about the same speed (README, "Flat key tables").
//!
//! A key's pages are kept in filing order, and removals keep that order: the index's answers
//! depend on it.
//!
//! The index keeps each page's pair partners in a multimap too, keyed by slot number (mixed).

/// The value of a hole.
const HOLE: u32 = u32::MAX;

/// Positions past the last home, where the last run may spill over (more are added when it
/// needs them).
const TAIL: usize = 256;

/// The smallest number of homes.
const MIN_HOMES: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Entry {
    key: u32,
    value: u32,
}

const EMPTY: Entry = Entry {
    key: 0,
    value: HOLE,
};

/// `u32 -> u32`, values below `u32::MAX`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct FlatMap {
    /// `homes + TAIL` positions or more (none while empty). Every entry is at or after its home,
    /// with no hole between, and the entries are in key order.
    entries: Vec<Entry>,
    homes: usize,
    len: usize,
}

/// Empty, with nothing allocated: the first insertion grows it to [`MIN_HOMES`] homes.
impl Default for FlatMap {
    fn default() -> Self {
        FlatMap {
            entries: Vec::new(),
            homes: 0,
            len: 0,
        }
    }
}

impl FlatMap {
    fn with_homes(homes: usize) -> Self {
        FlatMap {
            entries: vec![EMPTY; homes + TAIL],
            homes,
            len: 0,
        }
    }

    fn home(&self, key: u32) -> usize {
        ((u64::from(key) * self.homes as u64) >> 32) as usize
    }

    /// Where `key` is, or where it would go: the first position from its home holding `key`, a
    /// greater key or a hole (the end of the array when the last run fills the tail).
    fn seek(&self, key: u32) -> usize {
        let mut i = self.home(key);
        while let Some(e) = self.entries.get(i) {
            if e.value == HOLE || e.key >= key {
                break;
            }
            i += 1;
        }
        i
    }

    fn find(&self, key: u32) -> Option<usize> {
        let i = self.seek(key);
        let e = self.entries.get(i)?;
        (e.value != HOLE && e.key == key).then_some(i)
    }

    /// The number of keys.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, key: u32) -> Option<&u32> {
        self.find(key).map(|i| &self.entries[i].value)
    }

    fn get_mut(&mut self, key: u32) -> Option<&mut u32> {
        self.find(key).map(|i| &mut self.entries[i].value)
    }

    /// Sets `key`'s value (`value` below `u32::MAX`).
    fn insert(&mut self, key: u32, value: u32) {
        assert!(value != HOLE, "FlatMap values are below u32::MAX");
        if (self.len + 1) * 10 > self.homes * 9 {
            self.grow();
        }
        loop {
            let at = self.seek(key);
            if let Some(e) = self
                .entries
                .get_mut(at)
                .filter(|e| e.value != HOLE && e.key == key)
            {
                e.value = value;
                return;
            }
            // The run from `at` moves up by one into its first hole.
            let Some(hole) = self.entries[at..].iter().position(|e| e.value == HOLE) else {
                self.extend_tail();
                continue;
            };
            self.entries.copy_within(at..at + hole, at + 1);
            self.entries[at] = Entry { key, value };
            self.len += 1;
            return;
        }
    }

    /// Removes `key` and returns its value.
    fn remove(&mut self, key: u32) -> Option<u32> {
        let at = self.find(key)?;
        let value = self.entries[at].value;
        self.remove_at(at);
        Some(value)
    }

    /// Removes the entry at `at` (which [`Self::find`] gave).
    fn remove_at(&mut self, at: usize) {
        // The entries after it that are not at their home move back by one.
        let mut end = at + 1;
        while end < self.entries.len() {
            let e = self.entries[end];
            if e.value == HOLE || self.home(e.key) == end {
                break;
            }
            end += 1;
        }
        self.entries.copy_within(at + 1..end, at);
        self.entries[end - 1] = EMPTY;
        self.len -= 1;
    }

    /// [`TAIL`] more positions past the end, for a last run that fills the tail.
    fn extend_tail(&mut self) {
        self.entries.reserve_exact(TAIL);
        self.entries.resize(self.entries.len() + TAIL, EMPTY);
    }

    /// An eighth more homes, the entries placed in one pass in key order.
    fn grow(&mut self) {
        let mut grown = FlatMap::with_homes((self.homes + self.homes / 8).max(MIN_HOMES));
        let mut next = 0;
        for e in self.entries.iter().filter(|e| e.value != HOLE) {
            let at = grown.home(e.key).max(next);
            if at == grown.entries.len() {
                grown.extend_tail();
            }
            grown.entries[at] = *e;
            next = at + 1;
        }
        grown.len = self.len;
        *self = grown;
    }

    /// Bytes held.
    fn bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Entry>()
    }
}

/// Pages of keys held by four or more, each list in a block of one array. Blocks come in sizes
/// 2, 3, 4, 6, 8, 12, 16, … (each class about √2 times the one before; a list starts in the
/// class of 4 and leaves for a [`Blocks`] of three when it falls to three); a list moves to the
/// next class when it fills its block, and back one class when it falls to the size of the
/// class below that. Freed blocks are reused by class; when they add up to a quarter of the
/// array, the live blocks are packed into a new one (lists that grew long leave their
/// outgrown blocks behind, which no other list may need).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Lists {
    pages: Vec<u32>,
    /// Per list: where its block starts, and its length with the block's class in the top
    /// [`CLASS_BITS`] bits; a freed list's head is `(0, 0)`.
    heads: Vec<(u32, u32)>,
    free_heads: Vec<u32>,
    /// Free blocks by class.
    free_blocks: Vec<Vec<u32>>,
    /// Pages in free blocks.
    free_len: usize,
}

const CLASS_BITS: u32 = 6;

/// Free pages below which the lists are never packed (small in tests, so that they pack).
const PACK_MIN: usize = if cfg!(test) { 8 } else { 1024 };
const LEN_MASK: u32 = (1 << (32 - CLASS_BITS)) - 1;

/// The pages a block of `class` holds.
fn block_size(class: u32) -> usize {
    (2 + (class as usize & 1)) << (class >> 1)
}

impl Lists {
    fn head(&self, list: u32) -> (usize, usize, u32) {
        let (at, word) = self.heads[list as usize];
        (
            at as usize,
            (word & LEN_MASK) as usize,
            word >> (32 - CLASS_BITS),
        )
    }

    fn set_head(&mut self, list: u32, at: usize, len: usize, class: u32) {
        assert!(len <= LEN_MASK as usize, "a key held by 2^26 pages");
        self.heads[list as usize] = (at as u32, len as u32 | class << (32 - CLASS_BITS));
    }

    fn get(&self, list: u32) -> &[u32] {
        let (at, len, _) = self.head(list);
        &self.pages[at..at + len]
    }

    /// A block of `class`.
    fn alloc(&mut self, class: u32) -> usize {
        if let Some(at) = self.free_blocks.get_mut(class as usize).and_then(Vec::pop) {
            self.free_len -= block_size(class);
            return at as usize;
        }
        let at = self.pages.len();
        let size = block_size(class);
        // Grown by an eighth, not doubled: this array holds most of the pages of shared keys.
        if at + size > self.pages.capacity() {
            self.pages
                .reserve_exact(size.max(self.pages.capacity() / 8));
        }
        assert!(
            at + size <= u32::MAX as usize,
            "key table lists over 2^32 pages"
        );
        self.pages.resize(at + size, 0);
        at
    }

    fn release(&mut self, at: usize, class: u32) {
        if self.free_blocks.len() <= class as usize {
            self.free_blocks.resize_with(class as usize + 1, Vec::new);
        }
        self.free_blocks[class as usize].push(at as u32);
        self.free_len += block_size(class);
    }

    /// Packs the live blocks into a new array when the free ones add up to a quarter of it.
    fn pack_if_sparse(&mut self) {
        if self.free_len < PACK_MIN || self.free_len * 4 < self.pages.len() {
            return;
        }
        let live = self.pages.len() - self.free_len;
        let mut pages = Vec::with_capacity(live + live / 8);
        for (at, word) in self.heads.iter_mut() {
            if *word == 0 {
                continue;
            }
            let size = block_size(*word >> (32 - CLASS_BITS));
            let from = *at as usize;
            *at = pages.len() as u32;
            pages.extend_from_slice(&self.pages[from..from + size]);
        }
        self.pages = pages;
        self.free_blocks.clear();
        self.free_len = 0;
    }

    /// A new list of four pages, in a block of the class that holds four.
    fn four(&mut self, pages: [u32; 4]) -> u32 {
        const CLASS: u32 = 2;
        debug_assert_eq!(block_size(CLASS), 4);
        let at = self.alloc(CLASS);
        self.pages[at..at + 4].copy_from_slice(&pages);
        let list = self.free_heads.pop().unwrap_or_else(|| {
            self.heads.push((0, 0));
            let list = self.heads.len() - 1;
            assert!(list < ID_LIMIT as usize, "key table lists over 2^29");
            list as u32
        });
        self.set_head(list, at, 4, CLASS);
        list
    }

    /// Moves `list` to a block of class `to`.
    fn reblock(&mut self, list: u32, to: u32) {
        let (at, len, class) = self.head(list);
        let new = self.alloc(to);
        self.pages.copy_within(at..at + len, new);
        self.release(at, class);
        self.set_head(list, new, len, to);
    }

    fn push(&mut self, list: u32, page: u32) {
        let (_, len, class) = self.head(list);
        if len == block_size(class) {
            self.reblock(list, class + 1);
        }
        let (at, _, class) = self.head(list);
        self.pages[at + len] = page;
        self.set_head(list, at, len + 1, class);
        self.pack_if_sparse();
    }

    /// Frees `list` with its block (not packing: its callers pack when they are done).
    fn free(&mut self, list: u32) {
        let (at, _, class) = self.head(list);
        self.release(at, class);
        self.heads[list as usize] = (0, 0);
        self.free_heads.push(list);
    }

    /// Removes `page` from `list`; when three pages are left, frees the list and returns them
    /// (a key of three pages is kept in a [`Blocks`] of three).
    fn remove(&mut self, list: u32, page: u32) -> Option<[u32; 3]> {
        let (at, len, class) = self.head(list);
        let p = self.pages[at..at + len].iter().position(|&s| s == page)?;
        self.pages.copy_within(at + p + 1..at + len, at + p);
        let len = len - 1;
        let last = if len == 3 {
            self.free(list);
            Some(self.pages[at..at + 3].try_into().expect("three pages"))
        } else {
            self.set_head(list, at, len, class);
            if class >= 2 && len <= block_size(class - 2) {
                self.reblock(list, class - 1);
            }
            None
        };
        self.pack_if_sparse();
        last
    }

    fn bytes(&self) -> usize {
        self.pages.capacity() * 4
            + self.heads.capacity() * 8
            + self.free_heads.capacity() * 4
            + self
                .free_blocks
                .iter()
                .map(|b| 24 + b.capacity() * 4)
                .sum::<usize>()
    }
}

/// Blocks of exactly `N` pages, for the keys held by two or by three: the map's value numbers
/// the block and its tag says how many pages it holds, so such a key needs no list head (a key
/// of two pages costs 8 bytes here, against 16 as a list: an 8-byte head and a block of two).
/// Most keys held by several are held by two or three (on the benchmark's medium crawl, 45,000
/// keys by two, 15,000 by three, 7,000 by more). A freed block keeps the number of the next
/// free one in its first page.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Blocks<const N: usize> {
    /// Block `i` is `pages[i * N..(i + 1) * N]`.
    pages: Vec<u32>,
    /// The first free block ([`HOLE`]: none).
    free: u32,
}

impl<const N: usize> Default for Blocks<N> {
    fn default() -> Self {
        Blocks {
            pages: Vec::new(),
            free: HOLE,
        }
    }
}

impl<const N: usize> Blocks<N> {
    fn get(&self, block: u32) -> &[u32] {
        let at = block as usize * N;
        &self.pages[at..at + N]
    }

    /// A block holding `pages`: a freed one, or a new one at the end.
    fn add(&mut self, pages: [u32; N]) -> u32 {
        let block = if self.free != HOLE {
            let block = self.free;
            self.free = self.pages[block as usize * N];
            block
        } else {
            let at = self.pages.len();
            // Grown by an eighth, not doubled, as the lists' array.
            if at + N > self.pages.capacity() {
                self.pages.reserve_exact(N.max(self.pages.capacity() / 8));
            }
            self.pages.resize(at + N, 0);
            assert!(at / N < ID_LIMIT as usize, "key table blocks over 2^29");
            (at / N) as u32
        };
        let at = block as usize * N;
        self.pages[at..at + N].copy_from_slice(&pages);
        block
    }

    /// Frees `block` and returns its pages.
    fn take(&mut self, block: u32) -> [u32; N] {
        let at = block as usize * N;
        let pages = self.pages[at..at + N].try_into().expect("N pages");
        self.pages[at] = self.free;
        self.free = block;
        pages
    }

    fn bytes(&self) -> usize {
        self.pages.capacity() * 4
    }
}

/// A map value's top three bits: a page (top bit clear: pages are below 2^31), or the number
/// (below [`ID_LIMIT`]) of a list, of a block of two or of a block of three.
const TAG: u32 = 0b111 << 29;
const LIST: u32 = 0b100 << 29;
const TWO: u32 = 0b110 << 29;
const THREE: u32 = 0b111 << 29;
const ID_LIMIT: u32 = 1 << 29;

/// What a map value holds.
enum Held {
    Page(u32),
    Two(u32),
    Three(u32),
    List(u32),
}

fn held(v: u32) -> Held {
    let id = v & !TAG;
    match v & TAG {
        LIST => Held::List(id),
        TWO => Held::Two(id),
        THREE => Held::Three(id),
        _ => Held::Page(v),
    }
}

/// `u32 key -> pages` in filing order: a key held by one page costs one 8-byte entry of the
/// map; by two or three, that entry and a block of two or three pages; by more, that entry, a
/// list head of 8 bytes and 4 bytes per page (in a block with room to grow).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct MultiMap {
    map: FlatMap,
    twos: Blocks<2>,
    threes: Blocks<3>,
    lists: Lists,
}

impl MultiMap {
    /// Files `page` (below 2^31) under `key`, after the pages it holds.
    pub(crate) fn insert(&mut self, key: u32, page: u32) {
        assert!(page < LIST, "page numbers are below 2^31");
        let Some(v) = self.map.get_mut(key) else {
            self.map.insert(key, page);
            return;
        };
        *v = match held(*v) {
            Held::Page(first) => TWO | self.twos.add([first, page]),
            Held::Two(b) => {
                let [p, q] = self.twos.take(b);
                THREE | self.threes.add([p, q, page])
            }
            Held::Three(b) => {
                let [p, q, r] = self.threes.take(b);
                LIST | self.lists.four([p, q, r, page])
            }
            Held::List(list) => {
                self.lists.push(list, page);
                *v
            }
        };
    }

    /// Removes `page` from `key`'s pages.
    pub(crate) fn remove(&mut self, key: u32, page: u32) {
        let Some(at) = self.map.find(key) else {
            return;
        };
        let v = &mut self.map.entries[at].value;
        match held(*v) {
            Held::Page(p) => {
                if p == page {
                    self.map.remove_at(at);
                }
            }
            Held::Two(b) => {
                if let Some(i) = self.twos.get(b).iter().position(|&p| p == page) {
                    *v = self.twos.take(b)[1 - i];
                }
            }
            Held::Three(b) => {
                if let Some(i) = self.threes.get(b).iter().position(|&p| p == page) {
                    let [p, q, r] = self.threes.take(b);
                    let rest = match i {
                        0 => [q, r],
                        1 => [p, r],
                        _ => [p, q],
                    };
                    *v = TWO | self.twos.add(rest);
                }
            }
            Held::List(list) => {
                if let Some(rest) = self.lists.remove(list, page) {
                    *v = THREE | self.threes.add(rest);
                }
            }
        }
    }

    /// Removes `key` and returns its pages, oldest first.
    pub(crate) fn take(&mut self, key: u32) -> Vec<u32> {
        let Some(v) = self.map.remove(key) else {
            return Vec::new();
        };
        match held(v) {
            Held::Page(p) => vec![p],
            Held::Two(b) => self.twos.take(b).to_vec(),
            Held::Three(b) => self.threes.take(b).to_vec(),
            Held::List(list) => {
                let pages = self.lists.get(list).to_vec();
                self.lists.free(list);
                self.lists.pack_if_sparse();
                pages
            }
        }
    }

    /// The pages of `key`, oldest first.
    pub(crate) fn get(&self, key: u32) -> &[u32] {
        let Some(v) = self.map.get(key) else {
            return &[];
        };
        match held(*v) {
            Held::Page(_) => std::slice::from_ref(v),
            Held::Two(b) => self.twos.get(b),
            Held::Three(b) => self.threes.get(b),
            Held::List(list) => self.lists.get(list),
        }
    }

    /// The pages of each of `keys` (at most `N`). The index is bound by memory latency, and a
    /// lookup that misses the cache stalls the next one behind its branches, so the home
    /// entries of all the keys are read first, then the first page of every list found, each
    /// round's loads independent of each other (as `NearIndex::touch_records`): the CPU
    /// overlaps their misses.
    pub(crate) fn get_all<const N: usize>(&self, keys: &[u32]) -> [&[u32]; N] {
        let mut acc = 0u32;
        for &k in keys {
            acc ^= self.map.entries.get(self.map.home(k)).map_or(0, |e| e.key);
        }
        let mut buckets = [&[][..]; N];
        for (b, &k) in buckets.iter_mut().zip(keys) {
            *b = self.get(k);
        }
        for b in &buckets {
            acc ^= b.first().copied().unwrap_or(0);
        }
        std::hint::black_box(acc);
        buckets
    }

    /// Gives back the room its arrays have beyond their lengths: after a restore, where
    /// reading an array grows it by doubling (the entries up to twice their number).
    pub(crate) fn shrink_to_fit(&mut self) {
        self.map.entries.shrink_to_fit();
        self.twos.pages.shrink_to_fit();
        self.threes.pages.shrink_to_fit();
        let l = &mut self.lists;
        l.pages.shrink_to_fit();
        l.heads.shrink_to_fit();
        l.free_heads.shrink_to_fit();
    }

    /// Bytes held by the map's entries, and by the blocks and lists of keys held by several.
    pub(crate) fn bytes(&self) -> (usize, usize) {
        (
            self.map.bytes(),
            self.twos.bytes() + self.threes.bytes() + self.lists.bytes(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// The layout's invariant: entries in key order, each at or after its home with no hole
    /// between, and `len` counting them.
    fn check(m: &FlatMap) {
        let mut last: Option<u32> = None;
        let mut n = 0;
        for (i, e) in m.entries.iter().enumerate() {
            if e.value == HOLE {
                continue;
            }
            n += 1;
            let home = m.home(e.key);
            assert!(home <= i, "entry {e:?} at {i} before its home {home}");
            assert!(
                m.entries[home..i].iter().all(|e| e.value != HOLE),
                "a hole between {e:?} and its home"
            );
            assert!(last.is_none_or(|l| l < e.key), "keys out of order at {i}");
            last = Some(e.key);
        }
        assert_eq!(n, m.len);
        assert!(m.homes == 0 && m.entries.is_empty() || m.entries.len() >= m.homes + TAIL);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32, u32),
        Remove(u32),
    }

    /// Keys from a small range collide and share runs; keys spread over the whole range
    /// exercise the tail.
    fn op() -> impl Strategy<Value = Op> {
        let key = prop_oneof![0u32..64, any::<u32>(), (u32::MAX - 64)..=u32::MAX];
        prop_oneof![
            3 => (key.clone(), 0u32..1000).prop_map(|(k, v)| Op::Insert(k, v)),
            1 => key.prop_map(Op::Remove),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Any sequence of insertions and removals leaves the map agreeing with a `BTreeMap`
        /// on every key it ever saw (a removal answering the value it removed), with the
        /// layout's invariant intact.
        #[test]
        fn agrees_with_a_btreemap(ops in proptest::collection::vec(op(), 0..400)) {
            let mut m = FlatMap::default();
            let mut model = BTreeMap::new();
            for op in &ops {
                match *op {
                    Op::Insert(k, v) => {
                        m.insert(k, v);
                        model.insert(k, v);
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(m.remove(k), model.remove(&k));
                    }
                }
                check(&m);
            }
            prop_assert_eq!(m.len(), model.len());
            for op in &ops {
                let (Op::Insert(k, _) | Op::Remove(k)) = *op;
                prop_assert_eq!(m.get(k), model.get(&k));
            }
        }
    }

    #[test]
    fn multimap_keeps_every_page_of_a_key_and_forgets_removed_ones() {
        let mut m = MultiMap::default();
        m.insert(7, 1);
        assert_eq!(m.get(7), &[1]);
        m.insert(7, 2);
        m.insert(7, 3);
        assert_eq!(m.get(7), &[1, 2, 3]);
        m.remove(7, 2);
        assert_eq!(m.get(7), &[1, 3]);
        m.remove(7, 1);
        assert_eq!(m.get(7), &[3]);
        m.insert(8, 4);
        m.insert(8, 5);
        // Key 7's block of two, freed, is reused by key 8; its block of three stays free.
        assert_eq!(m.twos.pages.len(), 2);
        assert_eq!(m.threes.pages.len(), 3);
        m.remove(7, 3);
        assert!(m.get(7).is_empty());
        assert_eq!(m.get(8), &[4, 5]);
        // A fourth page makes a list; falling back to three pages frees it for a block of three
        // (the free one), in filing order.
        m.insert(8, 6);
        m.insert(8, 7);
        assert_eq!(m.get(8), &[4, 5, 6, 7]);
        assert_eq!(m.lists.heads.len(), 1);
        m.remove(8, 5);
        assert_eq!(m.get(8), &[4, 6, 7]);
        assert_eq!(m.lists.free_heads, [0]);
        assert_eq!(m.threes.pages.len(), 3);
        assert_eq!(m.take(8), [4, 6, 7]);
        assert!(m.get(8).is_empty());
    }

    #[derive(Debug, Clone)]
    enum Filing {
        File(u32, u32),
        Drop(u32, u32),
        Take(u32),
    }

    /// Few keys, so that lists grow long and shrink again; pages from a small range, so that
    /// drops hit pages that are filed.
    fn filing() -> impl Strategy<Value = Filing> {
        prop_oneof![
            3 => (0u32..6, 0u32..40).prop_map(|(k, p)| Filing::File(k, p)),
            2 => (0u32..6, 0u32..40).prop_map(|(k, p)| Filing::Drop(k, p)),
            1 => (0u32..6).prop_map(Filing::Take),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The multimap agrees with a map of vectors (pages in filing order, a drop removing
        /// the first filing of the page, a take removing the key and answering its pages)
        /// after every step, and its lists' blocks never overlap.
        #[test]
        fn multimap_agrees_with_a_map_of_vectors(
            ops in proptest::collection::vec(filing(), 0..600)
        ) {
            let mut m = MultiMap::default();
            let mut model: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
            for op in &ops {
                match *op {
                    Filing::File(k, p) => {
                        m.insert(k, p);
                        model.entry(k).or_default().push(p);
                    }
                    Filing::Drop(k, p) => {
                        m.remove(k, p);
                        if let Some(v) = model.get_mut(&k) {
                            if let Some(i) = v.iter().position(|&x| x == p) {
                                v.remove(i);
                            }
                        }
                    }
                    Filing::Take(k) => {
                        prop_assert_eq!(m.take(k), model.remove(&k).unwrap_or_default());
                    }
                }
                for k in 0..6 {
                    prop_assert_eq!(m.get(k), model.get(&k).map_or(&[][..], |v| &v[..]));
                }
                // No two keys share a list's block, or a block of two or of three.
                let (mut blocks, mut twos, mut threes) = (Vec::new(), Vec::new(), Vec::new());
                for e in m.map.entries.iter().filter(|e| e.value != HOLE) {
                    match held(e.value) {
                        Held::Page(_) => {}
                        Held::Two(b) => twos.push(b),
                        Held::Three(b) => threes.push(b),
                        Held::List(list) => {
                            let (at, len, class) = m.lists.head(list);
                            prop_assert!((4..=block_size(class)).contains(&len));
                            blocks.push((at, at + block_size(class)));
                        }
                    }
                }
                blocks.sort();
                prop_assert!(blocks.windows(2).all(|w| w[0].1 <= w[1].0), "blocks overlap");
                for numbers in [&mut twos, &mut threes] {
                    let n = numbers.len();
                    numbers.sort();
                    numbers.dedup();
                    prop_assert_eq!(numbers.len(), n, "two keys hold one block");
                }
            }
        }
    }

    #[test]
    fn a_full_tail_grows_the_tail() {
        // Keys that all have the last home fill the tail: it grows instead of failing.
        let mut m = FlatMap::default();
        for k in 0..(TAIL as u32 + 10) {
            m.insert(u32::MAX - k, k);
        }
        check(&m);
        assert_eq!(m.len(), TAIL + 10);
        for k in 0..(TAIL as u32 + 10) {
            assert_eq!(m.get(u32::MAX - k), Some(&k));
        }
    }

    #[test]
    fn stays_between_80_and_90_percent_full_as_it_grows() {
        let mut m = FlatMap::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            m.insert((x >> 32) as u32, i);
            if m.len() > 1000 {
                let load = m.len() as f64 / m.homes as f64;
                assert!((0.8..=0.9).contains(&load), "load {load} at {}", m.len());
            }
        }
        check(&m);
    }
}
