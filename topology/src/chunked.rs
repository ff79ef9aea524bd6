//! [`Chunked`]: a vector kept in chunks of [`CHUNK`] elements, for the sketch index's page
//! records.
//!
//! A `Vec` grown by an eighth at a time holds up to an eighth more than it needs (the page
//! records took 215 bytes per windowed page for records of 200 bytes at a million pages), and each
//! growth copies the whole array into a new one, so that the old and the new are held together
//! for a moment: 400 MB for a moment at two million pages. A chunked vector holds at most half
//! a chunk more than it needs, and growing moves at most one chunk.

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::marker::PhantomData;

/// Elements per chunk, a power of two (`1 << SHIFT`).
const SHIFT: u32 = 12;
pub(crate) const CHUNK: usize = 1 << SHIFT;
const MASK: usize = CHUNK - 1;

/// The smallest allocation of a chunk.
const FIRST: usize = 16;

/// A vector of chunks: every chunk but the last holds exactly [`CHUNK`] elements. The last
/// grows as a `Vec` does, doubling up to [`CHUNK`]: so a small vector stays small, the room to
/// spare is at most half a chunk beyond the last element, and an element is copied about once
/// on average as its chunk grows (by eighths, as the records' `Vec` grew, 9 times; allocated
/// whole, the medium crawl's window took 405 B per page instead of 375). Serializes as the
/// sequence of its elements, as a `Vec` does.
#[derive(Debug, Clone)]
pub(crate) struct Chunked<T> {
    chunks: Vec<Vec<T>>,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked { chunks: Vec::new() }
    }
}

impl<T> Chunked<T> {
    pub(crate) fn len(&self) -> usize {
        self.chunks
            .last()
            .map_or(0, |last| (self.chunks.len() - 1) * CHUNK + last.len())
    }

    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i >> SHIFT)?.get(i & MASK)
    }

    pub(crate) fn push(&mut self, value: T) {
        if self.chunks.last().is_none_or(|last| last.len() == CHUNK) {
            self.chunks.push(Vec::new());
        }
        let last = self.chunks.last_mut().expect("a chunk");
        if last.len() == last.capacity() {
            let want = (2 * last.len()).clamp(FIRST, CHUNK);
            last.reserve_exact(want - last.len());
        }
        last.push(value);
    }

    /// Appends `f()` until the vector holds `len` elements (never shortens it).
    pub(crate) fn grow_with(&mut self, len: usize, mut f: impl FnMut() -> T) {
        while self.len() < len {
            self.push(f());
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.chunks.iter_mut().flatten()
    }

    /// The number of elements the chunks have room for.
    pub(crate) fn capacity(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum()
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        if let Some(last) = self.chunks.last_mut() {
            last.shrink_to_fit();
        }
    }
}

impl<T> std::ops::Index<usize> for Chunked<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        &self.chunks[i >> SHIFT][i & MASK]
    }
}

impl<T> std::ops::IndexMut<usize> for Chunked<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> SHIFT][i & MASK]
    }
}

impl<T: Serialize> Serialize for Chunked<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        // The length first: postcard, like other compact formats, writes it before the elements.
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for value in self.iter() {
            seq.serialize_element(value)?;
        }
        seq.end()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Chunked<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Elements<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Elements<T> {
            type Value = Chunked<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Chunked<T>, A::Error> {
                let mut out = Chunked::default();
                while let Some(value) = seq.next_element()? {
                    out.push(value);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Elements(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A chunked vector holds what a `Vec` fed the same way holds, element by element,
        /// across chunk boundaries, with at most half a chunk's room to spare, and serializes
        /// byte for byte as the `Vec` does (checkpoints written before the change still read).
        #[test]
        fn chunked_holds_what_a_vec_holds(
            grows in prop::collection::vec(0usize..3 * CHUNK, 1..6),
            writes in prop::collection::vec((any::<prop::sample::Index>(), any::<u32>()), 0..50),
        ) {
            let (mut c, mut v) = (Chunked::default(), Vec::new());
            let mut next = 0u32;
            for len in grows {
                c.grow_with(len, || { next += 1; next });
                let mut next_v = v.len() as u32;
                if v.len() < len {
                    v.resize_with(len, || { next_v += 1; next_v });
                }
            }
            for (i, x) in writes {
                if !v.is_empty() {
                    let i = i.index(v.len());
                    v[i] = x;
                    c[i] = x;
                }
            }
            prop_assert_eq!(c.len(), v.len());
            prop_assert!(c.capacity() >= c.len() && c.capacity() <= c.len() + CHUNK / 2);
            prop_assert_eq!(c.iter().copied().collect::<Vec<_>>(), v.clone());
            for i in 0..v.len() + 2 {
                prop_assert_eq!(c.get(i), v.get(i));
            }
            let bytes = postcard::to_allocvec(&c).unwrap();
            prop_assert_eq!(&bytes, &postcard::to_allocvec(&v).unwrap());
            let back: Chunked<u32> = postcard::from_bytes(&bytes).unwrap();
            prop_assert_eq!(back.iter().copied().collect::<Vec<_>>(), v);
        }
    }
}
