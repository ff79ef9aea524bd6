//! A page's signatures between signing and the signature event: the compact form the sign
//! cache keeps ([`SignedParts`]), and what a preparing thread hands to the topology
//! ([`Signed`]), with the signature event's `content` object already written as JSON.
//!
//! The `content` object is written straight from the numbers, without building a
//! [`ContentSignatures`] of some 200 small strings (hex digits, links) first, and on the
//! preparing threads rather than the one thread that applies pages in order. The JSON is
//! exactly what serializing the [`ContentSignatures`] gives (a property test holds the two
//! equal), so event ids do not change. It is written by hand rather than through serde (whose
//! writer checks every byte of every hex digit and link for escapes, one at a time: 6 % of
//! `neardup run`'s CPU time on the bench's medium crawl), and the signature event takes it in
//! as it is ([`crate::emit::Emitter::emit_signature`]) instead of parsing it again.

use std::borrow::Cow;
use std::sync::Arc;

use serde::ser::Serializer;
use serde::Serialize;

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
    pub content: ContentJson,
    pub sketch: near::Sketch,
}

impl Signed {
    /// The signatures of `parts`, the 84 min-values in the event's `content` if
    /// `emit_minvalues`, and at most `max_paragraphs` paragraph fingerprints.
    pub fn new(parts: Arc<SignedParts>, emit_minvalues: bool, max_paragraphs: usize) -> Self {
        let content = ContentJson::new(&parts, emit_minvalues, max_paragraphs);
        let p = &*parts;
        let sketch = near::Sketch::new(p.checksum, p.text_hash, p.title, &p.b, &p.c);
        Signed {
            parts,
            content,
            sketch,
        }
    }
}

/// The signature event's `content` object of a page, as JSON text: what serializing the
/// [`neardup_schemas::ContentSignatures`] of the same signatures gives, written straight from
/// the numbers. A record of the sign stage carries it as a string, checked to be JSON when read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContentJson(Box<str>);

impl ContentJson {
    /// The JSON text.
    pub fn get(&self) -> &str {
        &self.0
    }

    /// The `content` of the signatures `p`.
    fn new(p: &SignedParts, emit_minvalues: bool, max_paragraphs: usize) -> Self {
        let (paragraphs, rest) = p
            .paragraphs
            .split_at(p.paragraphs.len().min(max_paragraphs));
        let mut w = Json(Vec::with_capacity(
            640 + p.links.len()
                + 3 * p.link_ends.len()
                + 11 * p.chunks.len()
                + 19 * paragraphs.len()
                + if emit_minvalues { 19 * 84 } else { 0 },
        ));
        // The fields of ContentSignatures, in its order, skipped where it skips them.
        w.field("checksum");
        w.hex128(p.checksum);
        w.field("text_hash");
        w.hex128(p.text_hash);
        w.field("body_bytes");
        w.value(&p.body_bytes);
        w.field("text_bytes");
        w.value(&p.text_bytes);
        w.field("tokens");
        w.value(&p.tokens);
        w.field("charset");
        w.value(&p.charset);
        if p.tokens_truncated {
            w.field("tokens_truncated");
            w.0.extend_from_slice(b"true");
        }
        w.field("shingles");
        w.value(&p.b.shingles);
        w.field("supershingles");
        w.hexes(&p.b.supershingles, 16);
        if emit_minvalues {
            w.field("minvalues");
            w.hexes(&p.b.minvalues, 16);
        }
        w.field("simhash");
        w.0.push(b'"');
        for &word in &p.c.0 {
            w.hex_digits(word, 16);
        }
        w.0.push(b'"');
        w.field("chunks");
        w.hexes(&p.chunks, 8);
        w.omitted("chunks_omitted", p.chunks_omitted);
        w.field("paragraphs");
        w.hexes(paragraphs, 16);
        w.omitted(
            "paragraphs_omitted",
            u32::try_from(rest.len()).unwrap_or(u32::MAX),
        );
        w.field("short_page");
        w.value(&p.short_page);
        w.field("rp");
        w.list(p.rp_rounded(), |w, x| w.value(&x));
        w.field("out_links");
        w.list(p.links(), Json::string);
        w.omitted("out_links_omitted", p.links_omitted);
        w.0.push(b'}');
        let text = String::from_utf8(w.0).expect("JSON written from strings and digits");
        ContentJson(text.into_boxed_str())
    }
}

impl Serialize for ContentJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for ContentJson {
    /// A string holding one JSON value (it is written into signature events as it is).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        serde_json::from_str::<serde::de::IgnoredAny>(&text).map_err(serde::de::Error::custom)?;
        Ok(ContentJson(text.into_boxed_str()))
    }
}

/// A JSON object being written (its opening brace comes with its first field).
struct Json(Vec<u8>);

impl Json {
    /// The name of the next field, after a comma unless it is the first.
    fn field(&mut self, name: &str) {
        match self.0.is_empty() {
            true => self.0.push(b'{'),
            false => self.0.push(b','),
        }
        self.0.push(b'"');
        self.0.extend_from_slice(name.as_bytes());
        self.0.extend_from_slice(b"\":");
    }

    /// A count of a list's items left out, stated only when some were.
    fn omitted(&mut self, name: &str, n: u32) {
        if n > 0 {
            self.field(name);
            self.value(&n);
        }
    }

    /// A number, a bool or a string, as serde_json writes it.
    fn value<T: Serialize + ?Sized>(&mut self, v: &T) {
        serde_json::to_writer(&mut self.0, v).expect("numbers and strings serialize");
    }

    /// A string as serde_json writes it: most (the URLs of links) need no escape and are copied.
    fn string(&mut self, s: &str) {
        // Without an early exit, the check runs on many bytes at once.
        let plain = !s.bytes().fold(false, |esc, b| {
            esc | (b < 0x20) | (b == b'"') | (b == b'\\')
        });
        if plain {
            self.0.push(b'"');
            self.0.extend_from_slice(s.as_bytes());
            self.0.push(b'"');
        } else {
            self.value(s);
        }
    }

    /// The items of `items` as an array, each written by `write`.
    fn list<T>(&mut self, items: impl Iterator<Item = T>, write: impl Fn(&mut Self, T)) {
        self.0.push(b'[');
        for (i, item) in items.enumerate() {
            if i > 0 {
                self.0.push(b',');
            }
            write(self, item);
        }
        self.0.push(b']');
    }

    /// The last `digits` (at most 16) lower-case hex digits of `v`, zero-padded.
    fn hex_digits(&mut self, v: u64, digits: usize) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut buf = [0u8; 16];
        for (i, d) in buf.iter_mut().enumerate() {
            *d = DIGITS[((v >> (60 - 4 * i)) & 0xf) as usize];
        }
        self.0.extend_from_slice(&buf[16 - digits..]);
    }

    /// `v` as a string of 32 hex digits.
    fn hex128(&mut self, v: u128) {
        self.0.push(b'"');
        self.0.extend_from_slice(&neardup_schemas::hex32(v));
        self.0.push(b'"');
    }

    /// Numbers as an array of strings of `digits` hex digits each.
    fn hexes<T: Copy + Into<u64>>(&mut self, vs: &[T], digits: usize) {
        self.list(vs.iter(), |w, &v| {
            w.0.push(b'"');
            w.hex_digits(v.into(), digits);
            w.0.push(b'"');
        });
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
            // Links that need no escape, and some that do (quotes, backslashes, controls).
            links in proptest::collection::vec(
                prop_oneof!["\\PC{0,30}", "[a-z/\"\\\\\\x00-\\x1f\\x7f]{0,12}"], 0..8),
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

        /// A signature event emitted with its content as JSON text is the record of the same
        /// event with that content parsed, whichever fields it has.
        #[test]
        fn a_signature_event_with_its_content_as_text_is_the_record_of_the_event(
            p in proptest::option::of(arb_parts()),
            url in prop_oneof!["\\PC{0,20}", "[a-z\"\\\\]{0,8}"],
            crawl_id in proptest::option::of("\\PC{0,8}"),
            change in proptest::option::of((any::<u8>(), any::<bool>(), any::<bool>())),
            status in any::<u16>(),
        ) {
            let signed = p.map(|p| Signed::new(Arc::new(p), false, 10));
            let event = |content| signature_event(content, &url, &crawl_id, change, status);
            let mut fast = crate::emit::Emitter::new();
            fast.emit_signature(event(None), signed.as_ref().map(|s| &s.content));
            let mut slow = crate::emit::Emitter::new();
            let raw = signed.as_ref().map(|s| {
                serde_json::value::RawValue::from_string(s.content.get().to_owned()).unwrap()
            });
            slow.emit(signature_event(raw, &url, &crawl_id, change, status));
            prop_assert_eq!(fast.records(), slow.records());
        }
    }

    /// A signature event of these fields, its id not yet sealed.
    fn signature_event<C>(
        content: Option<C>,
        url: &str,
        crawl_id: &Option<String>,
        change: Option<(u8, bool, bool)>,
        status: u16,
    ) -> neardup_schemas::SignatureEvent<C> {
        neardup_schemas::SignatureEvent {
            schema: neardup_schemas::OutputKind::Signatures.schema().into(),
            event_id: "not sealed yet".into(),
            url: url.into(),
            fetched_at: "2026-11-30T19:00:00Z".into(),
            crawl_id: crawl_id.clone(),
            status,
            params: "b84-c384".into(),
            content,
            change: change.map(|(agreeing, same_checksum, same_text)| {
                neardup_schemas::ChangeSinceLast {
                    previous_fetched_at: "2026-11-23T19:00:00Z".into(),
                    agreeing_minvalues: agreeing,
                    same_checksum,
                    same_text,
                    bucket: neardup_schemas::ChangeBucket::Large,
                }
            }),
        }
    }

    /// A record of the sign stage whose content is not JSON is refused, not published.
    #[test]
    fn content_read_back_must_be_json() {
        let read =
            |text: &str| postcard::from_bytes::<ContentJson>(&postcard::to_stdvec(text).unwrap());
        assert_eq!(read(r#"{"a":[1,"b"]}"#).unwrap().get(), r#"{"a":[1,"b"]}"#);
        for bad in [r#"{"a":"#, "{} {}", "", r#"{"a":"\x"}"#] {
            assert!(read(bad).is_err(), "{bad:?} is not JSON");
        }
    }
}
