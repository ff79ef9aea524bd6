//! A page's signatures between signing and the signature event: the compact form the sign
//! cache keeps ([`SignedParts`]), and what a preparing thread hands to the topology
//! ([`Signed`]), with the signature event's `content` object already written as JSON.
//!
//! The `content` object is written straight from the numbers, without building a
//! [`ContentSignatures`] of some 200 small strings (hex digits, links) first, and on the
//! preparing threads rather than the one thread that applies pages in order. The JSON is
//! exactly what serializing the [`ContentSignatures`] gives (a property test holds the two
//! equal), so event ids do not change.

use std::borrow::Cow;
use std::sync::Arc;

use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::near;
use crate::sketch::minhash::BSketch;
use crate::sketch::simhash::SimHash;

/// Every signature of a page in its compact form (numbers, not their hex): what the sign cache
/// keeps, and what the topology reads of a page's signatures.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct SignedParts {
    pub checksum: u128,
    pub text_hash: u128,
    /// [`crate::text::title_hash`] of the title (0: none); the index reads it, the event
    /// does not carry it.
    pub title: u32,
    pub b: BSketch,
    pub c: SimHash,
    pub body_bytes: u64,
    pub text_bytes: u64,
    pub tokens: u64,
    pub charset: Cow<'static, str>,
    pub tokens_truncated: bool,
    pub chunks: Vec<u32>,
    /// Chunks the signer's cap left out ([`crate::signer::ListCaps`]).
    pub chunks_omitted: u32,
    /// All of them: the event carries the smallest [`crate::signer::ListCaps::paragraphs`].
    pub paragraphs: Vec<u64>,
    pub short_page: bool,
    pub rp: Vec<f32>,
    /// The out-links, concatenated; each ends at its entry of `link_ends`.
    pub links: String,
    pub link_ends: Vec<usize>,
    /// Out-links left out by the cap on their bytes.
    pub links_omitted: u32,
}

impl SignedParts {
    /// The out-links, in document order.
    pub fn links(&self) -> impl Iterator<Item = &str> + '_ {
        let starts = std::iter::once(0).chain(self.link_ends.iter().copied());
        starts.zip(&self.link_ends).map(|(a, &b)| &self.links[a..b])
    }

    /// The random projection as the signature event states it (rounded to 6 decimals).
    pub fn rp_rounded(&self) -> impl Iterator<Item = f64> + '_ {
        self.rp.iter().map(|&x| (f64::from(x) * 1e6).round() / 1e6)
    }

    /// About how many bytes it holds, its heap parts included (for the sign cache's budget).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.chunks.capacity() * std::mem::size_of::<u32>()
            + self.paragraphs.capacity() * std::mem::size_of::<u64>()
            + self.rp.capacity() * std::mem::size_of::<f32>()
            + self.links.capacity()
            + self.link_ends.capacity() * std::mem::size_of::<usize>()
    }
}

/// What signing a page gives, before the window's history adds its change since the last fetch.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Signed {
    pub parts: Arc<SignedParts>,
    /// The signature event's `content` object.
    #[serde(with = "raw_json")]
    pub content: Box<RawValue>,
    pub sketch: near::Sketch,
}

impl Signed {
    /// The signatures of `parts`, the 84 min-values in the event's `content` if
    /// `emit_minvalues`, and at most `max_paragraphs` paragraph fingerprints.
    pub fn new(parts: Arc<SignedParts>, emit_minvalues: bool, max_paragraphs: usize) -> Self {
        let content = serde_json::value::to_raw_value(&Content {
            parts: &parts,
            emit_minvalues,
            max_paragraphs,
        })
        .expect("numbers and strings serialize");
        let p = &*parts;
        let sketch = near::Sketch::new(p.checksum, p.text_hash, p.title, &p.b, &p.c);
        Signed {
            parts,
            content,
            sketch,
        }
    }
}

/// A JSON value carried as its text inside a binary record.
mod raw_json {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::value::RawValue;

    pub fn serialize<S: Serializer>(v: &RawValue, s: S) -> Result<S::Ok, S::Error> {
        v.get().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Box<RawValue>, D::Error> {
        RawValue::from_string(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// The signature event's `content` object of a page: serializes as the
/// [`neardup_schemas::ContentSignatures`] of the same signatures does.
struct Content<'a> {
    parts: &'a SignedParts,
    emit_minvalues: bool,
    max_paragraphs: usize,
}

impl Serialize for Content<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.parts;
        // The fields of ContentSignatures, in its order, skipped where it skips them.
        let mut st = s.serialize_struct("ContentSignatures", 20)?;
        st.serialize_field("checksum", &Hex(p.checksum, 32))?;
        st.serialize_field("text_hash", &Hex(p.text_hash, 32))?;
        st.serialize_field("body_bytes", &p.body_bytes)?;
        st.serialize_field("text_bytes", &p.text_bytes)?;
        st.serialize_field("tokens", &p.tokens)?;
        st.serialize_field("charset", &p.charset)?;
        match p.tokens_truncated {
            true => st.serialize_field("tokens_truncated", &true)?,
            false => st.skip_field("tokens_truncated")?,
        }
        st.serialize_field("shingles", &p.b.shingles)?;
        st.serialize_field("supershingles", &HexSeq(&p.b.supershingles, 16))?;
        match self.emit_minvalues {
            true => st.serialize_field("minvalues", &HexSeq(&p.b.minvalues, 16))?,
            false => st.skip_field("minvalues")?,
        }
        st.serialize_field("simhash", &SimHashHex(&p.c))?;
        st.serialize_field("chunks", &HexSeq(&p.chunks, 8))?;
        omitted(&mut st, "chunks_omitted", p.chunks_omitted)?;
        let (paragraphs, rest) = p
            .paragraphs
            .split_at(p.paragraphs.len().min(self.max_paragraphs));
        st.serialize_field("paragraphs", &HexSeq(paragraphs, 16))?;
        let rest = u32::try_from(rest.len()).unwrap_or(u32::MAX);
        omitted(&mut st, "paragraphs_omitted", rest)?;
        st.serialize_field("short_page", &p.short_page)?;
        st.serialize_field("rp", &Seq(|| p.rp_rounded()))?;
        st.serialize_field("out_links", &Seq(|| p.links()))?;
        omitted(&mut st, "out_links_omitted", p.links_omitted)?;
        st.end()
    }
}

/// A count of a list's items left out, stated only when some were.
fn omitted<S: SerializeStruct>(st: &mut S, name: &'static str, n: u32) -> Result<(), S::Error> {
    match n {
        0 => st.skip_field(name),
        n => st.serialize_field(name, &n),
    }
}

/// `v` as its last `digits` (at most 32) lower-case hex digits, zero-padded.
struct Hex(u128, usize);

impl Hex {
    fn write<'b>(&self, buf: &'b mut [u8; 32]) -> &'b str {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let out = &mut buf[..self.1];
        for (i, d) in out.iter_mut().rev().enumerate() {
            *d = DIGITS[((self.0 >> (4 * i)) & 0xf) as usize];
        }
        std::str::from_utf8(out).expect("hex digits are ASCII")
    }
}

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.write(&mut [0; 32]))
    }
}

/// Numbers as an array of hex strings of `digits` digits each.
struct HexSeq<'a, T>(&'a [T], usize);

impl<T: Copy + Into<u128>> Serialize for HexSeq<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|&v| Hex(v.into(), self.1)))
    }
}

/// The 384-bit simhash as 96 hex digits, word 0 first.
struct SimHashHex<'a>(&'a SimHash);

impl Serialize for SimHashHex<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = [0u8; 96];
        for (w, chunk) in self.0 .0.iter().zip(out.chunks_mut(16)) {
            chunk.copy_from_slice(Hex(u128::from(*w), 16).write(&mut [0; 32]).as_bytes());
        }
        s.serialize_str(std::str::from_utf8(&out).expect("hex digits are ASCII"))
    }
}

/// An iterator's items as an array (the iterator is made afresh for each serialization).
struct Seq<F>(F);

impl<F, I> Serialize for Seq<F>
where
    F: Fn() -> I,
    I: Iterator,
    I::Item: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_schemas::ContentSignatures;
    use proptest::prelude::*;

    /// The event's `content` as the schemas crate's type: the reference for [`Content`].
    fn content_signatures(p: &SignedParts, emit_minvalues: bool, max: usize) -> ContentSignatures {
        let hex64 = |v: &u64| format!("{v:016x}");
        ContentSignatures {
            checksum: format!("{:032x}", p.checksum),
            text_hash: format!("{:032x}", p.text_hash),
            body_bytes: p.body_bytes,
            text_bytes: p.text_bytes,
            tokens: p.tokens,
            charset: p.charset.to_string(),
            tokens_truncated: p.tokens_truncated,
            shingles: p.b.shingles,
            supershingles: p.b.supershingles.iter().map(hex64).collect(),
            minvalues: emit_minvalues.then(|| p.b.minvalues.iter().map(hex64).collect()),
            simhash: p.c.0.iter().map(hex64).collect(),
            chunks: p.chunks.iter().map(|c| format!("{c:08x}")).collect(),
            chunks_omitted: p.chunks_omitted,
            paragraphs: p.paragraphs.iter().take(max).map(hex64).collect(),
            paragraphs_omitted: p.paragraphs.len().saturating_sub(max) as u32,
            short_page: p.short_page,
            rp: p
                .rp
                .iter()
                .map(|&x| (f64::from(x) * 1e6).round() / 1e6)
                .collect(),
            out_links: p.links().map(str::to_owned).collect(),
            out_links_omitted: p.links_omitted,
        }
    }

    prop_compose! {
        fn arb_parts()(
            checksum in any::<u128>(), text_hash in any::<u128>(), title in any::<u32>(),
            mins in proptest::collection::vec(any::<u64>(), 84), shingles in any::<u32>(),
            c in any::<[u64; 6]>(), sizes in any::<(u64, u64, u64)>(),
            charset in proptest::sample::select(vec!["UTF-8", "windows-1252", "Shift_JIS"]),
            truncated in any::<bool>(), short in any::<bool>(),
            chunks in proptest::collection::vec(any::<u32>(), 0..20),
            paragraphs in proptest::collection::vec(any::<u64>(), 0..20),
            rp in proptest::collection::vec(prop_oneof![0.0f32..1.0, Just(0.0), Just(1.0), Just(0.1234565)], 0..8),
            links in proptest::collection::vec("\\PC{0,30}", 0..8),
            omitted in proptest::array::uniform2(prop_oneof![Just(0u32), any::<u32>()]),
        ) -> SignedParts {
            let mut b = crate::sketch::minhash::BSketch {
                minvalues: [0; 84],
                supershingles: [0; 6],
                shingles,
            };
            b.minvalues.copy_from_slice(&mins);
            b.supershingles.copy_from_slice(&mins[..6]);
            let mut link_ends = Vec::new();
            let mut all = String::new();
            for l in &links {
                all.push_str(l);
                link_ends.push(all.len());
            }
            SignedParts {
                checksum, text_hash, title, b, c: SimHash(c),
                body_bytes: sizes.0, text_bytes: sizes.1, tokens: sizes.2,
                charset: Cow::Borrowed(charset), tokens_truncated: truncated,
                chunks, chunks_omitted: omitted[0], paragraphs,
                short_page: short, rp, links: all, link_ends, links_omitted: omitted[1],
            }
        }
    }

    proptest! {
        /// The `content` written from the numbers is the JSON of the schemas crate's type, and
        /// the links come back as they went in.
        #[test]
        fn content_is_the_json_of_content_signatures(
            p in arb_parts(),
            emit in any::<bool>(),
            max in prop_oneof![0usize..25, Just(usize::MAX)],
        ) {
            let signed = Signed::new(Arc::new(p.clone()), emit, max);
            let want = serde_json::to_string(&content_signatures(&p, emit, max)).unwrap();
            prop_assert_eq!(signed.content.get(), want);
            // And the binary form of the sign stage's records keeps all of it.
            let back: Signed = postcard::from_bytes(&postcard::to_stdvec(&signed).unwrap()).unwrap();
            prop_assert_eq!(back.content.get(), signed.content.get());
            prop_assert_eq!(back.sketch, signed.sketch);
            prop_assert_eq!(format!("{:?}", back.parts), format!("{:?}", p));
        }
    }
}
