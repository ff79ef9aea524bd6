//! A page's signatures between signing and the signature event: what the sign cache keeps and
//! the topology reads ([`SignedParts`]), with the signature event's `content` object already
//! written as JSON, and what a preparing thread hands to the topology ([`Signed`]).
//!
//! The `content` object is written once, when the page is signed, straight from the numbers
//! (without building a [`neardup_schemas::ContentSignatures`] of some 200 small strings, hex
//! digits and links, first), on a preparing thread; a page the sign cache knows reuses it. The
//! JSON is exactly what serializing the `ContentSignatures` gives (a property test holds the
//! two equal), so event ids do not change. The out-links are read back from it.

use std::sync::Arc;

use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::near;
use crate::sketch::minhash::BSketch;
use crate::sketch::simhash::SimHash;

/// What signing a page gives, as the signature event's `content` states it.
pub(crate) struct Signatures<'a> {
    pub checksum: u128,
    pub text_hash: u128,
    pub b: BSketch,
    pub c: SimHash,
    pub body_bytes: u64,
    pub text_bytes: u64,
    pub tokens: u64,
    pub charset: &'a str,
    pub tokens_truncated: bool,
    pub chunks: &'a [u32],
    pub paragraphs: &'a [u64],
    pub short_page: bool,
    pub rp: &'a [f32],
    /// The out-links, in document order.
    pub links: &'a [&'a str],
}

/// A page's signatures as the sign cache keeps them and the topology reads them: the numbers
/// the topology uses, and the signature event's `content` object as JSON.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct SignedParts {
    pub checksum: u128,
    pub text_hash: u128,
    pub b: BSketch,
    pub c: SimHash,
    pub paragraphs: Vec<u64>,
    pub short_page: bool,
    pub rp: Vec<f32>,
    /// The signature event's `content` object.
    #[serde(with = "raw_json")]
    pub content: Box<RawValue>,
    /// Where `content`'s `out_links` array starts (it is the last field).
    links_at: usize,
    /// The out-links, when one of them is escaped in the JSON (never, for URLs as neardup
    /// resolves them: they are percent-encoded); else they are read from `content`.
    escaped_links: Option<Vec<String>>,
}

impl SignedParts {
    /// The signatures `s`, with the 84 min-values in `content` if `emit_minvalues`.
    pub fn new(s: Signatures<'_>, emit_minvalues: bool) -> Self {
        let links = serde_json::to_string(s.links).expect("strings serialize");
        let escaped_links = links
            .contains('\\')
            .then(|| s.links.iter().map(|&l| l.to_owned()).collect());
        let links = RawValue::from_string(links).expect("serde_json wrote it");
        let content = serde_json::value::to_raw_value(&Content {
            s: &s,
            links: &links,
            emit_minvalues,
        })
        .expect("numbers and strings serialize");
        SignedParts {
            checksum: s.checksum,
            text_hash: s.text_hash,
            b: s.b,
            c: s.c,
            paragraphs: s.paragraphs.to_vec(),
            short_page: s.short_page,
            rp: s.rp.to_vec(),
            links_at: content.get().len() - 1 - links.get().len(),
            content,
            escaped_links,
        }
    }

    /// The out-links, in document order.
    pub fn links(&self) -> impl Iterator<Item = &str> + '_ {
        let (escaped, plain) = match &self.escaped_links {
            Some(l) => (Some(l), None),
            None => {
                // `["a","b"]` without a backslash: no quote inside a link.
                let array = &self.content.get()[self.links_at..self.content.get().len() - 1];
                let inner = &array[1..array.len() - 1];
                let strings = inner.get(1..inner.len().saturating_sub(1)).unwrap_or("");
                (None, (!inner.is_empty()).then(|| strings.split("\",\"")))
            }
        };
        let escaped = escaped.into_iter().flatten().map(String::as_str);
        escaped.chain(plain.into_iter().flatten())
    }

    /// The random projection as the signature event states it (rounded to 6 decimals).
    pub fn rp_rounded(&self) -> impl Iterator<Item = f64> + '_ {
        rounded(&self.rp)
    }

    /// About how many bytes it holds, its heap parts included (for the sign cache's budget).
    pub fn heap_bytes(&self) -> usize {
        let escaped = self.escaped_links.as_ref().map_or(0, |l| {
            l.iter().map(|s| s.capacity() + 24).sum::<usize>() + l.capacity() * 24
        });
        std::mem::size_of::<Self>()
            + self.paragraphs.capacity() * std::mem::size_of::<u64>()
            + self.rp.capacity() * std::mem::size_of::<f32>()
            + self.content.get().len()
            + escaped
    }
}

fn rounded(rp: &[f32]) -> impl Iterator<Item = f64> + '_ {
    rp.iter().map(|&x| (f64::from(x) * 1e6).round() / 1e6)
}

/// What signing a page gives, before the window's history adds its change since the last fetch.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Signed {
    pub parts: Arc<SignedParts>,
    pub sketch: near::Sketch,
}

impl Signed {
    /// The signatures of `parts`, with the index's sketch of them.
    pub fn new(parts: Arc<SignedParts>) -> Self {
        let p = &*parts;
        let sketch = near::Sketch::new(p.checksum, p.text_hash, &p.b, &p.c);
        Signed { parts, sketch }
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
struct Content<'a, 's> {
    s: &'a Signatures<'s>,
    /// The `out_links` array, written already.
    links: &'a RawValue,
    emit_minvalues: bool,
}

impl Serialize for Content<'_, '_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let p = self.s;
        // The fields of ContentSignatures, in its order, skipped where it skips them.
        let mut st = ser.serialize_struct("ContentSignatures", 17)?;
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
        st.serialize_field("chunks", &HexSeq(p.chunks, 8))?;
        st.serialize_field("paragraphs", &HexSeq(p.paragraphs, 16))?;
        st.serialize_field("short_page", &p.short_page)?;
        st.serialize_field("rp", &Seq(|| rounded(p.rp)))?;
        // Last: SignedParts finds it by its length.
        st.serialize_field("out_links", self.links)?;
        st.end()
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
    fn content_signatures(s: &Signatures<'_>, emit_minvalues: bool) -> ContentSignatures {
        let hex64 = |v: &u64| format!("{v:016x}");
        ContentSignatures {
            checksum: format!("{:032x}", s.checksum),
            text_hash: format!("{:032x}", s.text_hash),
            body_bytes: s.body_bytes,
            text_bytes: s.text_bytes,
            tokens: s.tokens,
            charset: s.charset.to_string(),
            tokens_truncated: s.tokens_truncated,
            shingles: s.b.shingles,
            supershingles: s.b.supershingles.iter().map(hex64).collect(),
            minvalues: emit_minvalues.then(|| s.b.minvalues.iter().map(hex64).collect()),
            simhash: s.c.0.iter().map(hex64).collect(),
            chunks: s.chunks.iter().map(|c| format!("{c:08x}")).collect(),
            paragraphs: s.paragraphs.iter().map(hex64).collect(),
            short_page: s.short_page,
            rp: s
                .rp
                .iter()
                .map(|&x| (f64::from(x) * 1e6).round() / 1e6)
                .collect(),
            out_links: s.links.iter().map(|&l| l.to_owned()).collect(),
        }
    }

    type Input = (
        (u128, u128, Vec<u64>, u32, [u64; 6], (u64, u64, u64)),
        (&'static str, bool, bool, Vec<u32>, Vec<u64>, Vec<f32>),
        Vec<String>,
    );

    fn arb_input() -> impl Strategy<Value = Input> {
        (
            (
                any::<u128>(),
                any::<u128>(),
                proptest::collection::vec(any::<u64>(), 84),
                any::<u32>(),
                any::<[u64; 6]>(),
                any::<(u64, u64, u64)>(),
            ),
            (
                proptest::sample::select(vec!["UTF-8", "windows-1252", "Shift_JIS"]),
                any::<bool>(),
                any::<bool>(),
                proptest::collection::vec(any::<u32>(), 0..20),
                proptest::collection::vec(any::<u64>(), 0..20),
                proptest::collection::vec(
                    prop_oneof![0.0f32..1.0, Just(0.0), Just(1.0), Just(0.1234565)],
                    0..8,
                ),
            ),
            // Links as neardup resolves them, and any strings at all (quotes, backslashes,
            // control characters, `","`).
            prop_oneof![
                proptest::collection::vec("http://[a-z.]{1,12}/[a-z/%0-9]{0,20}", 0..8),
                proptest::collection::vec(
                    prop_oneof!["\\PC{0,30}", Just("\",\"".to_owned()), Just(String::new())],
                    0..8
                ),
            ],
        )
    }

    proptest! {
        /// The `content` written from the numbers is the JSON of the schemas crate's type, the
        /// links come back as they went in, and the sign stage's binary records keep it all.
        #[test]
        fn content_is_the_json_of_content_signatures(input in arb_input(), emit in any::<bool>()) {
            let ((checksum, text_hash, mins, shingles, c, sizes), (charset, truncated, short, chunks, paragraphs, rp), links) = input;
            let mut b = BSketch { minvalues: [0; 84], supershingles: [0; 6], shingles };
            b.minvalues.copy_from_slice(&mins);
            b.supershingles.copy_from_slice(&mins[..6]);
            let link_refs: Vec<&str> = links.iter().map(String::as_str).collect();
            let sig = Signatures {
                checksum, text_hash, b, c: SimHash(c),
                body_bytes: sizes.0, text_bytes: sizes.1, tokens: sizes.2,
                charset, tokens_truncated: truncated,
                chunks: &chunks, paragraphs: &paragraphs, short_page: short, rp: &rp, links: &link_refs,
            };
            let want = content_signatures(&sig, emit);
            let parts = SignedParts::new(sig, emit);
            prop_assert_eq!(parts.content.get(), serde_json::to_string(&want).unwrap());
            prop_assert_eq!(parts.links().collect::<Vec<_>>(), links.iter().map(String::as_str).collect::<Vec<_>>());
            let signed = Signed::new(Arc::new(parts));
            let back: Signed = postcard::from_bytes(&postcard::to_stdvec(&signed).unwrap()).unwrap();
            prop_assert_eq!(back.parts.content.get(), signed.parts.content.get());
            prop_assert_eq!(back.sketch, signed.sketch);
            prop_assert_eq!(back.parts.links().collect::<Vec<_>>(), signed.parts.links().collect::<Vec<_>>());
        }
    }
}
