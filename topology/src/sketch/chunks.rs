//! Line-chunk fingerprints: Cho, Shivakumar, Garcia-Molina, *Finding replicated web collections*
//! (seed 003), §2.1 and §5.1.
//!
//! §2.1: "we first convert each page from its native format (e.g., HTML, PostScript) into simple
//! textual information using standard converters. The resulting page is then chunked into smaller
//! textual units (e.g., lines or sentences). Each textual chunk is then hashed down to a 32-bit
//! fingerprint. If two pages share more than some threshold T of chunks with identical
//! fingerprints, then the pages are said to be similar." §5.1 names the two chunkings evaluated and
//! their thresholds: "one fingerprint for every four lines of text, and ... one fingerprint for
//! every two lines of text ... The thresholds used were T = 15 and T = 25 for the "four line" and
//! "two line" fingerprints respectively."
//!
//! **T is an absolute count** of shared chunks, not a fraction: §3.2 computes similar pairs with
//! an iceberg query where "the threshold is the number of common chunks needed between similar
//! pages", and **the test is strict**: similar iff shared > T ("share more than some threshold T").
//! A consequence the paper accepts: a page with at most T chunks is similar to nothing.
//!
//! **What a line is.** The paper's converters (html2ascii, footnote 4) render a page as a terminal
//! would: block elements start new lines and paragraphs are word-wrapped. Our visible text
//! ([`crate::text`]) turns every tag into a space, which loses that structure, and the HTML
//! source's own newlines are layout accidents (a minified page is one line; a hand-wrapped
//! paragraph is many). So [`chunk_fingerprints`] takes the raw HTML and renders lines the way the
//! converter did:
//!
//! 1. a line break before every block-level tag, opening or closing (`p`, `div`, `br`, `li`, `tr`,
//!    `td`, `h1`–`h6`, `pre`, `table`, … — see `is_block`), while source newlines are plain
//!    white space, except inside `pre`/`listing`/`xmp`/`plaintext`/`textarea`, where they are line
//!    breaks;
//! 2. the visible text of that, by [`crate::text::visible_text`] (same markup, entity, script and
//!    comment rules as everywhere else);
//! 3. each block's terms ([`crate::text::for_each_term`]: lower-cased letter/digit runs, so case,
//!    punctuation and spacing do not matter), joined by single spaces and word-wrapped at
//!    [`ChunkParams::wrap_columns`] characters (default 80, a terminal's width; a term longer than
//!    that is a line by itself); lines without terms are skipped;
//! 4. every [`ChunkParams::lines_per_chunk`] consecutive lines of the page form one chunk, as in
//!    §5.1 (chunks run across block boundaries; the last chunk may be shorter).
//!
//! Text already split into lines can be chunked with [`chunk_fingerprints_of_lines`].
//!
//! **Fingerprint**: the low 32 bits of XXH3-64 seeded with [`CHUNK_SEED`] of the chunk's lines
//! joined by `'\n'`. The output is sorted and deduplicated, so [`shared_chunks`] counts distinct
//! shared chunks by a merge.
//!
//! Parameters (defaults = [`ChunkParams::TWO_LINES`]): two lines per chunk, wrap at 80 columns,
//! T = 25. [`ChunkParams::FOUR_LINES`] is the paper's other setting (four lines, T = 15).

use crate::text::visible_text;

/// Seed of the chunk fingerprint (XXH3-64, truncated to its low 32 bits): the bytes `nd:chunk`.
pub const CHUNK_SEED: u64 = u64::from_be_bytes(*b"nd:chunk");

/// How pages are chunked and when two pages are similar (seed 003 §2.1, §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkParams {
    /// Lines per chunk (§5.1 evaluates 2 and 4); 0 means one chunk for the whole page (§5.1's
    /// "one fingerprint for the entire document").
    pub lines_per_chunk: usize,
    /// Width, in characters of normalized text, at which a block's text is wrapped into lines.
    pub wrap_columns: usize,
    /// T: pages are similar iff they share strictly more than this many distinct chunks.
    pub threshold: usize,
}

impl ChunkParams {
    /// §5.1's "two line" fingerprints with T = 25 (the default).
    pub const TWO_LINES: ChunkParams = ChunkParams {
        lines_per_chunk: 2,
        wrap_columns: 80,
        threshold: 25,
    };
    /// §5.1's "four line" fingerprints with T = 15.
    pub const FOUR_LINES: ChunkParams = ChunkParams {
        lines_per_chunk: 4,
        wrap_columns: 80,
        threshold: 15,
    };
}

impl Default for ChunkParams {
    fn default() -> Self {
        ChunkParams::TWO_LINES
    }
}

/// Buffers reused across pages by [`chunk_fingerprints`], so that steady state allocates nothing.
#[derive(Debug, Default, Clone)]
pub struct ChunkScratch {
    text: String,
    chunk: Vec<u8>,
    term: String,
}

/// Fills `out` (cleared first) with the sorted, deduplicated 32-bit chunk fingerprints of the
/// page whose HTML is `html`, its lines rendered as the module doc describes.
pub fn chunk_fingerprints(
    html: &str,
    params: &ChunkParams,
    scratch: &mut ChunkScratch,
    out: &mut Vec<u32>,
) {
    // Visible text already breaks lines at block-level tags (see `crate::text::extract`).
    visible_text(html, &mut scratch.text);
    let text = std::mem::take(&mut scratch.text);
    chunk_fingerprints_of_lines(&text, params, scratch, out);
    scratch.text = text;
}

/// Like [`chunk_fingerprints`] for text whose `'\n'`s are the block breaks.
pub fn chunk_fingerprints_of_lines(
    text: &str,
    params: &ChunkParams,
    scratch: &mut ChunkScratch,
    out: &mut Vec<u32>,
) {
    let mut chunker = Chunker::new(params, &mut scratch.chunk, out);
    crate::text::for_each_term_lines(text, &mut scratch.term, |t, new_line| {
        if new_line {
            chunker.end_line();
        }
        chunker.term(t);
    });
    chunker.finish();
}

/// Distinct chunks two sorted, deduplicated fingerprint lists share (a merge).
pub fn shared_chunks(a: &[u32], b: &[u32]) -> usize {
    super::shared_sorted(a, b)
}

/// Seed 003's page similarity: the pages share more than `params.threshold` (T) chunks.
pub fn chunk_similar(a: &[u32], b: &[u32], params: &ChunkParams) -> bool {
    shared_chunks(a, b) > params.threshold
}

/// Wraps terms into lines and hashes every `lines_per_chunk` lines into one fingerprint. Fed
/// term by term, so it can ride on a tokenizing pass that already happens (see
/// [`crate::signer`]).
///
/// Every term is copied once, into `text`: all the page's terms, joined by `' '` within a line
/// and by `'\n'` between lines, so each chunk is a slice of it, hashed once when complete. With
/// the `'\n'`s turned into spaces ([`joined_terms`]) the same buffer is the page's terms joined by
/// single spaces, which the signer hashes into the normalised-text hash.
pub struct Chunker<'a> {
    lines_per_chunk: usize,
    wrap_columns: usize,
    /// The terms so far (cleared by [`Chunker::new`]).
    text: &'a mut Vec<u8>,
    /// Where the current chunk starts in `text`.
    chunk_start: usize,
    /// Complete lines in the current chunk.
    lines: usize,
    /// Characters on the current line (0: no line open).
    line_chars: usize,
    out: &'a mut Vec<u32>,
}

impl<'a> Chunker<'a> {
    /// A chunker writing fingerprints into `out` (cleared); `text` (cleared) receives the terms.
    pub fn new(params: &ChunkParams, text: &'a mut Vec<u8>, out: &'a mut Vec<u32>) -> Self {
        out.clear();
        text.clear();
        Chunker {
            lines_per_chunk: params.lines_per_chunk,
            wrap_columns: params.wrap_columns,
            text,
            chunk_start: 0,
            lines: 0,
            line_chars: 0,
            out,
        }
    }

    /// The next term of the current line (wrapped at `wrap_columns`).
    #[inline(always)]
    pub fn term(&mut self, t: &str) {
        // Characters, counted as the bytes that start one.
        let n = if t.is_ascii() {
            t.len()
        } else {
            t.bytes().filter(|b| (b & 0xC0) != 0x80).count()
        };
        if self.line_chars > 0 && self.line_chars + 1 + n > self.wrap_columns {
            self.end_line();
        }
        if !self.text.is_empty() {
            self.text
                .push(if self.line_chars > 0 { b' ' } else { b'\n' });
        }
        if self.line_chars > 0 {
            self.line_chars += 1;
        } else if self.lines == 0 {
            self.chunk_start = self.text.len();
        }
        self.text.extend_from_slice(t.as_bytes());
        self.line_chars += n;
    }

    /// Ends the current line (a block break); an empty line is no line.
    pub fn end_line(&mut self) {
        if self.line_chars == 0 {
            return;
        }
        self.line_chars = 0;
        self.lines += 1;
        if self.lines == self.lines_per_chunk {
            self.emit();
        }
    }

    fn emit(&mut self) {
        let chunk = &self.text[self.chunk_start..];
        let fp = xxhash_rust::xxh3::xxh3_64_with_seed(chunk, CHUNK_SEED);
        self.out.push(fp as u32);
        self.lines = 0;
    }

    /// Ends the page: the last chunk may be shorter. Sorts and deduplicates the output.
    pub fn finish(mut self) {
        self.end_line();
        if self.lines > 0 {
            self.emit();
        }
        self.out.sort_unstable();
        self.out.dedup();
    }
}

/// Turns the `text` a [`Chunker`] filled into the page's terms joined by single spaces (terms
/// never contain `'\n'`: they are runs of letters and digits, or image URLs).
pub fn joined_terms(text: &mut [u8]) -> &[u8] {
    for b in text.iter_mut() {
        // Branch-free, so the loop vectorises.
        *b = if *b == b'\n' { b' ' } else { *b };
    }
    text
}

/// Elements a text renderer puts on lines of their own (lower-case names).
pub(crate) fn is_block(name: &[u8]) -> bool {
    matches!(
        name,
        b"address"
            | b"article"
            | b"aside"
            | b"blockquote"
            | b"body"
            | b"br"
            | b"caption"
            | b"center"
            | b"dd"
            | b"details"
            | b"dialog"
            | b"dir"
            | b"div"
            | b"dl"
            | b"dt"
            | b"fieldset"
            | b"figcaption"
            | b"figure"
            | b"footer"
            | b"form"
            | b"frame"
            | b"frameset"
            | b"h1"
            | b"h2"
            | b"h3"
            | b"h4"
            | b"h5"
            | b"h6"
            | b"head"
            | b"header"
            | b"hgroup"
            | b"hr"
            | b"html"
            | b"iframe"
            | b"legend"
            | b"li"
            | b"listing"
            | b"main"
            | b"menu"
            | b"nav"
            | b"noframes"
            | b"noscript"
            | b"ol"
            | b"optgroup"
            | b"option"
            | b"p"
            | b"plaintext"
            | b"pre"
            | b"section"
            | b"select"
            | b"summary"
            | b"table"
            | b"tbody"
            | b"td"
            | b"textarea"
            | b"tfoot"
            | b"th"
            | b"thead"
            | b"title"
            | b"tr"
            | b"ul"
            | b"xmp"
    )
}

/// Block elements whose source newlines are line breaks.
pub(crate) fn is_preformatted(name: &[u8]) -> bool {
    matches!(
        name,
        b"pre" | b"listing" | b"xmp" | b"plaintext" | b"textarea"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use xxhash_rust::xxh3::xxh3_64_with_seed;

    fn fp(chunk: &str) -> u32 {
        xxh3_64_with_seed(chunk.as_bytes(), CHUNK_SEED) as u32
    }

    fn sorted(mut v: Vec<u32>) -> Vec<u32> {
        v.sort_unstable();
        v.dedup();
        v
    }

    fn of_lines(text: &str, params: &ChunkParams) -> Vec<u32> {
        let mut out = vec![];
        chunk_fingerprints_of_lines(text, params, &mut ChunkScratch::default(), &mut out);
        out
    }

    fn of_html(html: &str, params: &ChunkParams) -> Vec<u32> {
        let mut out = vec![];
        chunk_fingerprints(html, params, &mut ChunkScratch::default(), &mut out);
        out
    }

    fn rendered(html: &str) -> String {
        let mut t = String::new();
        visible_text(html, &mut t);
        t.split('\n')
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("|")
    }

    #[test]
    fn golden_fingerprints() {
        assert_eq!(CHUNK_SEED, 0x6e64_3a63_6875_6e6b);
        let got = of_lines(
            "Hello, World!\n  second   LINE\n\n\nthird",
            &ChunkParams::TWO_LINES,
        );
        assert_eq!(
            got,
            sorted(vec![fp("hello world\nsecond line"), fp("third")])
        );
        // Pins XXH3 with the seed, so a silent change of either shows up here.
        assert_eq!(fp("hello world\nsecond line"), GOLDEN_HELLO);
        assert_eq!(fp("third"), GOLDEN_THIRD);
    }
    const GOLDEN_HELLO: u32 = 141_992_739;
    const GOLDEN_THIRD: u32 = 1_245_409_849;

    #[test]
    fn four_lines_and_whole_document() {
        let text = "a\nb\nc\nd\ne";
        assert_eq!(
            of_lines(text, &ChunkParams::FOUR_LINES),
            sorted(vec![fp("a\nb\nc\nd"), fp("e")])
        );
        let whole = ChunkParams {
            lines_per_chunk: 0,
            ..ChunkParams::default()
        };
        assert_eq!(of_lines(text, &whole), vec![fp("a\nb\nc\nd\ne")]);
    }

    #[test]
    fn blocks_are_word_wrapped() {
        let words: Vec<String> = (0..30).map(|i| format!("word{i:02}")).collect();
        // 6 chars per word + 1 space: 11 words = 76 chars fit in 80, the 12th does not.
        let p = ChunkParams {
            lines_per_chunk: 1,
            ..ChunkParams::default()
        };
        let expected = sorted(vec![
            fp(&words[0..11].join(" ")),
            fp(&words[11..22].join(" ")),
            fp(&words[22..30].join(" ")),
        ]);
        assert_eq!(of_lines(&words.join(" "), &p), expected);
        // A term longer than the width is a line by itself.
        let long = "x".repeat(100);
        assert_eq!(
            of_lines(&format!("a {long} b"), &p),
            sorted(vec![fp("a"), fp(&long), fp("b")])
        );
    }

    #[test]
    fn html_is_rendered_into_lines() {
        assert_eq!(
            rendered("<html><head><title>T</title></head><body><h1>Head</h1><p>one\ntwo <b>bold</b></p><ul><li>a<li>b</ul>x<br>y</body>"),
            "T|Head|one two bold|a|b|x|y"
        );
        assert_eq!(
            rendered("<pre>l1\r\nl2\n\nl3</pre>after\nmore"),
            "l1|l2|l3|after more"
        );
        // Block tags inside scripts, comments and attributes change nothing visible.
        assert_eq!(
            rendered("<p>a<script>x='<div>'</script>b<!-- <p> -->c <a title=\"<p>\">d</a></p>"),
            "a b c d"
        );
        // Not block tags: inline elements and names that merely start like one.
        assert_eq!(rendered("a<span>b</span><pretty>c<para>d"), "a b c d");
    }

    #[test]
    fn layout_of_the_source_does_not_matter() {
        let minified = "<div><p>The quick brown fox.</p><p>Jumps over the lazy dog.</p></div>";
        let pretty = "<div>\n  <p>The quick\n     brown fox.</p>\n\n  <P>Jumps over\nthe lazy dog.</P>\n</div>\n";
        let a = of_html(minified, &ChunkParams::default());
        assert_eq!(a, of_html(pretty, &ChunkParams::default()));
        assert_eq!(a, vec![fp("the quick brown fox\njumps over the lazy dog")]);
    }

    #[test]
    fn threshold_is_strict_and_absolute() {
        let p = ChunkParams::TWO_LINES;
        let a: Vec<u32> = (0..40).collect();
        let b25: Vec<u32> = (15..60).collect(); // shares 25
        let b26: Vec<u32> = (14..60).collect(); // shares 26
        assert_eq!(shared_chunks(&a, &b25), 25);
        assert!(!chunk_similar(&a, &b25, &p));
        assert!(chunk_similar(&a, &b26, &p));
        // Identical short pages are not chunk-similar: the count is absolute.
        let short: Vec<u32> = (0..25).collect();
        assert!(!chunk_similar(&short, &short, &p));
    }

    #[test]
    fn buffers_are_reused() {
        let html = "<p>alpha beta</p><p>gamma</p>".repeat(200);
        let mut scratch = ChunkScratch::default();
        let mut out = Vec::new();
        chunk_fingerprints(&html, &ChunkParams::default(), &mut scratch, &mut out);
        let caps = (
            scratch.text.capacity(),
            scratch.term.capacity(),
            out.capacity(),
        );
        chunk_fingerprints(&html, &ChunkParams::default(), &mut scratch, &mut out);
        assert_eq!(
            caps,
            (
                scratch.text.capacity(),
                scratch.term.capacity(),
                out.capacity()
            )
        );
    }

    fn page() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                Just("<p>".to_owned()),
                Just("</p>".to_owned()),
                Just("<br>".to_owned()),
                Just("<pre>".to_owned()),
                Just("</pre>".to_owned()),
                Just("\n".to_owned()),
                Just("<script>".to_owned()),
                "[a-zA-Z0-9 .,]{0,30}",
                "\\PC{0,10}",
                any::<String>(),
            ],
            0..40,
        )
        .prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn arbitrary_input_sorted_dedup_and_self_similar(html in page(), lines in 0usize..5, wrap in 0usize..100) {
            let p = ChunkParams { lines_per_chunk: lines, wrap_columns: wrap, threshold: 3 };
            let a = of_html(&html, &p);
            prop_assert!(a.windows(2).all(|w| w[0] < w[1]));
            prop_assert_eq!(&a, &of_html(&html, &p));
            prop_assert_eq!(shared_chunks(&a, &a), a.len());
            prop_assert_eq!(chunk_similar(&a, &a, &p), a.len() > 3);
            let t = of_lines(&html, &p);
            prop_assert!(t.windows(2).all(|w| w[0] < w[1]));
        }

        #[test]
        fn shared_is_symmetric_and_bounded(a in prop::collection::btree_set(0u32..200, 0..60), b in prop::collection::btree_set(0u32..200, 0..60)) {
            let a: Vec<u32> = a.into_iter().collect();
            let b: Vec<u32> = b.into_iter().collect();
            let n = shared_chunks(&a, &b);
            prop_assert_eq!(n, shared_chunks(&b, &a));
            prop_assert_eq!(n, a.iter().filter(|x| b.binary_search(x).is_ok()).count());
        }
    }
}
