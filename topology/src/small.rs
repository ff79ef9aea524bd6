//! A sorted map that is a vector while it is small.
//!
//! The state keeps many small sorted collections: a cluster's members, a cluster's hosts. A
//! `BTreeMap` or `BTreeSet` allocates a node of 11 entries for the first one (448 bytes for a
//! host's URL list, 528 for a cluster member's rank), which made such collections most of what
//! their part held. [`SortedMap`] keeps up to [`FEW`] entries in a sorted vector and moves to a
//! `BTreeMap` beyond, so that a large collection (a cluster over 190 parked domains) still
//! changes in O(log n); it moves back at half the bound, so one at the bound does not move to
//! and fro. It is encoded as the map it stands for ([`SortedSet`] as the set), so a checkpoint
//! reads the same either way.

use serde::ser::{SerializeMap, SerializeSeq};
use std::collections::BTreeMap;

/// The most entries kept in the vector.
pub(crate) const FEW: usize = 32;

/// A map sorted by key: a sorted vector up to [`FEW`] entries, a `BTreeMap` beyond.
#[derive(Debug, Clone)]
pub(crate) enum SortedMap<K, V> {
    Few(Vec<(K, V)>),
    Many(BTreeMap<K, V>),
}

impl<K, V> Default for SortedMap<K, V> {
    fn default() -> Self {
        SortedMap::Few(Vec::new())
    }
}

impl<K: Ord, V> SortedMap<K, V> {
    fn find<Q: Ord + ?Sized>(few: &[(K, V)], key: &Q) -> Result<usize, usize>
    where
        K: std::borrow::Borrow<Q>,
    {
        few.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    pub(crate) fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: std::borrow::Borrow<Q>,
    {
        match self {
            SortedMap::Few(few) => {
                let i = Self::find(few, key).ok()?;
                Some(&mut few[i].1)
            }
            SortedMap::Many(map) => map.get_mut(key),
        }
    }

    /// The value of `key`, `make()` inserted first if it has none.
    pub(crate) fn entry(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        if let SortedMap::Few(few) = self {
            if few.len() >= FEW && Self::find(few, &key).is_err() {
                *self = SortedMap::Many(std::mem::take(few).into_iter().collect());
            }
        }
        match self {
            SortedMap::Few(few) => {
                let i = match Self::find(few, &key) {
                    Ok(i) => i,
                    Err(i) => {
                        few.insert(i, (key, make()));
                        i
                    }
                };
                &mut few[i].1
            }
            SortedMap::Many(map) => map.entry(key).or_insert_with(make),
        }
    }

    /// Takes `key` out.
    pub(crate) fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
    {
        match self {
            SortedMap::Few(few) => {
                let i = Self::find(few, key).ok()?;
                Some(few.remove(i).1)
            }
            SortedMap::Many(map) => {
                let gone = map.remove(key);
                if map.len() <= FEW / 2 {
                    *self = SortedMap::Few(std::mem::take(map).into_iter().collect());
                }
                gone
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            SortedMap::Few(few) => few.len(),
            SortedMap::Many(map) => map.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        let (few, many) = match self {
            SortedMap::Few(few) => (Some(few), None),
            SortedMap::Many(map) => (None, Some(map)),
        };
        let few = few.into_iter().flatten().map(|(k, v)| (k, v));
        few.chain(many.into_iter().flatten())
    }

    /// The smallest key.
    pub(crate) fn first_key(&self) -> Option<&K> {
        match self {
            SortedMap::Few(few) => few.first().map(|(k, _)| k),
            SortedMap::Many(map) => map.keys().next(),
        }
    }

    fn from_map(map: BTreeMap<K, V>) -> Self {
        match map.len() > FEW {
            true => SortedMap::Many(map),
            false => SortedMap::Few(map.into_iter().collect()),
        }
    }
}

impl<K: Ord + serde::Serialize, V: serde::Serialize> serde::Serialize for SortedMap<K, V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_map(s, self.len(), self.iter())
    }
}

/// Writes `len` entries as a map. Not `collect_map`: a chained iterator (an enum's variants
/// chained, as here) does not know its length, which postcard needs.
pub(crate) fn serialize_map<'a, S, K, V>(
    s: S,
    len: usize,
    entries: impl Iterator<Item = (&'a K, &'a V)>,
) -> Result<S::Ok, S::Error>
where
    S: serde::Serializer,
    K: serde::Serialize + 'a,
    V: serde::Serialize + 'a,
{
    let mut map = s.serialize_map(Some(len))?;
    for (k, v) in entries {
        map.serialize_entry(k, v)?;
    }
    map.end()
}

impl<'de, K, V> serde::Deserialize<'de> for SortedMap<K, V>
where
    K: Ord + serde::Deserialize<'de>,
    V: serde::Deserialize<'de>,
{
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(SortedMap::from_map(BTreeMap::deserialize(d)?))
    }
}

/// A sorted set: a [`SortedMap`] of keys alone, encoded as the set.
#[derive(Debug, Clone)]
pub(crate) struct SortedSet<K>(SortedMap<K, ()>);

impl<K> Default for SortedSet<K> {
    fn default() -> Self {
        SortedSet(SortedMap::default())
    }
}

impl<K: Ord> SortedSet<K> {
    /// Adds `key` (true if it was not held).
    pub(crate) fn insert(&mut self, key: K) -> bool {
        let before = self.0.len();
        self.0.entry(key, || ());
        self.0.len() > before
    }

    /// Takes `key` out (true if it was held).
    pub(crate) fn remove(&mut self, key: &K) -> bool {
        self.0.remove(key).is_some()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The smallest key.
    pub(crate) fn first(&self) -> Option<&K> {
        self.0.first_key()
    }

    /// The keys in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &K> {
        self.0.iter().map(|(k, _)| k)
    }
}

impl<K: Ord + serde::Serialize> serde::Serialize for SortedSet<K> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for k in self.iter() {
            seq.serialize_element(k)?;
        }
        seq.end()
    }
}

impl<'de, K: Ord + serde::Deserialize<'de>> serde::Deserialize<'de> for SortedSet<K> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let set = std::collections::BTreeSet::<K>::deserialize(d)?;
        let map: BTreeMap<K, ()> = set.into_iter().map(|k| (k, ())).collect();
        Ok(SortedSet(SortedMap::from_map(map)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// `SortedMap` against `BTreeMap`, over random additions and removals across its bound
        /// and back: the same entries in the same order, and the same checkpoint bytes.
        #[test]
        fn sorted_map_behaves_and_encodes_as_a_btree_map(ops in proptest::collection::vec((0u8..5, 0u16..48), 0..300)) {
            let mut map = SortedMap::<u16, Vec<u32>>::default();
            let mut model = BTreeMap::<u16, Vec<u32>>::new();
            for (i, (op, k)) in ops.into_iter().enumerate() {
                match op {
                    0..=2 => {
                        map.entry(k, Vec::new).push(i as u32);
                        model.entry(k).or_default().push(i as u32);
                    }
                    3 => prop_assert_eq!(map.remove(&k), model.remove(&k)),
                    _ => prop_assert_eq!(map.get_mut(&k).cloned(), model.get(&k).cloned()),
                }
                prop_assert_eq!(map.len(), model.len());
                prop_assert_eq!(map.is_empty(), model.is_empty());
                prop_assert_eq!(map.first_key(), model.keys().next());
                prop_assert_eq!(map.iter().collect::<Vec<_>>(), model.iter().collect::<Vec<_>>());
                let bytes = postcard::to_allocvec(&map).unwrap();
                prop_assert_eq!(&bytes, &postcard::to_allocvec(&model).unwrap());
                let back: SortedMap<u16, Vec<u32>> = postcard::from_bytes(&bytes).unwrap();
                prop_assert_eq!(back.iter().collect::<Vec<_>>(), model.iter().collect::<Vec<_>>());
            }
        }

        /// `SortedSet` against `BTreeSet`, the same way.
        #[test]
        fn sorted_set_behaves_and_encodes_as_a_btree_set(ops in proptest::collection::vec((0u8..3, 0u16..48), 0..300)) {
            let mut set = SortedSet::<u16>::default();
            let mut model = BTreeSet::<u16>::new();
            for (op, k) in ops {
                match op {
                    0 | 1 => prop_assert_eq!(set.insert(k), model.insert(k)),
                    _ => prop_assert_eq!(set.remove(&k), model.remove(&k)),
                }
                prop_assert_eq!(set.len(), model.len());
                prop_assert_eq!(set.first(), model.first());
                prop_assert_eq!(set.iter().collect::<Vec<_>>(), model.iter().collect::<Vec<_>>());
                let bytes = postcard::to_allocvec(&set).unwrap();
                prop_assert_eq!(&bytes, &postcard::to_allocvec(&model).unwrap());
                let back: SortedSet<u16> = postcard::from_bytes(&bytes).unwrap();
                prop_assert_eq!(back.iter().collect::<Vec<_>>(), model.iter().collect::<Vec<_>>());
            }
        }
    }

    /// The map moves to a `BTreeMap` past `FEW` entries and back at half of it.
    #[test]
    fn a_sorted_map_changes_form_at_its_bounds() {
        let mut m = SortedMap::<usize, ()>::default();
        for i in 0..FEW {
            m.entry(i, || ());
        }
        assert!(matches!(m, SortedMap::Few(_)));
        m.entry(0, || ());
        assert!(matches!(m, SortedMap::Few(_)), "a key held already");
        m.entry(FEW, || ());
        assert!(matches!(m, SortedMap::Many(_)));
        for i in 0..=FEW / 2 {
            m.remove(&i);
        }
        assert!(matches!(m, SortedMap::Few(_)));
        assert_eq!(m.len(), FEW / 2);
        let keys: Vec<usize> = m.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, (FEW / 2 + 1..=FEW).collect::<Vec<_>>());
    }
}
