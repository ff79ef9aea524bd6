//! Signing one page: every signature of the five seed papers from a single pass over its HTML.
//!
//! Visible text, out-links and `<img>` terms come from one linear scan ([`crate::text::extract`]);
//! the terms are hashed once into term fingerprints, from which Alg. B (min-values,
//! supershingles), Alg. C (simhash), the normalised-text hash and Di Iorio's RP signature are
//! computed; Cho's chunks and Pereira's paragraphs are taken from the same text. All buffers live
//! in the [`Signer`] and are reused, so signing allocates nothing once warm except the out-link
//! strings.

use crate::sketch::bag::TermBag;
use crate::sketch::chunks::{self, ChunkParams};
use crate::sketch::minhash::{self, BSketch, MinHasher, Profile};
use crate::sketch::paragraphs::{self, ParagraphInfo};
use crate::sketch::rp::{self, RpParams};
use crate::sketch::simhash::{self, SimHash, SimHasher};
use crate::text::{self, Extraction};

/// Parameters of every signature. Changing any of them changes [`SignerConfig::describe`] and so
/// the parameter fingerprint every signature event carries.
#[derive(Debug, Clone, PartialEq)]
pub struct SignerConfig {
    /// Alg. B shingling profile (`henzinger`: k = 8, no wrap; `fmn`: k = 5, wrap-around).
    pub profile: Profile,
    /// Cho's chunking (lines per chunk, wrap width, threshold T).
    pub chunks: ChunkParams,
    /// Di Iorio's random projection (K, seed, tolerances).
    pub rp: RpParams,
    /// Terms beyond this many are ignored (pathological pages stay linear and bounded).
    pub max_terms: usize,
    /// The page's lists that grow with it, capped so that its signature event (and the split
    /// stages' records) stays under the smallest output limit accepted: see [`ListCaps`].
    pub caps: ListCaps,
}

/// Caps on the signature lists that grow with a page. A 5 MiB page of short lines has some
/// 40,000 chunks, a directory page tens of thousands of out-links: uncapped, its signature
/// event would pass any producer's limit and reach the dead-letter topic instead. With the
/// defaults the three lists take at most 331,776 bytes of JSON (163,840 + 8,192 x 11 +
/// 4,096 x 19), the rest of the event a few kilobytes and its URL: under the 512 KiB that
/// `max_output_bytes` may be lowered to, even in the sign stage's record, which carries the
/// out-links a second time when collections or the in-link ranking read them. Each list
/// states how much of it was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListCaps {
    /// Out-links are kept, in document order, while their JSON (each link, its quotes and a
    /// comma) takes at most this many bytes. A page over it loses its repeated links first
    /// (each stays where it first occurs: what neardup reads of links is the set a page links
    /// to), then the distinct links past the budget; the rest are counted, not kept.
    pub link_bytes: usize,
    /// Cho's chunks: only the smallest this many fingerprints are kept. The smallest k of a
    /// set are a consistent sample of it (bottom-k): two pages' samples still estimate their
    /// overlap.
    pub chunks: usize,
    /// Pereira's paragraphs: the signature event carries only the smallest this many
    /// fingerprints (repeats counted). The replay's paragraph figures, which need them all
    /// and run in one process, read the whole list.
    pub paragraphs: usize,
}

impl Default for ListCaps {
    fn default() -> Self {
        ListCaps {
            link_bytes: 160 * 1024,
            chunks: 8192,
            paragraphs: 4096,
        }
    }
}

impl ListCaps {
    /// The links of `links` (in document order) that the cap keeps and how many it leaves
    /// out; `None` when it keeps them all.
    pub fn keep_links<'a, I>(&self, links: I) -> Option<(Vec<&'a str>, usize)>
    where
        I: Iterator<Item = &'a str> + Clone,
    {
        if links.clone().map(Self::link_cost).sum::<usize>() <= self.link_bytes {
            return None;
        }
        let total = links.clone().count();
        let mut seen = std::collections::HashSet::new();
        let mut budget = self.link_bytes;
        let mut kept = Vec::new();
        for l in links {
            if !seen.insert(l) {
                continue;
            }
            match budget.checked_sub(Self::link_cost(l)) {
                Some(rest) => budget = rest,
                None => break,
            }
            kept.push(l);
        }
        let omitted = total - kept.len();
        Some((kept, omitted))
    }

    /// What a link takes of [`ListCaps::link_bytes`]: at most its JSON string and a comma. A
    /// resolved link percent-encodes almost every character JSON escapes; a backslash in a query
    /// is one it keeps. (The cluster events' URL lists are measured with it too.)
    pub fn link_cost(link: &str) -> usize {
        let escapes: usize = link
            .bytes()
            .map(|b| match b {
                b'"' | b'\\' => 1,
                0..=0x1f => 5,
                _ => 0,
            })
            .sum();
        link.len() + 3 + escapes
    }
}

impl Default for SignerConfig {
    fn default() -> Self {
        SignerConfig {
            profile: Profile::HENZINGER,
            chunks: ChunkParams::default(),
            rp: RpParams::default(),
            max_terms: 1_000_000,
            caps: ListCaps::default(),
        }
    }
}

impl SignerConfig {
    /// Everything the signatures depend on, in words: hashed into the parameter fingerprint.
    pub fn describe(&self) -> String {
        format!(
            "tokenizer=v{};text/plain=as text;text_hash=xxh3-128(terms joined by ' ');{};{};chunks={:?};paragraphs=pereira(150,3,450,seed {:#x});rp={:?};max_terms={};lists=links<={}B(repeats cut first),chunks<={},paragraphs<={}",
            crate::TOKENIZER_VERSION,
            minhash::describe(&self.profile),
            simhash::describe(),
            self.chunks,
            paragraphs::PARAGRAPH_SEED,
            self.rp,
            self.max_terms,
            self.caps.link_bytes,
            self.caps.chunks,
            self.caps.paragraphs
        )
    }
}

/// The signatures of one page, valid until the next call to [`Signer::sign`].
#[derive(Debug, Default, Clone)]
pub struct PageSignature {
    /// XXH3-128 of the normalised term sequence.
    pub text_hash: u128,
    /// [`text::title_hash`] of the page's title (0: none).
    pub title: u32,
    /// Terms counted (up to `max_terms`).
    pub tokens: u64,
    /// True when the page had more terms than `max_terms`.
    pub truncated: bool,
    /// Alg. B: min-values and supershingles.
    pub b: BSketch,
    /// Alg. C: the 384-bit simhash.
    pub c: SimHash,
    /// Cho: sorted, distinct 32-bit chunk fingerprints, the smallest [`ListCaps::chunks`].
    pub chunks: Vec<u32>,
    /// Chunk fingerprints left out of `chunks` by the cap.
    pub chunks_omitted: u32,
    /// Pereira: sorted 64-bit shingle-paragraph fingerprints, all of them (the signature event
    /// carries the smallest [`ListCaps::paragraphs`]).
    pub paragraphs: Vec<u64>,
    /// Pereira: sizes, and the under-450-characters flag.
    pub paragraph_info: ParagraphInfo,
    /// Di Iorio: the K-dimensional random projection of the bag of words.
    pub rp: Vec<f32>,
    /// Visible text and out-links.
    pub extraction: Extraction,
}

/// Signs pages, reusing its buffers.
#[derive(Debug)]
pub struct Signer {
    cfg: SignerConfig,
    minhasher: MinHasher,
    simhasher: SimHasher,
    term: String,
    term_fps: Vec<u64>,
    bag: TermBag,
    /// The page's terms as Cho's chunker lays them out (see [`chunks::Chunker`]).
    chunk: Vec<u8>,
    sig: PageSignature,
}

impl Signer {
    /// A signer with the given parameters.
    pub fn new(cfg: SignerConfig) -> Self {
        Signer {
            minhasher: MinHasher::new(cfg.profile),
            simhasher: SimHasher::new(),
            cfg,
            term: String::new(),
            term_fps: Vec::new(),
            bag: TermBag::new(),
            chunk: Vec::new(),
            sig: PageSignature::default(),
        }
    }

    /// The parameters.
    pub fn config(&self) -> &SignerConfig {
        &self.cfg
    }

    /// Signs the page whose decoded HTML is `html`, fetched from `page` (used to resolve links
    /// and to tell on-host images from off-host ones).
    pub fn sign(&mut self, html: &str, page: Option<&url::Url>) -> &PageSignature {
        text::extract(html, page, &mut self.sig.extraction);
        self.sign_extracted()
    }

    /// Signs a page served as plain text (`text/plain`: a text file, a WET file's extracted
    /// text), read as text ([`text::extract_plain`]): its lines are lines, its `<` and `&`
    /// characters; it has no title and no links.
    pub fn sign_plain(&mut self, plain: &str) -> &PageSignature {
        text::extract_plain(plain, &mut self.sig.extraction);
        self.sign_extracted()
    }

    /// Signs the extraction in `self.sig`.
    fn sign_extracted(&mut self) -> &PageSignature {
        let sig = &mut self.sig;
        self.term_fps.clear();
        let max = self.cfg.max_terms;
        let mut n = 0usize;
        let fps = &mut self.term_fps;
        // One tokenizing pass feeds the text hash, the term fingerprints and Cho's chunker.
        let mut chunker = chunks::Chunker::new(&self.cfg.chunks, &mut self.chunk, &mut sig.chunks);
        text::for_each_term_lines(&sig.extraction.text, &mut self.term, |t, new_line| {
            if n >= max {
                n += 1;
                return;
            }
            fps.push(minhash::term_fingerprint(t));
            if new_line {
                chunker.end_line();
            }
            chunker.term(t);
            n += 1;
        });
        chunker.finish();
        sig.chunks_omitted = cap(&mut sig.chunks, self.cfg.caps.chunks);
        // The chunker holds every term once; joined by single spaces they are the input of the
        // normalised-text hash (one XXH3 over a buffer, the same value as streaming the terms).
        sig.text_hash = xxhash_rust::xxh3::xxh3_128(chunks::joined_terms(&mut self.chunk));
        sig.title = text::title_hash(&sig.extraction, &mut self.term);
        sig.tokens = n.min(max) as u64;
        sig.truncated = n > max;
        self.minhasher.sketch(&self.term_fps, &mut sig.b);
        sig.c = self.simhasher.simhash(&self.term_fps);
        sig.paragraph_info =
            paragraphs::paragraph_fingerprints(&sig.extraction.text, &mut sig.paragraphs);
        // RP projects the bag of words, counted in a table (cheaper than sorting every token);
        // its sum is exact, so the terms need no order.
        self.bag.count(&self.term_fps);
        rp::rp_signature_of_bag(
            self.bag.entries().iter().copied(),
            &self.cfg.rp,
            &mut sig.rp,
        );
        &self.sig
    }
}

/// Keeps the first `max` of the sorted `list` (its smallest), returning how many went.
fn cap<T>(list: &mut Vec<T>, max: usize) -> u32 {
    let omitted = list.len().saturating_sub(max);
    list.truncate(max);
    u32::try_from(omitted).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_signs_as_the_page_of_its_lines() {
        let mut s = Signer::new(SignerConfig::default());
        let text = "Fish & chips <b>cost</b> 5 < 6 here.\nThe second line of the file.\nthird";
        let plain = s.sign_plain(text).clone();
        // The same text as HTML: escaped, each line a paragraph.
        let html = "<p>Fish &amp; chips &lt;b&gt;cost&lt;/b&gt; 5 &lt; 6 here.\
                    <p>The second line of the file.<p>third";
        let page = s.sign(html, None).clone();
        assert_eq!(plain.tokens, 15);
        assert_eq!(
            (
                plain.tokens,
                plain.text_hash,
                &plain.chunks,
                &plain.b.minvalues,
                plain.c
            ),
            (
                page.tokens,
                page.text_hash,
                &page.chunks,
                &page.b.minvalues,
                page.c
            )
        );
        assert_eq!(plain.title, 0);
        assert_eq!(plain.extraction.links().count(), 0);
        // The text misread as HTML loses what looks like markup.
        assert!(s.sign(text, None).tokens < 15);
    }

    #[test]
    fn one_pass_gives_every_signature() {
        let mut s = Signer::new(SignerConfig::default());
        let page = url::Url::parse("http://www.a.example/doc/x.html").unwrap();
        let html = "<html><body><h1>Title here</h1><p>".to_owned()
            + &"some words of a sentence. ".repeat(60)
            + "</p><a href=\"y.html\">y</a><img src=\"/i/pic.png\"></body></html>";
        let sig = s.sign(&html, Some(&page)).clone();
        assert_eq!(
            sig.extraction.links().collect::<Vec<_>>(),
            ["http://www.a.example/doc/y.html"]
        );
        assert!(sig.tokens > 300);
        assert!(!sig.chunks.is_empty());
        assert!(!sig.paragraphs.is_empty());
        assert!(!sig.paragraph_info.short);
        assert_eq!(sig.rp.len(), RpParams::default().k);
        // the chunks fed from the single term pass are those of the stand-alone function
        let mut alone = vec![];
        chunks::chunk_fingerprints_of_lines(
            &sig.extraction.text,
            &ChunkParams::default(),
            &mut chunks::ChunkScratch::default(),
            &mut alone,
        );
        assert_eq!(sig.chunks, alone);
        // signing the same page again gives the same signatures
        let again = s.sign(&html, Some(&page));
        assert_eq!(again.b.minvalues, sig.b.minvalues);
        assert_eq!(again.c.0, sig.c.0);
        assert_eq!(again.text_hash, sig.text_hash);
        // a page that differs in one word is very similar but not identical
        let other = html.replacen("Title", "Heading", 1);
        let o = s.sign(&other, Some(&page));
        assert_ne!(o.text_hash, sig.text_hash);
        assert!(minhash::agreeing_minvalues(&o.b, &sig.b) > 60);
        assert!(simhash::c_similarity(&o.c, &sig.c) > 360);
        // the page has no <title>; one gives a title hash, a signature of its own, the same for
        // the same title whatever its spacing or case
        assert_eq!(sig.title, 0);
        let titled = |t: &str| html.replacen("<html>", &format!("<html><title>{t}</title>"), 1);
        let t1 = s.sign(&titled("The  Manual"), Some(&page)).title;
        assert_ne!(t1, 0);
        assert_eq!(s.sign(&titled("the manual"), Some(&page)).title, t1);
        assert_ne!(s.sign(&titled("The Guide"), Some(&page)).title, t1);
    }

    #[test]
    fn the_cap_keeps_the_smallest_chunks_and_counts_the_rest() {
        // Many short lines (chunks) of many short sentences (paragraphs).
        let html: String = (0..400)
            .map(|i| {
                format!(
                    "<p>Line {i} says a thing. And {i} more. Then {}.</p>\n",
                    i * 7
                )
            })
            .collect();
        let whole = Signer::new(SignerConfig::default())
            .sign(&html, None)
            .clone();
        assert!(whole.chunks.len() > 100 && whole.paragraphs.len() > 100);
        assert_eq!(whole.chunks_omitted, 0);
        let caps = ListCaps {
            chunks: 10,
            paragraphs: 7,
            ..ListCaps::default()
        };
        let cfg = SignerConfig {
            caps,
            ..SignerConfig::default()
        };
        assert_ne!(cfg.describe(), SignerConfig::default().describe());
        let capped = Signer::new(cfg.clone()).sign(&html, None).clone();
        assert_eq!(capped.chunks, whole.chunks[..10]);
        assert_eq!(capped.chunks_omitted as usize, whole.chunks.len() - 10);
        // Nothing else changes: the paragraphs are capped in the event only (see `signed`).
        assert_eq!(
            (
                capped.text_hash,
                capped.b.minvalues,
                capped.c,
                &capped.rp,
                &capped.paragraphs
            ),
            (
                whole.text_hash,
                whole.b.minvalues,
                whole.c,
                &whole.rp,
                &whole.paragraphs
            )
        );
        // A list under its cap is whole.
        let small = Signer::new(cfg)
            .sign("<p>One. Two. Three.</p>", None)
            .clone();
        assert_eq!(small.chunks_omitted, 0);
    }

    #[test]
    fn the_cap_on_links_drops_repeats_first_then_the_tail() {
        let caps = ListCaps {
            link_bytes: 3 * ListCaps::link_cost("http://a.example/1"),
            ..ListCaps::default()
        };
        let links = |v: &[&'static str]| v.to_vec();
        let l = |i: u8| -> &'static str {
            [
                "http://a.example/1",
                "http://a.example/2",
                "http://a.example/3",
                "http://a.example/4",
            ][usize::from(i) - 1]
        };
        // Within the budget, repeats and all: nothing is cut.
        assert_eq!(
            caps.keep_links(links(&[l(1), l(2), l(1)]).into_iter()),
            None
        );
        // Over it: the repeats go first, and that is enough.
        let page = links(&[l(1), l(2), l(1), l(3), l(2)]);
        assert_eq!(
            caps.keep_links(page.into_iter()),
            Some((vec![l(1), l(2), l(3)], 2))
        );
        // Still over it: the distinct links past the budget go too, counted with the repeats.
        let page = links(&[l(1), l(1), l(2), l(3), l(4), l(1)]);
        assert_eq!(
            caps.keep_links(page.into_iter()),
            Some((vec![l(1), l(2), l(3)], 3))
        );
    }

    #[test]
    fn a_link_costs_its_json() {
        for link in [
            "http://a.example/x",
            "http://a.example/?q=a\\b\"c",
            "http://a.example/\u{1}",
        ] {
            // Its JSON string and a comma.
            let json = serde_json::to_string(link).unwrap() + ",";
            assert!(ListCaps::link_cost(link) >= json.len(), "{link:?}");
        }
        assert_eq!(ListCaps::link_cost("http://a.example/x"), 21);
    }

    #[test]
    fn max_terms_bounds_the_work() {
        let mut s = Signer::new(SignerConfig {
            max_terms: 10,
            ..SignerConfig::default()
        });
        let sig = s.sign(&"w ".repeat(100), None);
        assert_eq!(sig.tokens, 10);
        assert!(sig.truncated);
    }
}
