//! The sketch index's key tables: `u32 key -> pages`, in flat arrays.
//!
//! The key tables hold about 15 keys per windowed page (22 before the forty-eighth session), so
//! what one key costs is most of the index's memory, and one lookup per key most of its time. Of
//! those keys some are held by one page only, the others by several (the bands of a site's
//! template, the bands of copies).
//!
//! - [`FlatMap`] maps each key to its page, or to a block or list of pages, in arrays of
//!   positions ordered by key (linear probing with ordered runs, the Robin Hood layout). The
//!   keys are mixed hashes, so a key's home is a multiply-shift of it over any number of home
//!   positions: homes rise with keys, the arrays need no power-of-two size and grow by an
//!   eighth, running between 80 % and 90 % full (75 % to 85 % until the forty-fifth session:
//!   17-19 B more per page at a million pages, for about 5 % of the index's speed; at 92 %,
//!   runs grew long enough to cost a fifth of it). A lookup reads one run from the key's home,
//!   stopping at the key, a greater one or a hole; an insertion shifts the rest of its run up
//!   by one; a removal shifts back the entries after it that are not at home; growing places
//!   every entry again in one ordered pass. A general-purpose hash map (hashbrown) keeps a
//!   control byte per bucket in a second array and doubles its buckets, running between 44 %
//!   and 88 % full.
//!
//!   Since the forty-sixth session a position of a large map keeps 16 bits of its key, not 32,
//!   so it takes 6 bytes instead of 8 (a `u16` offset and a `u32` value, in two arrays: a
//!   lookup reads the offsets until it stops, a hole's being above every key's): the
//!   homes are cut into blocks of 2^s consecutive homes, with s chosen so that the keys whose
//!   homes fall in one block span at most 65,531 values, and a position keeps its key's
//!   offset from its block's [`base`]. Which block a position's key belongs to follows from the
//!   position: the map keeps, per block, the position where the block's keys begin (4 bytes
//!   per block, a byte per home or less), and the positions from there to the next block's
//!   beginning hold that block's keys and holes only. That needs 2^16 blocks at least, so a
//!   map of fewer than 4 × 65,542 homes (about 220,000 keys) is *wide*: one block, whose
//!   offsets are the keys, kept as before in `(key, value)` pairs of 8 bytes. At a million
//!   windowed pages this took the key table entries from 147 to 110 B per page, for 6 % of
//!   the index's speed there (10-17 % on the medium crawl's window, whose table the caches
//!   hold, so that instructions count more than misses).
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
//! pages in 2.6 million lists), at about the same speed (`docs/measurements.md`, "Flat key
//! tables").
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

/// A narrow map's blocks have at most `homes / SPAN` homes each, so that the keys of a block
/// span at most 65,531 values (`2^32 / SPAN`, rounded up): with [`base`] up to two below the
/// block's smallest key, offsets run from 0 to 65,532, and 65,535 marks a hole.
const SPAN: usize = 65_542;

/// The fewest homes of a narrow map. Its blocks begin at 4 bytes each, and with fewer than
/// four homes a block they would cost as much as the two bytes a position saves (a map of
/// `SPAN` homes has a block per home). Tests take narrow maps from `SPAN` homes, so that they
/// meet blocks of one home.
const NARROW_MIN: usize = if cfg!(test) { SPAN } else { 4 * SPAN };

/// The block shift of a wide map: its one block holds every home.
const WIDE: u32 = 63;

/// A flat map's positions, each an entry (its key's offset in the key's block, and its value)
/// or a hole.
trait Store {
    fn new(positions: usize) -> Self;
    fn positions(&self) -> usize;
    /// Whether `at` holds an entry whose offset is below `offset`.
    fn below(&self, at: usize, offset: u32) -> bool;
    fn is_hole(&self, at: usize) -> bool;
    /// The offset of the entry at `at`.
    fn offset(&self, at: usize) -> u32;
    fn value(&self, at: usize) -> &u32;
    fn value_mut(&mut self, at: usize) -> &mut u32;
    fn set(&mut self, at: usize, offset: u32, value: u32);
    fn clear(&mut self, at: usize);
    /// Moves the positions `from..to` to `from + 1..=to` (`up`) or `from + 1..to` to
    /// `from..to - 1`.
    fn shift(&mut self, from: usize, to: usize, up: bool);
    /// The first hole at or after `from`.
    fn hole_from(&self, from: usize) -> Option<usize>;
    /// `n` more positions at the end, holes.
    fn extend(&mut self, n: usize);
    /// Reads what a lookup starting at `at` reads first.
    fn touch(&self, at: usize) -> u32;
    fn bytes(&self) -> usize;
    fn shrink_to_fit(&mut self);
}

/// A wide map's positions: `(key, value)` pairs of 8 bytes in one array, a hole's value
/// [`HOLE`]. A lookup reads one array.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Wide(Vec<Entry>);

#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Entry {
    key: u32,
    value: u32,
}

const EMPTY: Entry = Entry {
    key: 0,
    value: HOLE,
};

impl Store for Wide {
    fn new(positions: usize) -> Self {
        Wide(vec![EMPTY; positions])
    }
    fn positions(&self) -> usize {
        self.0.len()
    }
    fn below(&self, at: usize, offset: u32) -> bool {
        let e = &self.0[at];
        e.value != HOLE && e.key < offset
    }
    fn is_hole(&self, at: usize) -> bool {
        self.0[at].value == HOLE
    }
    fn offset(&self, at: usize) -> u32 {
        self.0[at].key
    }
    fn value(&self, at: usize) -> &u32 {
        &self.0[at].value
    }
    fn value_mut(&mut self, at: usize) -> &mut u32 {
        &mut self.0[at].value
    }
    fn set(&mut self, at: usize, offset: u32, value: u32) {
        self.0[at] = Entry { key: offset, value };
    }
    fn clear(&mut self, at: usize) {
        self.0[at] = EMPTY;
    }
    fn shift(&mut self, from: usize, to: usize, up: bool) {
        match up {
            true => self.0.copy_within(from..to, from + 1),
            false => self.0.copy_within(from + 1..to, from),
        }
    }
    fn hole_from(&self, from: usize) -> Option<usize> {
        let i = self.0[from..].iter().position(|e| e.value == HOLE)?;
        Some(from + i)
    }
    fn extend(&mut self, n: usize) {
        self.0.reserve_exact(n);
        self.0.resize(self.0.len() + n, EMPTY);
    }
    fn touch(&self, at: usize) -> u32 {
        self.0.get(at).map_or(0, |e| e.key)
    }
    fn bytes(&self) -> usize {
        self.0.capacity() * std::mem::size_of::<Entry>()
    }
    fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit();
    }
}

/// A narrow map's positions: 16-bit offsets in one array (a hole's [`NARROW_HOLE`]), values
/// in another. A lookup reads the offsets until it stops, then the value it found.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Narrow {
    offsets: Vec<u16>,
    values: Vec<u32>,
}

/// A hole's offset in a narrow map: above every offset, so a lookup stops there.
const NARROW_HOLE: u16 = u16::MAX;

impl Store for Narrow {
    fn new(positions: usize) -> Self {
        Narrow {
            offsets: vec![NARROW_HOLE; positions],
            values: vec![HOLE; positions],
        }
    }
    fn positions(&self) -> usize {
        self.offsets.len()
    }
    fn below(&self, at: usize, offset: u32) -> bool {
        u32::from(self.offsets[at]) < offset
    }
    fn is_hole(&self, at: usize) -> bool {
        self.offsets[at] == NARROW_HOLE
    }
    fn offset(&self, at: usize) -> u32 {
        u32::from(self.offsets[at])
    }
    fn value(&self, at: usize) -> &u32 {
        &self.values[at]
    }
    fn value_mut(&mut self, at: usize) -> &mut u32 {
        &mut self.values[at]
    }
    fn set(&mut self, at: usize, offset: u32, value: u32) {
        debug_assert!(offset < u32::from(NARROW_HOLE));
        self.offsets[at] = offset as u16;
        self.values[at] = value;
    }
    fn clear(&mut self, at: usize) {
        self.offsets[at] = NARROW_HOLE;
        self.values[at] = HOLE;
    }
    fn shift(&mut self, from: usize, to: usize, up: bool) {
        let (src, dest) = match up {
            true => (from..to, from + 1),
            false => (from + 1..to, from),
        };
        self.offsets.copy_within(src.clone(), dest);
        self.values.copy_within(src, dest);
    }
    fn hole_from(&self, from: usize) -> Option<usize> {
        let i = self.offsets[from..]
            .iter()
            .position(|&o| o == NARROW_HOLE)?;
        Some(from + i)
    }
    fn extend(&mut self, n: usize) {
        let positions = self.offsets.len() + n;
        self.offsets.reserve_exact(n);
        self.offsets.resize(positions, NARROW_HOLE);
        self.values.reserve_exact(n);
        self.values.resize(positions, HOLE);
    }
    fn touch(&self, at: usize) -> u32 {
        let offset = self.offsets.get(at).map_or(0, |&o| u32::from(o));
        offset ^ self.values.get(at).copied().unwrap_or(0)
    }
    fn bytes(&self) -> usize {
        self.offsets.capacity() * 2 + self.values.capacity() * 4
    }
    fn shrink_to_fit(&mut self) {
        self.offsets.shrink_to_fit();
        self.values.shrink_to_fit();
    }
}

/// `u32 -> u32`, values below `u32::MAX`: wide while small, narrow from [`NARROW_MIN`] homes.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
enum FlatMap {
    Wide(Layout<Wide>),
    Narrow(Layout<Narrow>),
}

/// `$body` with `$l` bound to the map's layout, whichever it is.
macro_rules! layout {
    ($map:expr, $l:ident => $body:expr) => {
        match $map {
            FlatMap::Wide($l) => $body,
            FlatMap::Narrow($l) => $body,
        }
    };
}

/// Empty, with nothing allocated: the first insertion grows it to [`MIN_HOMES`] homes.
impl Default for FlatMap {
    fn default() -> Self {
        FlatMap::Wide(Layout {
            store: Wide(Vec::new()),
            starts: Vec::new(),
            homes: 0,
            shift: WIDE,
            recip: 0,
            len: 0,
        })
    }
}

impl FlatMap {
    fn with_homes(homes: usize) -> Self {
        if homes >= NARROW_MIN {
            FlatMap::Narrow(Layout::new(homes, (homes / SPAN).ilog2()))
        } else {
            FlatMap::Wide(Layout::new(homes, WIDE))
        }
    }

    /// The position of `key` and its block.
    fn find(&self, key: u32) -> Option<(usize, usize)> {
        layout!(self, l => l.find(key))
    }

    fn get(&self, key: u32) -> Option<&u32> {
        layout!(self, l => l.find(key).map(|(at, _)| l.store.value(at)))
    }

    fn value_mut(&mut self, at: usize) -> &mut u32 {
        layout!(self, l => l.store.value_mut(at))
    }

    /// Sets `key`'s value (`value` below `u32::MAX`).
    #[cfg(test)]
    fn insert(&mut self, key: u32, value: u32) {
        if let Some(v) = self.get_or_insert(key, value) {
            *v = value;
        }
    }

    /// `key`'s value if it has one; else gives it `value` (below `u32::MAX`). One seek either
    /// way (two when the map grows first).
    fn get_or_insert(&mut self, key: u32, value: u32) -> Option<&mut u32> {
        assert!(value != HOLE, "FlatMap values are below u32::MAX");
        let found = layout!(&mut *self, l => {
            let s = l.seek(key);
            if l.holds(&s) {
                Some(s.at)
            } else if (l.len + 1) * 10 <= l.homes * 9 {
                l.insert_at(&s, value);
                return None;
            } else {
                None
            }
        });
        if let Some(at) = found {
            return Some(self.value_mut(at));
        }
        self.grow();
        layout!(self, l => {
            let s = l.seek(key);
            l.insert_at(&s, value);
        });
        None
    }

    /// Removes `key` and returns its value.
    fn remove(&mut self, key: u32) -> Option<u32> {
        let (at, block) = self.find(key)?;
        let value = *self.value_mut(at);
        self.remove_at(at, block);
        Some(value)
    }

    /// Removes the entry at `at` (which [`Self::find`] gave, with its block).
    fn remove_at(&mut self, at: usize, block: usize) {
        layout!(self, l => l.remove_at(at, block))
    }

    /// Reads what a lookup of `key` reads first, for [`MultiMap::get_all`].
    fn touch(&self, key: u32) -> u32 {
        layout!(self, l => l.touch(key))
    }

    /// An eighth more homes, the entries placed in one pass in key order.
    fn grow(&mut self) {
        let homes = layout!(&*self, l => l.homes);
        let mut grown = FlatMap::with_homes((homes + homes / 8).max(MIN_HOMES));
        layout!(&*self, old => layout!(&mut grown, new => new.fill(old.entries())));
        *self = grown;
    }

    /// Bytes held.
    fn bytes(&self) -> usize {
        layout!(self, l => l.bytes())
    }

    fn shrink_to_fit(&mut self) {
        layout!(self, l => l.shrink_to_fit())
    }

    /// The entries in key order: position, key and value.
    #[cfg(test)]
    fn entries(&self) -> Vec<(usize, u32, u32)> {
        layout!(self, l => l.entries().collect())
    }

    /// The number of keys.
    #[cfg(test)]
    fn len(&self) -> usize {
        layout!(self, l => l.len)
    }

    #[cfg(test)]
    fn homes(&self) -> usize {
        layout!(self, l => l.homes)
    }
}

/// A flat map: its positions, and where its blocks begin.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Layout<S> {
    /// `homes + TAIL` positions or more (none while empty). Every entry is at or after its
    /// home, with no hole between, and the entries are in key order.
    store: S,
    /// Per block, where its keys begin: the first position from the block's first home that
    /// is a hole or holds a key of the block or a later one.
    starts: Vec<u32>,
    homes: usize,
    /// A block is `1 << shift` homes ([`WIDE`]: one block).
    shift: u32,
    /// `u64::MAX / homes`, for [`base`].
    recip: u64,
    len: usize,
}

/// Where [`Layout::seek`] stopped.
struct Seek {
    /// The position of the key, or where it would go.
    at: usize,
    /// The beginning of the next block (or the end of the array): the key's block ends there.
    end: usize,
    block: usize,
    /// The key's offset in its block.
    offset: u32,
}

impl<S: Store> Layout<S> {
    fn new(homes: usize, shift: u32) -> Self {
        let positions = homes + TAIL;
        let blocks = if shift == WIDE {
            1
        } else {
            homes.div_ceil(1 << shift)
        };
        Layout {
            store: S::new(positions),
            starts: (0..blocks).map(|b| (b << shift) as u32).collect(),
            homes,
            shift,
            recip: u64::MAX / homes as u64,
            len: 0,
        }
    }

    fn home(&self, key: u32) -> usize {
        ((u64::from(key) * self.homes as u64) >> 32) as usize
    }

    fn block(&self, home: usize) -> usize {
        home >> self.shift
    }

    /// The first home of `block`.
    fn first_home(&self, block: usize) -> usize {
        block << self.shift
    }

    /// What the offsets of `block`'s keys are counted from ([`base`]).
    fn base(&self, block: usize) -> u32 {
        base(self.first_home(block), self.recip)
    }

    /// Where `block`'s keys begin (a map with nothing allocated has no blocks).
    fn start(&self, block: usize) -> usize {
        self.starts.get(block).map_or(0, |&s| s as usize)
    }

    /// Where `block`'s positions end: where the next block's keys begin, or the array's end.
    fn block_end(&self, block: usize) -> usize {
        self.starts
            .get(block + 1)
            .map_or(self.positions(), |&s| s as usize)
    }

    fn positions(&self) -> usize {
        self.store.positions()
    }

    fn is_hole(&self, at: usize) -> bool {
        self.store.is_hole(at)
    }

    /// Where `key` is, or where it would go: the first position from its home holding `key`, a
    /// greater key or a hole (the end of its block, or of the array when the last run fills the
    /// tail). The positions from its home to its block's beginning, if any, hold smaller keys
    /// of earlier blocks, with offsets in those blocks.
    fn seek(&self, key: u32) -> Seek {
        let home = self.home(key);
        let block = self.block(home);
        let offset = key - self.base(block);
        let end = self.block_end(block);
        let mut at = home.max(self.start(block));
        while at < end && self.store.below(at, offset) {
            at += 1;
        }
        Seek {
            at,
            end,
            block,
            offset,
        }
    }

    /// Whether the key sought is where [`Self::seek`] stopped.
    fn holds(&self, s: &Seek) -> bool {
        s.at < s.end && !self.is_hole(s.at) && self.store.offset(s.at) == s.offset
    }

    fn find(&self, key: u32) -> Option<(usize, usize)> {
        let s = self.seek(key);
        self.holds(&s).then_some((s.at, s.block))
    }

    /// Reads the offset and the value at `key`'s home, and its block's beginning.
    fn touch(&self, key: u32) -> u32 {
        let home = self.home(key);
        self.store.touch(home) ^ self.start(self.block(home)) as u32
    }

    /// Inserts the key that `s` sought and did not find, with `value`.
    fn insert_at(&mut self, s: &Seek, value: u32) {
        // The run from `at` moves up by one into its first hole.
        let hole = match self.store.hole_from(s.at) {
            Some(hole) => hole,
            None => {
                let hole = self.positions();
                self.store.extend(TAIL);
                hole
            }
        };
        self.store.shift(s.at, hole, true);
        self.store.set(s.at, s.offset, value);
        // The later blocks that began in the moved run begin one position later.
        for start in self.starts.iter_mut().skip(s.block + 1) {
            if *start as usize > hole {
                break;
            }
            *start += 1;
        }
        self.len += 1;
    }

    /// Removes the entry at `at`, of `block`.
    fn remove_at(&mut self, at: usize, block: usize) {
        // The entries after it that are not at their home move back by one.
        let (mut end, mut b, mut base) = (at + 1, block, self.base(block));
        while end < self.positions() && !self.is_hole(end) {
            while self.block_end(b) <= end {
                b += 1;
                base = self.base(b);
            }
            if self.home(base + self.store.offset(end)) == end {
                break;
            }
            end += 1;
        }
        self.store.shift(at, end, false);
        self.store.clear(end - 1);
        // The later blocks that began in the moved entries (or just after them) begin one
        // position earlier, but not before their first home.
        for b in block + 1..self.starts.len() {
            let start = self.starts[b] as usize;
            if start > end {
                break;
            }
            self.starts[b] = (start - 1).max(self.first_home(b)) as u32;
        }
        self.len -= 1;
    }

    /// The entries in key order: position, key and value.
    fn entries(&self) -> impl Iterator<Item = (usize, u32, u32)> + '_ {
        (0..self.starts.len()).flat_map(move |b| {
            let base = self.base(b);
            (self.start(b)..self.block_end(b))
                .filter(move |&at| !self.is_hole(at))
                .map(move |at| (at, base + self.store.offset(at), *self.store.value(at)))
        })
    }

    /// Places `entries` (in key order) in this empty layout, in one pass.
    fn fill(&mut self, entries: impl Iterator<Item = (usize, u32, u32)>) {
        // `next`: the position after the last entry placed; `begun`: the blocks whose
        // beginning is known (those up to the last entry's).
        let (mut next, mut begun) = (0, 0);
        let (mut b, mut base) = (0, self.base(0));
        for (_, key, value) in entries {
            let home = self.home(key);
            let at = home.max(next);
            if at == self.positions() {
                self.store.extend(TAIL);
            }
            let block = self.block(home);
            if block != b {
                b = block;
                base = self.base(b);
            }
            self.store.set(at, key - base, value);
            for x in begun..=block {
                self.starts[x] = next.max(self.first_home(x)) as u32;
            }
            begun = block + 1;
            next = at + 1;
            self.len += 1;
        }
        for x in begun..self.starts.len() {
            self.starts[x] = next.max(self.first_home(x)) as u32;
        }
    }

    /// Bytes held.
    fn bytes(&self) -> usize {
        self.store.bytes() + self.starts.capacity() * 4
    }

    fn shrink_to_fit(&mut self) {
        self.store.shrink_to_fit();
        self.starts.shrink_to_fit();
    }
}

/// What the offsets of the keys of a block are counted from, given its first home `first`
/// and `recip = ⌊(2^64 − 1) / homes⌋`: `⌊first · recip / 2^32⌋`, the smallest key whose home is
/// at or after `first` (`⌈first · 2^32 / homes⌉`) or up to two less, by one multiplication (an
/// exact division took a tenth of a lookup's time). Since `recip ≤ 2^64 / homes`, it is at
/// most that key; since `recip > 2^64 / homes − 1` and `first < 2^32`, it is more than that
/// key less two.
fn base(first: usize, recip: u64) -> u32 {
    ((first as u64 * recip) >> 32) as u32
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
        let Some(v) = self.map.get_or_insert(key, page) else {
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
        let Some((at, block)) = self.map.find(key) else {
            return;
        };
        let v = self.map.value_mut(at);
        match held(*v) {
            Held::Page(p) => {
                if p == page {
                    self.map.remove_at(at, block);
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
            acc ^= self.map.touch(k);
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
        self.map.shrink_to_fit();
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
    /// between and inside its block's positions, every block beginning where it should, and
    /// `len` counting the entries.
    fn check(m: &FlatMap) {
        match m {
            FlatMap::Wide(l) => {
                assert!(l.homes < NARROW_MIN && l.shift == WIDE);
                assert_eq!(l.starts.len(), usize::from(l.homes > 0));
                check_layout(l);
            }
            FlatMap::Narrow(l) => {
                assert!(l.homes >= NARROW_MIN);
                assert_eq!(l.starts.len(), l.homes.div_ceil(1 << l.shift));
                // A block's offsets stay below 65,535.
                for b in 0..l.starts.len() {
                    let next = smallest_key(((b + 1) << l.shift).min(l.homes), l.homes);
                    assert!(
                        next - 1 - u64::from(l.base(b)) <= 65_532,
                        "block {b} too wide"
                    );
                }
                check_layout(l);
            }
        }
    }

    fn check_layout<S: Store>(m: &Layout<S>) {
        let entries: Vec<(usize, u32, u32)> = m.entries().collect();
        let mut last: Option<u32> = None;
        for &(i, key, value) in &entries {
            let home = m.home(key);
            assert!(home <= i, "key {key} at {i} before its home {home}");
            assert!(
                (home..i).all(|p| !m.is_hole(p)),
                "a hole between key {key} at {i} and its home"
            );
            assert!(last.is_none_or(|l| l < key), "keys out of order at {i}");
            last = Some(key);
            let block = m.block(home);
            assert!(
                m.start(block) <= i && i < m.block_end(block),
                "key {key} at {i} outside its block {block}"
            );
            assert_eq!(m.find(key), Some((i, block)));
            assert_eq!(*m.store.value(i), value);
        }
        assert_eq!(entries.len(), m.len);
        for i in 0..m.positions() {
            assert_eq!(
                m.is_hole(i),
                *m.store.value(i) == HOLE,
                "hole or not at {i}"
            );
        }
        let keys: BTreeMap<usize, u32> = entries.iter().map(|&(i, k, _)| (i, k)).collect();
        for b in 0..m.starts.len() {
            let begins = (m.first_home(b)..m.positions())
                .find(|p| {
                    keys.get(p).is_none_or(|&k| {
                        u64::from(k) >= smallest_key(m.first_home(b).min(m.homes), m.homes)
                    })
                })
                .unwrap_or(m.positions());
            assert_eq!(m.start(b), begins, "block {b} begins elsewhere");
        }
        assert!(m.homes == 0 && m.positions() == 0 || m.positions() >= m.homes + TAIL);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32, u32),
        Remove(u32),
    }

    /// Keys from a small range collide and share runs; keys spread over the whole range
    /// exercise the tail; keys 61 apart in the middle of the range make runs that cross the
    /// blocks of a narrow map.
    fn op() -> impl Strategy<Value = Op> {
        let key = prop_oneof![
            0u32..64,
            any::<u32>(),
            (u32::MAX - 64)..=u32::MAX,
            (0u32..4096).prop_map(|x| 0x8000_0000 + x * 61),
        ];
        prop_oneof![
            3 => (key.clone(), 0u32..1000).prop_map(|(k, v)| Op::Insert(k, v)),
            1 => key.prop_map(Op::Remove),
        ]
    }

    /// An empty map, or a map made with that many homes: wide, or narrow with blocks of one,
    /// two, four and eight homes (the last block short).
    fn homes() -> impl Strategy<Value = usize> {
        prop_oneof![
            Just(0),
            Just(SPAN - 1),
            Just(SPAN),
            Just(2 * SPAN + 4321),
            Just(4 * SPAN),
            Just((1 << 20) + 7)
        ]
    }

    /// The smallest key whose home is at or after `first`, exactly.
    fn smallest_key(first: usize, homes: usize) -> u64 {
        ((first as u64) << 32).div_ceil(homes as u64)
    }

    proptest! {
        /// For any number of homes of a narrow map and any of its blocks, the base is at most
        /// the block's smallest key, and the block's greatest key at most 65,532 above it.
        #[test]
        fn a_blocks_keys_fit_sixteen_bits_above_its_base(
            homes in SPAN..=u32::MAX as usize,
            at in any::<u64>(),
        ) {
            let shift = (homes / SPAN).ilog2();
            let recip = u64::MAX / homes as u64;
            let blocks = homes.div_ceil(1 << shift);
            for block in [0, 1, blocks / 2, blocks - 1, (at % blocks as u64) as usize] {
                let first = block << shift;
                let next = ((block + 1) << shift).min(homes);
                let base = u64::from(base(first, recip));
                prop_assert!(base <= smallest_key(first, homes));
                prop_assert!(smallest_key(next, homes) - 1 - base <= 65_532);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Any sequence of insertions and removals leaves the map agreeing with a `BTreeMap`
        /// on every key it ever saw (a removal answering the value it removed), with the
        /// layout's invariant intact (after every step in a small map, at the end in a large
        /// one).
        #[test]
        fn agrees_with_a_btreemap(
            homes in homes(),
            ops in proptest::collection::vec(op(), 0..400)
        ) {
            let mut m = if homes == 0 { FlatMap::default() } else { FlatMap::with_homes(homes) };
            let mut model = BTreeMap::new();
            for op in &ops {
                match *op {
                    Op::Insert(k, v) => {
                        m.insert(k, v);
                        model.insert(k, v);
                        prop_assert_eq!(m.get(k), Some(&v));
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(m.remove(k), model.remove(&k));
                        prop_assert_eq!(m.get(k), None);
                    }
                }
                if m.homes() < 5000 {
                    check(&m);
                }
            }
            check(&m);
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
                for (_, _, value) in m.map.entries() {
                    match held(value) {
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
        // Keys that all have the last home fill the tail: it grows instead of failing, in a
        // wide map and in a narrow one.
        for mut m in [FlatMap::default(), FlatMap::with_homes(1 << 18)] {
            for k in 0..(TAIL as u32 + 10) {
                m.insert(u32::MAX - k, k);
            }
            check(&m);
            assert_eq!(m.len(), TAIL + 10);
            for k in 0..(TAIL as u32 + 10) {
                assert_eq!(m.get(u32::MAX - k), Some(&k));
            }
            for k in (0..(TAIL as u32 + 10)).step_by(3) {
                assert_eq!(m.remove(u32::MAX - k), Some(k));
            }
            check(&m);
        }
    }

    #[test]
    fn a_position_takes_six_bytes_once_the_map_is_narrow() {
        let wide = FlatMap::with_homes(NARROW_MIN - 1);
        let positions = NARROW_MIN - 1 + TAIL;
        assert!(matches!(wide, FlatMap::Wide(_)));
        assert_eq!(wide.bytes(), positions * 8 + 4);
        let FlatMap::Narrow(narrow) = FlatMap::with_homes(4 * NARROW_MIN) else {
            panic!("wide from NARROW_MIN homes");
        };
        assert_eq!(narrow.shift, 2);
        assert_eq!(narrow.starts.len(), NARROW_MIN);
        assert_eq!(narrow.bytes(), narrow.positions() * 6 + NARROW_MIN * 4);
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
                let load = m.len() as f64 / m.homes() as f64;
                assert!((0.8..=0.9).contains(&load), "load {load} at {}", m.len());
            }
        }
        // It grew from wide to narrow on the way.
        assert!(matches!(m, FlatMap::Narrow(_)));
        check(&m);
        // Removals from a narrow map with blocks of two homes.
        let keys: Vec<u32> = m.entries().into_iter().map(|(_, k, _)| k).collect();
        for k in keys.iter().step_by(2) {
            assert!(m.remove(*k).is_some());
        }
        check(&m);
        assert_eq!(m.len(), keys.len() / 2);
    }
}
