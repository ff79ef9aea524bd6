//! Page signatures from the five seed papers (DESIGN.md §4). Each module is one paper's
//! signature, computed from the page's terms (see [`crate::text`]) into caller-owned buffers, so
//! that signing a page allocates nothing in steady state.

pub mod change;
pub mod chunks;
pub mod minhash;
pub mod paragraphs;
pub mod rp;
pub mod simhash;
