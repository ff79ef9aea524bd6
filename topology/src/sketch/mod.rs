//! Page signatures from the five seed papers (DESIGN.md §4). Each module is one paper's
//! signature, computed from the page's terms (see [`crate::text`]) into caller-owned buffers, so
//! that signing a page allocates nothing in steady state.

pub mod bag;
pub mod change;
pub mod chunks;
pub mod minhash;
pub mod paragraphs;
pub mod rp;
pub mod simhash;

/// Elements two sorted slices share, counted with multiplicity (a linear merge). With
/// deduplicated inputs this is the size of the set intersection.
pub fn shared_sorted<T: Ord>(a: &[T], b: &[T]) -> usize {
    let (mut i, mut j, mut shared) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    shared
}
