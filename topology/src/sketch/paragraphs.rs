//! Shingle paragraphs: Pereira, Baeza-Yates, Ziviani, *Where and how duplicates occur in the web*
//! (seed 004), Definitions 1, 2 and 5, §3 and §4.
//!
//! Def. 1: "A shingle paragraph is a sequence of three sentences of the document, where a sentence
//! is a sequence of words ended by a period. If a period is not found until the 150th character,
//! then the sentence is finished at that point and a new sentence is initialized at the 151th
//! character. ... In this work we use shingle paragraphs *without overlap* of sentences": six
//! sentences give the paragraphs "s1. s2. s3." and "s4. s5. s6.".
//!
//! How that is read on our visible text ([`crate::text`], tags already replaced by spaces):
//!
//! - The document is its *normalized text*: the visible text with every run of white space
//!   collapsed to one space and trimmed, `<img>` URL terms (between [`crate::text::IMG_TERM_MARK`]s)
//!   left out. Characters are Unicode scalar values of that text; [`ParagraphInfo::chars`] counts
//!   them.
//! - A sentence starts at the first non-space character and ends after a period (U+002E, the only
//!   terminator the paper names) or after its 150th character ([`SENTENCE_MAX_CHARS`]), whichever
//!   comes first; the space between two sentences belongs to neither.
//! - Every 3 consecutive sentences ([`SENTENCES_PER_PARAGRAPH`]) form a paragraph. The last one or
//!   two sentences, when the count is not a multiple of 3, form a final shorter paragraph: the paper
//!   is silent on them, but dropping them would make two documents that differ only in their
//!   last sentences "duplicates" (Def. 2).
//! - A paragraph's fingerprint is XXH3-64, seeded with [`PARAGRAPH_SEED`], of its normalized text
//!   from the first character of its first sentence to the last of its last (so "s1. s2. s3."
//!   hashes exactly those bytes). Case and punctuation are kept: the paper matches text, not terms.
//!
//! §4: "we considered only documents with size greater than 450 characters ... to guarantee that at
//! least one complete shingle paragraph would represent the document"; Table 2's caption says
//! documents "with less than 450 characters" were left out. We keep every document and flag
//! ([`ParagraphInfo::short`]) those with fewer than [`SHORT_DOCUMENT_CHARS`] = 450 characters:
//! exactly 450 already guarantees a complete paragraph (3 × 150), which is the paper's reason.
//!
//! Def. 5: "\[a near-duplicate\] is a document with a given minimal percentage of identical shingle
//! paragraphs of another document ... This percentage is related to the number of shingle
//! paragraphs of both documents", and §4 reports documents that "share at least 90% of their
//! shingle paragraphs" (also 70 % and 50 %). "Their" is both documents', so the denominator is the
//! larger paragraph count: [`shared_fraction`] = shared / max(|A|, |B|), which is ≥ p exactly when
//! each document has at least p of its paragraphs in the other. Counts include repeats (Def. 2's
//! "same number of shingle paragraphs"); shared paragraphs are a multiset intersection, which also
//! avoids the false matches §3 describes (a repeated paragraph matched twice).
//! [`near_duplicate_level`] returns Def. 2's duplicate (same multiset) or the highest of the
//! 90 / 70 / 50 % levels ([`NEAR_DUPLICATE_PERCENTS`]) reached.

use crate::text::IMG_TERM_MARK;
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64_with_seed;
#[cfg(test)]
use xxhash_rust::xxh3::Xxh3;

/// Seed of the paragraph fingerprint (XXH3-64): the bytes `nd:parag`.
pub const PARAGRAPH_SEED: u64 = u64::from_be_bytes(*b"nd:parag");
/// A sentence without a period ends at this many characters (Def. 1).
pub const SENTENCE_MAX_CHARS: usize = 150;
/// Sentences per shingle paragraph, without overlap (Def. 1).
pub const SENTENCES_PER_PARAGRAPH: usize = 3;
/// Documents with fewer characters than this are flagged short (§4).
pub const SHORT_DOCUMENT_CHARS: usize = 450;
/// The near-duplicate levels of §4 (Table 3), in percent of shared paragraphs.
pub const NEAR_DUPLICATE_PERCENTS: [usize; 3] = [90, 70, 50];

/// What [`paragraph_fingerprints`] saw besides the fingerprints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParagraphInfo {
    /// Fewer than 450 characters: the paper left such documents out; we flag them.
    pub short: bool,
    /// Characters of the normalized text (white space collapsed, trimmed).
    pub chars: usize,
    /// Sentences found.
    pub sentences: usize,
    /// Paragraphs fingerprinted, the last possibly of fewer than 3 sentences.
    pub paragraphs: usize,
}

/// Fills `out` (cleared first) with the 64-bit fingerprints of the document's shingle
/// paragraphs, sorted ascending with repeats kept.
///
/// One pass over the bytes. Inside a sentence (`Cutter::run`) white space is collapsed and
/// characters counted without a data-dependent branch; the loop is left only at a `.`, at the
/// 150-character limit and at the lead byte of a character that may be white space or
/// [`IMG_TERM_MARK`], which is decoded. The normalized paragraph is built in a stack buffer and
/// hashed in one call once complete.
pub fn paragraph_fingerprints(text: &str, out: &mut Vec<u64>) -> ParagraphInfo {
    out.clear();
    let bytes = text.as_bytes();
    let mut p = Cutter {
        buf: [0; PARAGRAPH_BUF],
        len: 0,
        chars: 0,
        sentence_chars: 0,
        in_paragraph: 0,
        sentences: 0,
        out,
    };
    let mut pending_space = false;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let kind = KIND[b as usize];
        if kind & WS != 0 {
            pending_space = true;
            i += 1;
            continue;
        }
        if kind & CHECK != 0 {
            let c = text[i..].chars().next().unwrap_or_default();
            if c == IMG_TERM_MARK {
                // An <img> URL term is not text: skip it up to and with its closing mark.
                let after = i + IMG_TERM_MARK.len_utf8();
                i = text[after..]
                    .find(IMG_TERM_MARK)
                    .map_or(bytes.len(), |k| after + k + IMG_TERM_MARK.len_utf8());
                pending_space = true;
                continue;
            }
            if c.is_whitespace() {
                pending_space = true;
                i += c.len_utf8();
                continue;
            }
            if pending_space && p.chars > 0 {
                p.space();
            }
            let next = i + c.len_utf8();
            p.char(&bytes[i..next]);
            i = next;
            pending_space = false;
            continue;
        }
        // Text, a '.', or (never at a character boundary) a continuation byte.
        if pending_space && p.chars > 0 {
            p.space();
        }
        (i, pending_space) = p.run(bytes, i);
    }
    p.finish()
}

/// Bytes of the longest paragraph: 3 sentences of 150 characters of at most 4 bytes each, and
/// the 2 spaces between them.
const PARAGRAPH_MAX_BYTES: usize = SENTENCES_PER_PARAGRAPH * (SENTENCE_MAX_CHARS * 4 + 1) - 1;
/// The paragraph buffer: [`Cutter::run`] stores whole 8-byte words, up to 7 bytes past the
/// paragraph's end.
const PARAGRAPH_BUF: usize = PARAGRAPH_MAX_BYTES + 8;

/// 0x01 in every byte of a word.
const LO: u64 = u64::from_le_bytes([0x01; 8]);
/// 0x80 in every byte of a word.
const HI: u64 = u64::from_le_bytes([0x80; 8]);

/// 0x80 in each byte of `x` equal to `c` (< 0x80). Exact in the bytes below (before) the first
/// byte ≥ 0x80: a carry only moves up, so only bytes after a non-ASCII one can be wrong.
#[inline]
fn eq_mask(x: u64, c: u8) -> u64 {
    let t = x ^ (LO * u64::from(c));
    !t.wrapping_add(LO * 0x7F) & HI
}

/// 0x80 in each byte of `x` that is ASCII white space (U+0009..U+000D, U+0020); exact like
/// [`eq_mask`].
#[inline]
fn ws_mask(x: u64) -> u64 {
    let ge_tab = x.wrapping_add(LO * (0x80 - 0x09));
    let ge_so = x.wrapping_add(LO * (0x80 - 0x0E));
    eq_mask(x, b' ') | (ge_tab & !ge_so & HI)
}

/// [`KIND`] bit: ASCII white space (`char::is_whitespace`: U+0009..U+000D, U+0020).
const WS: u8 = 1;
/// [`KIND`] bit: a UTF-8 continuation byte (`0b10xxxxxx`), which starts no character.
const CONT: u8 = 2;
/// [`KIND`] bit: `.`, which ends a sentence.
const DOT: u8 = 4;
/// [`KIND`] bit: the lead byte of a character that may be white space (U+0085, U+00A0, U+1680,
/// U+2000..U+205F, U+3000) or [`IMG_TERM_MARK`] (U+FFFC), to decode. Every other byte not
/// marked is one character of text: ASCII, or the lead byte of a character that is neither.
const CHECK: u8 = 8;

/// What each byte of UTF-8 text is to [`paragraph_fingerprints`].
static KIND: [u8; 256] = {
    let mut t = [0; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = match b as u8 {
            b'\t'..=b'\r' | b' ' => WS,
            b'.' => DOT,
            0x80..=0xBF => CONT,
            0xC2 | 0xE1 | 0xE2 | 0xE3 | 0xEF => CHECK,
            _ => 0,
        };
        b += 1;
    }
    t
};

/// Shared paragraphs of two sorted fingerprint lists, counted with multiplicity (a merge).
pub fn shared_paragraphs(a: &[u64], b: &[u64]) -> usize {
    super::shared_sorted(a, b)
}

/// Shared paragraphs over the larger paragraph count (Def. 5); 0 when both lists are empty.
pub fn shared_fraction(a: &[u64], b: &[u64]) -> f64 {
    let denominator = a.len().max(b.len());
    if denominator == 0 {
        return 0.0;
    }
    shared_paragraphs(a, b) as f64 / denominator as f64
}

/// How close two documents are by their shingle paragraphs (Def. 2 and §4's levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum NearDuplicateLevel {
    /// Same paragraphs, same number of them (Def. 2: same cluster).
    #[serde(rename = "duplicate")]
    Duplicate,
    /// At least 90 % of both documents' paragraphs shared.
    #[serde(rename = "near_90")]
    Near90,
    /// At least 70 % shared.
    #[serde(rename = "near_70")]
    Near70,
    /// At least 50 % shared.
    #[serde(rename = "near_50")]
    Near50,
}

impl NearDuplicateLevel {
    /// The name as serialized: `duplicate`, `near_90`, `near_70`, `near_50`.
    pub fn as_str(self) -> &'static str {
        match self {
            NearDuplicateLevel::Duplicate => "duplicate",
            NearDuplicateLevel::Near90 => "near_90",
            NearDuplicateLevel::Near70 => "near_70",
            NearDuplicateLevel::Near50 => "near_50",
        }
    }

    /// The minimal percentage of shared paragraphs of the level (100 for a duplicate).
    pub fn min_percent(self) -> usize {
        match self {
            NearDuplicateLevel::Duplicate => 100,
            NearDuplicateLevel::Near90 => NEAR_DUPLICATE_PERCENTS[0],
            NearDuplicateLevel::Near70 => NEAR_DUPLICATE_PERCENTS[1],
            NearDuplicateLevel::Near50 => NEAR_DUPLICATE_PERCENTS[2],
        }
    }
}

/// The strongest level two sorted fingerprint lists reach, or `None` (also for two empty lists).
pub fn near_duplicate_level(a: &[u64], b: &[u64]) -> Option<NearDuplicateLevel> {
    let denominator = a.len().max(b.len());
    if denominator == 0 {
        return None;
    }
    let shared = shared_paragraphs(a, b);
    [
        NearDuplicateLevel::Duplicate,
        NearDuplicateLevel::Near90,
        NearDuplicateLevel::Near70,
        NearDuplicateLevel::Near50,
    ]
    .into_iter()
    .find(|l| shared * 100 >= l.min_percent() * denominator)
}

/// Cuts the normalized text into sentences and paragraphs and hashes the paragraphs.
struct Cutter<'a> {
    /// Normalized text of the open paragraph: `buf[..len]`.
    buf: [u8; PARAGRAPH_BUF],
    len: usize,
    /// Characters of the normalized text so far.
    chars: usize,
    /// Characters of the open sentence (0: none open).
    sentence_chars: usize,
    /// Complete sentences in the open paragraph.
    in_paragraph: usize,
    sentences: usize,
    out: &'a mut Vec<u64>,
}

impl Cutter<'_> {
    /// The one space that stands for a run of white space between two characters.
    #[inline]
    fn space(&mut self) {
        self.chars += 1;
        if self.sentence_chars > 0 {
            self.sentence_chars += 1;
            self.buf[self.len] = b' ';
            self.len += 1;
            if self.sentence_chars == SENTENCE_MAX_CHARS {
                self.end_sentence();
            }
        } else if self.in_paragraph > 0 {
            // Between two sentences of one paragraph: part of its text, of neither sentence.
            self.buf[self.len] = b' ';
            self.len += 1;
        }
    }

    /// One character of text, not '.', given as its UTF-8 bytes.
    fn char(&mut self, utf8: &[u8]) {
        self.chars += 1;
        self.sentence_chars += 1;
        self.buf[self.len..self.len + utf8.len()].copy_from_slice(utf8);
        self.len += utf8.len();
        if self.sentence_chars == SENTENCE_MAX_CHARS {
            self.end_sentence();
        }
    }

    /// Takes the text from byte `start` (a character of text or a '.', any space before it
    /// already taken) to the end of the sentence, a byte [`CHECK`] marks or the end of the text,
    /// collapsing white space. Returns where it stopped, a character boundary, and whether white
    /// space is pending there (a space is only taken before the next character of text).
    ///
    /// Words of 8 ASCII bytes go whole while they hold no '.' and no white space after white
    /// space (their white space becomes spaces); white space after white space is skipped a word
    /// at a time; any other byte goes through the one-byte step.
    #[inline]
    fn run(&mut self, bytes: &[u8], start: usize) -> (usize, bool) {
        let limit = SENTENCE_MAX_CHARS - self.sentence_chars; // >= 1
        let buf = &mut self.buf;
        let mut len = self.len;
        let mut count = 0;
        // 1 when the previous byte was white space (then already taken as a space).
        let mut prev_ws = 0;
        let mut j = start;
        // Whether the sentence is complete: a '.' or the limit ends it.
        let mut complete = false;
        'sentence: loop {
            while let Some(word) = bytes.get(j..j + 8) {
                let x = u64::from_le_bytes(word.try_into().unwrap_or_default());
                let high = x & HI;
                let ws = ws_mask(x);
                let dot = eq_mask(x, b'.');
                let collapsed = ws & ((ws << 8) | (prev_ws << 7));
                // White space bytes become ' '.
                let normalized = (x & !((ws >> 7) * 0xFF)) | (ws >> 2);
                if high | dot == 0 && count + 8 <= limit {
                    // The common case, a fixed step (no dependency of `j` on the data): 8 ASCII
                    // bytes, no '.', within the limit, white space after white space dropped.
                    if collapsed == 0 {
                        buf[len..len + 8].copy_from_slice(&normalized.to_le_bytes());
                        len += 8;
                        count += 8;
                    } else {
                        let dropped = (collapsed >> 7) * 0xFF;
                        let kept = 8 - collapsed.count_ones() as usize;
                        if dropped.wrapping_add(dropped & dropped.wrapping_neg()) & dropped == 0 {
                            // One run of dropped bytes: the bytes after it move down over it.
                            let first = dropped.trailing_zeros() as usize / 8;
                            let after = (8 - kept + first) as u32 * 8;
                            let rest = normalized.checked_shr(after).unwrap_or(0);
                            buf[len..len + 8].copy_from_slice(&normalized.to_le_bytes());
                            buf[len + first..len + first + 8].copy_from_slice(&rest.to_le_bytes());
                            len += kept;
                        } else {
                            for (k, byte) in normalized.to_le_bytes().into_iter().enumerate() {
                                buf[len] = byte;
                                len += usize::from(dropped >> (8 * k) & 1 == 0);
                            }
                        }
                        count += kept;
                    }
                    prev_ws = ws >> 63;
                    j += 8;
                    continue;
                }
                // Bytes to take whole: those before the first non-ASCII byte, '.' or white space
                // after white space (masks exact up to there), within the limit.
                let bad = high | dot | collapsed;
                let take = ((bad.trailing_zeros() / 8) as usize).min(limit - count);
                if take == 0 {
                    if collapsed & !high & 0x80 != 0 {
                        // White space after white space: skip the ASCII white space that follows.
                        j += ((!ws | high) & HI).trailing_zeros() as usize / 8;
                        continue;
                    }
                    break;
                }
                // Bytes past `take` are stored but not kept.
                buf[len..len + 8].copy_from_slice(&normalized.to_le_bytes());
                len += take;
                count += take;
                j += take;
                prev_ws = (ws >> (8 * take - 1)) & 1;
            }
            // One byte at a time: up to the next ASCII byte, at least one.
            loop {
                let Some(&b) = bytes.get(j) else {
                    break 'sentence;
                };
                let kind = KIND[b as usize];
                if kind & (DOT | CHECK) != 0 {
                    if kind & DOT != 0 && count < limit {
                        buf[len] = b'.';
                        len += 1;
                        count += 1;
                        j += 1;
                        complete = true;
                    } else {
                        // At the limit before a '.' (text), or before a character to decode
                        // after a character of text; a space taken last waits for that character
                        // (below).
                        complete = count == limit && (kind & DOT != 0 || prev_ws == 0);
                    }
                    break 'sentence;
                }
                let ws = u64::from(kind & WS);
                // Bytes written (0 for white space after white space) and characters added
                // (also 0 for a continuation byte, which is never white space).
                let written = 1 - (ws & prev_ws) as usize;
                let added = written - usize::from((kind & CONT) >> 1);
                if count + added > limit {
                    complete = true;
                    break 'sentence;
                }
                // Always stored, kept (`len` moved on) only when written: `len` is at most the
                // paragraph's length here, so within the buffer.
                buf[len] = if ws != 0 { b' ' } else { b };
                len += written;
                count += added;
                prev_ws = ws;
                j += 1;
                if bytes.get(j).is_none_or(|&b| b < 0x80) {
                    break;
                }
            }
        }
        // A space taken last that does not end a complete sentence stands before a character
        // not known to be text (or before nothing, at the end of the text): give it back as
        // pending white space.
        let pending = prev_ws != 0 && !complete;
        if pending {
            len -= 1;
            count -= 1;
        }
        self.len = len;
        self.chars += count;
        self.sentence_chars += count;
        if complete || self.sentence_chars == SENTENCE_MAX_CHARS {
            self.end_sentence();
        }
        (j, pending)
    }

    fn end_sentence(&mut self) {
        self.sentences += 1;
        self.sentence_chars = 0;
        self.in_paragraph += 1;
        if self.in_paragraph == SENTENCES_PER_PARAGRAPH {
            self.end_paragraph();
        }
    }

    fn end_paragraph(&mut self) {
        self.out
            .push(xxh3_64_with_seed(&self.buf[..self.len], PARAGRAPH_SEED));
        self.len = 0;
        self.in_paragraph = 0;
    }

    fn finish(mut self) -> ParagraphInfo {
        if self.sentence_chars > 0 {
            self.end_sentence();
        }
        if self.in_paragraph > 0 {
            self.end_paragraph();
        }
        self.out.sort_unstable();
        ParagraphInfo {
            short: self.chars < SHORT_DOCUMENT_CHARS,
            chars: self.chars,
            sentences: self.sentences,
            paragraphs: self.out.len(),
        }
    }
}

/// The straightforward implementation, character by character through a streaming hasher:
/// what [`paragraph_fingerprints`] must agree with.
#[cfg(test)]
fn reference(text: &str, out: &mut Vec<u64>) -> ParagraphInfo {
    out.clear();
    let mut p = Paragrapher {
        hasher: Xxh3::with_seed(PARAGRAPH_SEED),
        buf: [0; 128],
        buffered: 0,
        chars: 0,
        sentence_chars: 0,
        in_paragraph: 0,
        sentences: 0,
        out,
    };
    let mut pending_space = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == IMG_TERM_MARK {
            // An <img> URL term is not text: skip it up to its closing mark.
            chars.by_ref().find(|&c| c == IMG_TERM_MARK);
            pending_space = true;
        } else if c.is_whitespace() {
            pending_space = true;
        } else {
            if pending_space && p.chars > 0 {
                p.space();
            }
            pending_space = false;
            p.char(c);
        }
    }
    p.finish()
}

/// Cuts the normalized character stream into sentences and paragraphs and hashes the paragraphs
/// (for [`reference`]).
#[cfg(test)]
struct Paragrapher<'a> {
    hasher: Xxh3,
    /// Bytes not yet handed to `hasher` (one `update` per buffer, not per character).
    buf: [u8; 128],
    buffered: usize,
    /// Characters of the normalized text so far.
    chars: usize,
    /// Characters of the open sentence (0: none open).
    sentence_chars: usize,
    /// Complete sentences in the open paragraph.
    in_paragraph: usize,
    sentences: usize,
    out: &'a mut Vec<u64>,
}

#[cfg(test)]
impl Paragrapher<'_> {
    /// The one space that stands for a run of white space between two characters.
    fn space(&mut self) {
        self.chars += 1;
        if self.sentence_chars > 0 {
            self.sentence_chars += 1;
            self.write(b" ");
            if self.sentence_chars == SENTENCE_MAX_CHARS {
                self.end_sentence();
            }
        } else if self.in_paragraph > 0 {
            // Between two sentences of one paragraph: part of its text, of neither sentence.
            self.write(b" ");
        }
    }

    fn char(&mut self, c: char) {
        self.chars += 1;
        self.sentence_chars += 1;
        let mut utf8 = [0u8; 4];
        self.write(c.encode_utf8(&mut utf8).as_bytes());
        if c == '.' || self.sentence_chars == SENTENCE_MAX_CHARS {
            self.end_sentence();
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.buffered + bytes.len() > self.buf.len() {
            self.flush();
        }
        self.buf[self.buffered..self.buffered + bytes.len()].copy_from_slice(bytes);
        self.buffered += bytes.len();
    }

    fn flush(&mut self) {
        self.hasher.update(&self.buf[..self.buffered]);
        self.buffered = 0;
    }

    fn end_sentence(&mut self) {
        self.sentences += 1;
        self.sentence_chars = 0;
        self.in_paragraph += 1;
        if self.in_paragraph == SENTENCES_PER_PARAGRAPH {
            self.end_paragraph();
        }
    }

    fn end_paragraph(&mut self) {
        self.flush();
        self.out.push(self.hasher.digest());
        self.hasher.reset();
        self.in_paragraph = 0;
    }

    fn finish(mut self) -> ParagraphInfo {
        if self.sentence_chars > 0 {
            self.end_sentence();
        }
        if self.in_paragraph > 0 {
            self.end_paragraph();
        }
        self.out.sort_unstable();
        ParagraphInfo {
            short: self.chars < SHORT_DOCUMENT_CHARS,
            chars: self.chars,
            sentences: self.sentences,
            paragraphs: self.out.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use xxhash_rust::xxh3::xxh3_64_with_seed;

    fn fp(paragraph: &str) -> u64 {
        xxh3_64_with_seed(paragraph.as_bytes(), PARAGRAPH_SEED)
    }

    fn fps(text: &str) -> (Vec<u64>, ParagraphInfo) {
        let mut out = vec![];
        let info = paragraph_fingerprints(text, &mut out);
        (out, info)
    }

    fn sorted(mut v: Vec<u64>) -> Vec<u64> {
        v.sort_unstable();
        v
    }

    #[test]
    fn golden_fingerprints() {
        assert_eq!(PARAGRAPH_SEED, 0x6e64_3a70_6172_6167);
        assert_eq!(fp("s1. s2. s3."), GOLDEN_S123);
        assert_eq!(fp("s4. s5. s6."), GOLDEN_S456);
    }
    const GOLDEN_S123: u64 = 3_239_354_800_893_611_947;
    const GOLDEN_S456: u64 = 655_008_441_612_532_300;

    #[test]
    fn definition_1_example() {
        // Six sentences, no overlap: "s1. s2. s3." and "s4. s5. s6.".
        let (out, info) = fps("  s1.  s2.\n s3.   s4. s5.\ts6.  ");
        assert_eq!(out, sorted(vec![fp("s1. s2. s3."), fp("s4. s5. s6.")]));
        assert_eq!(
            info,
            ParagraphInfo {
                short: true,
                chars: "s1. s2. s3. s4. s5. s6.".len(),
                sentences: 6,
                paragraphs: 2
            }
        );
    }

    #[test]
    fn figure_1_documents_and_false_matches() {
        // Document 1 of fig. 1 and document 3 of §3's false-match example.
        let doc1 = fps("a. a. a. b. b. b. c. c. c. d. d. d.").0;
        assert_eq!(
            doc1,
            sorted(vec![
                fp("a. a. a."),
                fp("b. b. b."),
                fp("c. c. c."),
                fp("d. d. d.")
            ])
        );
        let doc3 = fps("e. e. e. d. d. d. e. e. e. d. d. d.").0;
        let doc2 = fps("e. e. e. d. d. d. f. f. f. g. g. g.").0;
        // The paper's hash-table lookup calls 3 a duplicate of 2; the multiset count does not.
        assert_eq!(shared_paragraphs(&doc3, &doc2), 2);
        assert_eq!(
            near_duplicate_level(&doc3, &doc2),
            Some(NearDuplicateLevel::Near50)
        );
        assert_eq!(
            near_duplicate_level(&doc3, &doc3),
            Some(NearDuplicateLevel::Duplicate)
        );
    }

    #[test]
    fn sentences_end_at_150_characters() {
        let (out, info) = fps(&"x".repeat(400));
        assert_eq!(out, vec![fp(&"x".repeat(400))]);
        assert_eq!((info.sentences, info.paragraphs), (3, 1));
        let (out, info) = fps(&"x".repeat(451));
        assert_eq!(out, sorted(vec![fp(&"x".repeat(450)), fp("x")]));
        assert_eq!((info.sentences, info.paragraphs), (4, 2));
        // A space counts toward the 150 when inside a sentence, not between two.
        let s = format!("{} {}", "y".repeat(100), "z".repeat(60));
        let (_, info) = fps(&s);
        assert_eq!(info.sentences, 2); // 150 chars = 100 y + space + 49 z, then 11 z
                                       // Unicode characters count once each, whatever their UTF-8 length.
        let (_, info) = fps(&"é".repeat(300));
        assert_eq!(info.sentences, 2);
    }

    #[test]
    fn short_flag_at_the_boundary() {
        assert!(fps(&"a".repeat(449)).1.short);
        assert!(!fps(&"a".repeat(450)).1.short);
        // White space collapses before counting.
        let text = format!("  {}\n\n\n{}  ", "a".repeat(224), "b".repeat(224));
        assert_eq!(fps(&text).1.chars, 449);
        assert!(fps(&text).1.short);
        let (out, info) = fps("");
        assert!(out.is_empty());
        assert_eq!(
            info,
            ParagraphInfo {
                short: true,
                ..Default::default()
            }
        );
    }

    #[test]
    fn img_terms_are_not_text() {
        let with = fps("one. \u{FFFC}http://x.example/a.png\u{FFFC} two. three.").0;
        assert_eq!(with, vec![fp("one. two. three.")]);
    }

    #[test]
    fn levels_use_the_larger_count() {
        let a: Vec<u64> = (0..10).collect();
        let b: Vec<u64> = (0..9).chain([100]).collect(); // 9 of 10 shared
        assert_eq!(
            near_duplicate_level(&a, &b),
            Some(NearDuplicateLevel::Near90)
        );
        let c: Vec<u64> = (0..9).collect(); // 9 of max(10, 9)
        assert_eq!(shared_fraction(&a, &c), 0.9);
        assert_eq!(
            near_duplicate_level(&a, &c),
            Some(NearDuplicateLevel::Near90)
        );
        let d: Vec<u64> = (0..7).chain(200..210).collect(); // 7 of 17
        assert_eq!(near_duplicate_level(&a, &d), None);
        let e: Vec<u64> = (0..7).chain(200..203).collect(); // 7 of 10
        assert_eq!(
            near_duplicate_level(&a, &e),
            Some(NearDuplicateLevel::Near70)
        );
        let f: Vec<u64> = (0..5).chain(200..205).collect(); // 5 of 10
        assert_eq!(
            near_duplicate_level(&a, &f),
            Some(NearDuplicateLevel::Near50)
        );
        assert_eq!(near_duplicate_level(&[], &[]), None);
        assert_eq!(shared_fraction(&[], &[]), 0.0);
        assert_eq!(
            serde_json::to_string(&NearDuplicateLevel::Near70).unwrap(),
            "\"near_70\""
        );
    }

    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                "[a-z .]{0,40}",
                Just(".".to_owned()),
                Just(" \n\t ".to_owned()),
                Just("\u{FFFC}".to_owned()),
                "\\PC{0,20}",
                any::<String>(),
            ],
            0..60,
        )
        .prop_map(|v| v.concat())
    }

    /// Text that exercises every path of the byte scanner: ASCII words, dots and spaces, every
    /// kind of white space (lone, runs, ASCII and not), multibyte letters (including lead bytes
    /// shared with white space: U+00E9 no, U+00C0..U+00FF via C3, U+2019 via E2, U+3042 via E3,
    /// U+FF0C via EF), <img> terms (closed or not) and sentences longer than 150 characters.
    fn differential_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            6 => "[a-z]{1,8}",
            3 => Just(" ".to_owned()),
            2 => Just(".".to_owned()),
            1 => Just(". ".to_owned()),
            1 => "[ \t\n\r\x0B\x0C]{1,4}",
            1 => prop::sample::select(vec![
                "\u{A0}", "\u{85}", "\u{1680}", "\u{2000}", "\u{200A}", "\u{2028}",
                "\u{2029}", "\u{202F}", "\u{205F}", "\u{3000}", " \u{A0} ", "\u{A0}\u{A0}",
            ])
            .prop_map(str::to_owned),
            2 => prop::sample::select(vec![
                "é", "ü", "ß", "ж", "я", "\u{A9}", "\u{AD}", "\u{2019}", "\u{201C}", "\u{2014}",
                "\u{200B}", "\u{3042}", "\u{3002}", "\u{4E2D}", "\u{FF0C}", "\u{FFFD}",
                "\u{1F600}", "\u{10348}", "\u{1A00}",
            ])
            .prop_map(str::to_owned),
            1 => prop::sample::select(vec![
                "\u{FFFC}", "\u{FFFC}http://x.example/a. b.png\u{FFFC}", " \u{FFFC}x\u{FFFC} ",
            ])
            .prop_map(str::to_owned),
            1 => (140usize..460, prop::sample::select(vec!["x", "é", "x ", "\u{4E2D}", "ab\u{3000}"]))
                .prop_map(|(n, unit)| unit.repeat(n / unit.chars().count())),
            1 => any::<String>(),
        ];
        prop::collection::vec(piece, 0..120).prop_map(|v| v.concat())
    }

    #[test]
    fn check_bytes_cover_every_special_character() {
        // Every character that is not text starts with a byte the scanner decodes.
        for c in (0..=u32::from(char::MAX)).filter_map(char::from_u32) {
            let mut utf8 = [0; 4];
            let bytes = c.encode_utf8(&mut utf8).as_bytes();
            let lead = KIND[bytes[0] as usize];
            if c.is_whitespace() || c == IMG_TERM_MARK {
                assert!(
                    lead == CHECK || (lead == WS && bytes.len() == 1),
                    "{c:?} starts with {lead}"
                );
            } else if c == '.' {
                assert_eq!(lead, DOT);
            } else {
                assert!(lead == 0 || lead == CHECK, "{c:?} starts with {lead}");
            }
            for &b in &bytes[1..] {
                assert_eq!(KIND[b as usize], CONT);
            }
        }
    }

    #[test]
    fn same_as_reference_around_the_limit_and_word_boundaries() {
        // Every 3 pieces after runs that bring a sentence near its 150th character, at every
        // alignment of the 8-byte words.
        let pieces = [
            "a", " ", "  ", "\n", " \t ", ".", ". ", "\u{A0}", " \u{A0}", "é", "\u{FFFC}", "’",
        ];
        let (mut a, mut b) = (vec![], vec![]);
        for prefix in ["", "z. ", "zz.  ", " \u{3000}z"] {
            for run in (140..=152).chain([0, 1, 7, 8, 9]) {
                for p in pieces {
                    for q in pieces {
                        for r in pieces {
                            let s =
                                format!("{prefix}{}{p}{q}{r}{}", "x".repeat(run), "y".repeat(9));
                            for s in [s.as_str(), s.trim_end_matches('y')] {
                                let info = paragraph_fingerprints(s, &mut a);
                                assert_eq!(info, reference(s, &mut b), "{s:?}");
                                assert_eq!(a, b, "{s:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn word_masks() {
        let word = |s: &[u8; 8]| u64::from_le_bytes(*s);
        let x = word(b"a .\t\n\x0b\x0c\r");
        assert_eq!(eq_mask(x, b'.'), 0x80 << 16);
        assert_eq!(ws_mask(x), HI & !0x80 & !(0x80 << 16));
        let x = word(b"\x08\x0e\x1f!-/ ~");
        assert_eq!(ws_mask(x), 0x80 << 48);
        assert_eq!(eq_mask(x, b'.'), 0);
    }

    #[test]
    fn longest_paragraph_fits() {
        // Three 150-character sentences of 4-byte characters and the spaces between them.
        let s = [
            "\u{1F600}".repeat(150),
            "\u{1F600}".repeat(150),
            "\u{1F600}".repeat(150),
        ]
        .join(" ");
        let (mut a, mut b) = (vec![], vec![]);
        let info = paragraph_fingerprints(&s, &mut a);
        assert_eq!(info, reference(&s, &mut b));
        assert_eq!(a, b);
        assert_eq!(a, vec![fp(&s)]);
        assert_eq!(s.len(), PARAGRAPH_MAX_BYTES);
    }

    /// Per-page time of [`paragraph_fingerprints`] and [`reference`] on the visible text of
    /// crawl pages, and their agreement:
    /// `NEARDUP_PARAGRAPHS_BENCH=events.jsonl cargo test --release -p neardup-topology --lib
    /// sketch::paragraphs::tests::timing -- --ignored --nocapture` (default file
    /// `/tmp/crawl-small1/events.jsonl`; `NEARDUP_PARAGRAPHS_LIMIT` pages, default 1500;
    /// `NEARDUP_PARAGRAPHS_ONLY=new` or `reference` to time one, e.g. under `perf`).
    #[test]
    #[ignore]
    fn timing() {
        use std::io::BufRead;
        use std::time::Instant;
        let file = std::env::var("NEARDUP_PARAGRAPHS_BENCH")
            .unwrap_or_else(|_| "/tmp/crawl-small1/events.jsonl".to_owned());
        let limit: usize = std::env::var("NEARDUP_PARAGRAPHS_LIMIT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1500);
        let mut texts = vec![];
        let mut ex = crate::text::Extraction::default();
        for line in std::io::BufReader::new(std::fs::File::open(&file).expect("open")).split(b'\n')
        {
            if texts.len() >= limit {
                break;
            }
            let line = line.expect("read");
            let Ok(page) = crate::decode(&line, &crate::DecodeLimits::default()) else {
                continue;
            };
            let Some(body) = page.body.as_ref().filter(|_| page.has_content()) else {
                continue;
            };
            let Ok((html, _)) =
                crate::charset::decode_body(body.raw(), page.content_type.as_deref())
            else {
                continue;
            };
            crate::text::extract(&html, None, &mut ex);
            texts.push(ex.text.clone());
        }
        let bytes: usize = texts.iter().map(String::len).sum();
        let n = texts.len().max(1) as f64;
        println!(
            "{} pages, {:.1} KB of text each",
            texts.len(),
            bytes as f64 / n / 1e3
        );
        let (mut a, mut b) = (vec![], vec![]);
        for t in &texts {
            assert_eq!(paragraph_fingerprints(t, &mut a), reference(t, &mut b));
            assert_eq!(a, b);
        }
        type Imp = fn(&str, &mut Vec<u64>) -> ParagraphInfo;
        let imps: [(&str, Imp); 2] = [("new", paragraph_fingerprints), ("reference", reference)];
        let only = std::env::var("NEARDUP_PARAGRAPHS_ONLY").ok();
        for _ in 0..3 {
            for (name, f) in imps {
                if only.as_deref().is_some_and(|o| o != name) {
                    continue;
                }
                let t = Instant::now();
                let mut acc = 0;
                for _ in 0..5 {
                    for t in &texts {
                        acc += std::hint::black_box(f(t, &mut a)).chars;
                    }
                }
                std::hint::black_box(acc);
                let s = t.elapsed().as_secs_f64() / 5.0;
                println!(
                    "{name:<10} {:>7.1} us/page {:>6.2} ns/byte",
                    s * 1e6 / n,
                    s * 1e9 / bytes.max(1) as f64
                );
            }
        }
    }

    proptest! {
        #[test]
        fn arbitrary_text(s in text()) {
            let (a, info) = fps(&s);
            prop_assert!(a.windows(2).all(|w| w[0] <= w[1]));
            prop_assert_eq!(info.paragraphs, a.len());
            prop_assert_eq!(info.paragraphs, info.sentences.div_ceil(SENTENCES_PER_PARAGRAPH));
            prop_assert_eq!(info.short, info.chars < SHORT_DOCUMENT_CHARS);
            prop_assert!(info.chars <= s.chars().count());
            prop_assert!(info.sentences <= info.chars);
            // Enough characters always make a complete paragraph (the paper's reason for 450).
            if !info.short {
                prop_assert!(info.sentences >= SENTENCES_PER_PARAGRAPH);
            }
            if !a.is_empty() {
                prop_assert_eq!(shared_fraction(&a, &a), 1.0);
                prop_assert_eq!(near_duplicate_level(&a, &a), Some(NearDuplicateLevel::Duplicate));
            }
            // Spacing does not matter.
            let respaced = s.split_whitespace().collect::<Vec<_>>().join(" \n ");
            if !s.contains(IMG_TERM_MARK) {
                prop_assert_eq!(&fps(&respaced).0, &a);
            }
        }

        #[test]
        fn same_as_reference(s in differential_text()) {
            let (mut fast, mut slow) = (vec![7], vec![]);
            let info = paragraph_fingerprints(&s, &mut fast);
            prop_assert_eq!(info, reference(&s, &mut slow));
            prop_assert_eq!(fast, slow);
        }

        #[test]
        fn fraction_is_symmetric_and_levels_monotone(
            a in prop::collection::vec(0u64..30, 0..40),
            b in prop::collection::vec(0u64..30, 0..40),
        ) {
            let (a, b) = (sorted(a), sorted(b));
            let f = shared_fraction(&a, &b);
            prop_assert_eq!(f, shared_fraction(&b, &a));
            prop_assert!((0.0..=1.0).contains(&f));
            prop_assert_eq!(near_duplicate_level(&a, &b), near_duplicate_level(&b, &a));
            if let Some(level) = near_duplicate_level(&a, &b) {
                prop_assert!(f * 100.0 >= level.min_percent() as f64 - 1e-9);
                prop_assert_eq!(level == NearDuplicateLevel::Duplicate, a == b);
            } else {
                prop_assert!(f < 0.5);
            }
        }
    }
}
