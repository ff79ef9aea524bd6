//! HTML to visible text and terms (seed 001 §2, seed 000 §2; the bench's "Visible text and
//! shingles" rules).
//!
//! Markup becomes white space; `script` and `style` elements and comments are dropped; entities
//! are decoded. Block-level tags become line breaks and source newlines become spaces (except
//! inside `pre` and its kin), so the text has the line structure a text-mode renderer would
//! give: the chunks of seed 003 are taken from it without a second pass over the HTML. Terms are maximal runs of Unicode letters and digits, lower-cased. The scanner is
//! a single forward pass over the bytes with no tree and no backtracking, so unclosed tags,
//! megabyte attributes, deep nesting and binary junk all cost linear time.

use xxhash_rust::xxh3::Xxh3;

/// Delimits an `<img>` URL term inside extracted text: the whole span between two of these is
/// one term (seed 001 §2). U+FFFC never survives from the page's own text (it is blanked).
pub const IMG_TERM_MARK: char = '\u{FFFC}';

/// What one pass over a page's HTML extracts. Reused across pages: no allocation once warm
/// (links of unusual shapes, resolved by the `url` crate, excepted: see [`crate::resolve`]).
#[derive(Debug, Default, Clone)]
pub struct Extraction {
    /// Visible text, tags replaced by spaces, with `<img>` URL terms marked by [`IMG_TERM_MARK`].
    pub text: String,
    /// The out-links, concatenated; see [`Extraction::links`].
    links: String,
    /// End of each link in `links`.
    link_ends: Vec<usize>,
    /// Scratch for resolving one reference.
    resolved: String,
    /// Scratch for one entity-decoded attribute value.
    attribute: String,
    /// Where the page's title lies in `text`: see [`Extraction::title`].
    title: Option<std::ops::Range<usize>>,
    /// See [`Extraction::redirects`].
    refresh: bool,
}

impl Extraction {
    /// Out-links (`<a>`, `<area>`, `<frame>`, `<iframe>`), resolved against the page URL (or its
    /// `<base href>`), http(s) only, fragment dropped, in document order, duplicates kept.
    pub fn links(&self) -> impl Iterator<Item = &str> + Clone + '_ {
        let starts = std::iter::once(0).chain(self.link_ends.iter().copied());
        starts
            .zip(self.link_ends.iter())
            .map(|(a, &b)| &self.links[a..b])
    }

    /// Empties it for the next page (its buffers kept).
    fn clear(&mut self) {
        self.text.clear();
        self.links.clear();
        self.link_ends.clear();
        self.title = None;
        self.refresh = false;
    }

    /// Whether the page is an instant redirect: a `<meta http-equiv="refresh">` outside
    /// `<noscript>` with a delay of 0 and a URL other than the page's own. A browser shows its
    /// target at once and a search engine reads it as a permanent redirect, so it is a redirect
    /// as a 3xx fetch is, not content (the stubs that documentation generators leave at an
    /// item's old paths hold a few words and the target's path: pairing two such stubs would
    /// say that two different targets are one document).
    pub fn redirects(&self) -> bool {
        self.refresh
    }

    /// The text of the page's title: the first `<title>` element before `<body>` (an SVG
    /// drawing in the body has titles of its own), up to the next tag; `None` without one.
    pub fn title(&self) -> Option<&str> {
        self.title.clone().map(|r| &self.text[r])
    }
}

/// Appends the visible text of `html` to `out` (cleared first), tags replaced by spaces.
pub fn visible_text(html: &str, out: &mut String) {
    let mut ex = Extraction {
        text: std::mem::take(out),
        ..Extraction::default()
    };
    extract(html, None, &mut ex);
    *out = ex.text;
}

/// The extraction of a body served as plain text (`text/plain`): the text as it is, its line
/// breaks kept as the text's own lines (a `<` or a `&` is a character, not markup); no title,
/// no links. A U+FFFC of the text is blanked, since it would open an image term.
pub fn extract_plain(text: &str, out: &mut Extraction) {
    out.clear();
    match memchr::memmem::find(text.as_bytes(), IMG_TERM_MARK_UTF8) {
        None => out.text.push_str(text),
        Some(_) => out.text.push_str(&text.replace(IMG_TERM_MARK, " ")),
    }
}

/// One linear pass: visible text, `<img>` URL terms and out-links. Without a page URL, relative
/// links cannot be resolved, so neither links nor image terms are extracted.
pub fn extract(html: &str, page: Option<&url::Url>, out: &mut Extraction) {
    out.clear();
    out.text.reserve(html.len() / 2);
    let mut base: Option<url::Url> = None;
    let mut in_pre = false;
    // The title's start in `text` while it is open; `looking` until a title or `<body>`.
    let mut title_start: Option<usize> = None;
    let mut looking = true;
    // Inside `<noscript>`: a refresh there is for browsers without scripts only.
    let mut in_noscript = false;
    let b = html.as_bytes();
    let n = b.len();
    let mut i = 0;
    let mut text_start = 0;
    while i < n {
        if b[i] != b'<' {
            // Jump to the next '<' over the text run.
            i += memchr::memchr(b'<', &b[i..]).unwrap_or(n - i);
            continue;
        }
        let Some((end, tag)) = markup_end(b, i) else {
            i += 1; // a literal '<'
            continue;
        };
        push_text(&html[text_start..i], in_pre, &mut out.text);
        if let Some(start) = title_start.take() {
            // Title text is RCDATA: the next markup is its end tag.
            out.title = Some(start..out.text.len());
        }
        out.text.push(match block_tag(b, i) {
            Some(pre) => {
                if let Some(closing) = pre {
                    in_pre = !closing;
                }
                '\n'
            }
            None => ' ',
        });
        if let (true, Some((name, _))) = (looking, tag) {
            let name = &b[name.0..name.1];
            if name.eq_ignore_ascii_case(b"title") {
                title_start = Some(out.text.len());
                looking = false;
            } else if name.eq_ignore_ascii_case(b"body") {
                looking = false;
            }
        }
        match tag {
            Some((name, _)) if b[name.0..name.1].eq_ignore_ascii_case(b"noscript") => {
                in_noscript = true;
            }
            None if in_noscript && is_end_tag(b, i, b"noscript") => in_noscript = false,
            _ => {}
        }
        if let (Some(page), Some((name, attrs))) = (page, tag) {
            on_tag(
                &html[name.0..name.1],
                &html[attrs.0..attrs.1],
                page,
                &mut base,
                in_noscript,
                out,
            );
        }
        i = end;
        text_start = i;
    }
    push_text(&html[text_start..], in_pre, &mut out.text);
    if let Some(start) = title_start {
        out.title = Some(start..out.text.len());
    }
}

/// Whether the markup at `b[i] == '<'` is the end tag `</name>` (ASCII case-insensitively).
fn is_end_tag(b: &[u8], i: usize, name: &[u8]) -> bool {
    let start = i + 2;
    b.get(i + 1) == Some(&b'/')
        && b.get(start..start + name.len())
            .is_some_and(|n| n.eq_ignore_ascii_case(name))
        && b.get(start + name.len())
            .is_none_or(|c| !c.is_ascii_alphanumeric())
}

/// For the tag at `b[i] == '<'`: `Some(pre)` when it is a block-level element, where `pre` is
/// `Some(closing)` for preformatted ones; `None` for every other tag.
fn block_tag(b: &[u8], i: usize) -> Option<Option<bool>> {
    let closing = b.get(i + 1) == Some(&b'/');
    let start = i + 1 + usize::from(closing);
    let len = b
        .get(start..)?
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric())
        .count();
    let mut name = [0u8; 10];
    if len == 0 || len > name.len() {
        return None;
    }
    for (d, s) in name.iter_mut().zip(&b[start..start + len]) {
        *d = s.to_ascii_lowercase();
    }
    let name = &name[..len];
    crate::sketch::chunks::is_block(name)
        .then(|| crate::sketch::chunks::is_preformatted(name).then_some(closing))
}

/// Links, image terms and `<base>` from the start tags that carry them.
fn on_tag(
    name: &str,
    attrs: &str,
    page: &url::Url,
    base: &mut Option<url::Url>,
    in_noscript: bool,
    out: &mut Extraction,
) {
    if name.len() == 4 && name.eq_ignore_ascii_case("meta") {
        if !in_noscript {
            out.refresh |= is_instant_redirect(attrs, base.as_ref().unwrap_or(page), page, out);
        }
        return;
    }
    let wanted = match name.len() {
        1 if name.eq_ignore_ascii_case("a") => "href",
        3 if name.eq_ignore_ascii_case("img") => "src",
        4 if name.eq_ignore_ascii_case("area") || name.eq_ignore_ascii_case("base") => "href",
        5 if name.eq_ignore_ascii_case("frame") => "src",
        6 if name.eq_ignore_ascii_case("iframe") => "src",
        _ => return,
    };
    let Some(value) = attribute(attrs, wanted) else {
        return;
    };
    let mut decoded = std::mem::take(&mut out.attribute);
    decoded.clear();
    push_decoded(value.trim(), &mut decoded);
    let resolve_from = base.as_ref().unwrap_or(page);
    let mut resolved = std::mem::take(&mut out.resolved);
    if crate::resolve::resolve(resolve_from, &decoded, &mut resolved) {
        if name.eq_ignore_ascii_case("base") {
            *base = url::Url::parse(&resolved).ok();
        } else if name.eq_ignore_ascii_case("img") {
            // Seed 001 §2: the whole URL on another host, only the file name on the page's host.
            out.text.push(IMG_TERM_MARK);
            if crate::site::host(&resolved) == page.host_str().unwrap_or("") {
                let path = resolved.split(['?', '#']).next().unwrap_or("");
                out.text.push_str(path.rsplit('/').next().unwrap_or(""));
            } else {
                out.text.push_str(&resolved);
            }
            out.text.push(IMG_TERM_MARK);
            out.text.push(' ');
        } else {
            out.links.push_str(&resolved);
            out.link_ends.push(out.links.len());
        }
    }
    out.resolved = resolved;
    out.attribute = decoded;
}

/// Whether a `<meta>` tag's attributes make an instant refresh to another URL: `http-equiv`
/// is `refresh` and `content` a delay of 0 (its whole seconds, as browsers read it) with a URL
/// that resolves against `from` to an http(s) URL other than `page` (fragments aside). A
/// refresh without a URL reloads the page itself; a later one shows the page first.
fn is_instant_redirect(
    attrs: &str,
    from: &url::Url,
    page: &url::Url,
    out: &mut Extraction,
) -> bool {
    let refresh =
        attribute(attrs, "http-equiv").is_some_and(|v| v.trim().eq_ignore_ascii_case("refresh"));
    let Some(content) = attribute(attrs, "content").filter(|_| refresh) else {
        return false;
    };
    out.attribute.clear();
    push_decoded(content, &mut out.attribute);
    let Some(target) = refresh_target(&out.attribute) else {
        return false;
    };
    crate::resolve::resolve(from, target, &mut out.resolved)
        && out.resolved != page.as_str().split('#').next().unwrap_or("")
}

/// The URL of a refresh's `content` when its delay is 0, as the HTML standard's declarative
/// refresh reads it: whole seconds (a fraction ignored), then `;` or `,` or white space, an
/// optional `url=` (any case), and the URL, optionally quoted. `None` for another delay, a
/// malformed value or no URL.
fn refresh_target(content: &str) -> Option<&str> {
    let ws = |c: char| c.is_ascii_whitespace();
    let s = content.trim_start_matches(ws);
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let rest = s[digits..].trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    if (digits == 0 && rest.len() == s.len()) || s[..digits].bytes().any(|d| d != b'0') {
        return None;
    }
    match rest.bytes().next() {
        Some(b';' | b',') => {}
        Some(c) if c.is_ascii_whitespace() => {}
        _ => return None,
    }
    let rest = rest.trim_start_matches(ws);
    let rest = rest.strip_prefix([';', ',']).unwrap_or(rest);
    let mut url = rest.trim_start_matches(ws);
    if url.get(..3).is_some_and(|u| u.eq_ignore_ascii_case("url")) {
        let after = url[3..].trim_start_matches(ws);
        url = match after.strip_prefix('=') {
            Some(value) => value.trim_start_matches(ws),
            None => after,
        };
    }
    if let Some(q @ ('"' | '\'')) = url.chars().next() {
        url = &url[1..];
        url = &url[..url.find(q).unwrap_or(url.len())];
    }
    let url = url.trim();
    (!url.is_empty()).then_some(url)
}

/// The value of attribute `want` (ASCII case-insensitive) in a start tag's attribute text.
fn attribute<'a>(attrs: &'a str, want: &str) -> Option<&'a str> {
    let b = attrs.as_bytes();
    let n = b.len();
    let mut j = 0;
    while j < n {
        while j < n && (b[j].is_ascii_whitespace() || b[j] == b'/') {
            j += 1;
        }
        let name_start = j;
        while j < n && !b[j].is_ascii_whitespace() && !matches!(b[j], b'=' | b'>' | b'/') {
            j += 1;
        }
        let name = &attrs[name_start..j];
        while j < n && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if j >= n || b[j] != b'=' {
            if name.is_empty() {
                j += 1;
            }
            continue;
        }
        j += 1;
        while j < n && b[j].is_ascii_whitespace() {
            j += 1;
        }
        let (start, end) = if j < n && (b[j] == b'"' || b[j] == b'\'') {
            let q = b[j];
            let end = find_byte(b, j + 1, q).unwrap_or(n);
            (j + 1, end)
        } else {
            let end = (j..n)
                .find(|&k| b[k].is_ascii_whitespace() || b[k] == b'>')
                .unwrap_or(n);
            (j, end)
        };
        if name.eq_ignore_ascii_case(want) {
            return Some(&attrs[start..end]);
        }
        j = end + 1;
    }
    None
}

/// Name and attribute-text ranges of a start tag.
type TagRanges = ((usize, usize), (usize, usize));

/// If `b[i] == '<'` opens markup, the index just past it (and past a whole script/style
/// element), with the name and attribute ranges when it is a start tag; `None` when the '<' is
/// literal text.
fn markup_end(b: &[u8], i: usize) -> Option<(usize, Option<TagRanges>)> {
    let n = b.len();
    let next = *b.get(i + 1)?;
    match next {
        b'!' => {
            if b[i..].starts_with(b"<!--") {
                Some((find(b, i + 4, b"-->").map_or(n, |p| p + 3), None))
            } else {
                Some((find_byte(b, i + 2, b'>').map_or(n, |p| p + 1), None))
            }
        }
        b'?' => Some((find_byte(b, i + 2, b'>').map_or(n, |p| p + 1), None)),
        b'/' if b.get(i + 2).is_some_and(u8::is_ascii_alphabetic) => {
            Some((find_byte(b, i + 2, b'>').map_or(n, |p| p + 1), None))
        }
        c if c.is_ascii_alphabetic() => {
            let name_end = (i + 1..n)
                .find(|&j| !b[j].is_ascii_alphanumeric())
                .unwrap_or(n);
            let name = &b[i + 1..name_end];
            let tag_end = tag_end(b, name_end);
            let attrs_end = if tag_end > name_end && b[tag_end - 1] == b'>' {
                tag_end - 1
            } else {
                tag_end
            };
            let ranges = Some(((i + 1, name_end), (name_end, attrs_end)));
            let raw_text =
                name.eq_ignore_ascii_case(b"script") || name.eq_ignore_ascii_case(b"style");
            if raw_text
                && tag_end <= n
                && b[tag_end - 1] == b'>'
                && b[tag_end.saturating_sub(2)] != b'/'
            {
                // Skip the element's content up to its end tag.
                let close = find_end_tag(b, tag_end, name).unwrap_or(n);
                Some((close, ranges))
            } else {
                Some((tag_end, ranges))
            }
        }
        _ => None,
    }
}

/// Index just past the '>' that ends a start tag whose name ends at `from`, honouring quoted
/// attribute values (which may contain '>').
fn tag_end(b: &[u8], mut j: usize) -> usize {
    let n = b.len();
    while j < n {
        match b[j] {
            b'>' => return j + 1,
            b'=' => {
                j += 1;
                while j < n && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if j < n && (b[j] == b'"' || b[j] == b'\'') {
                    let q = b[j];
                    j = find_byte(b, j + 1, q).map_or(n, |p| p + 1);
                }
            }
            _ => j += 1,
        }
    }
    n
}

/// Index just past `</name ...>` at or after `from`, case-insensitively.
fn find_end_tag(b: &[u8], mut from: usize, name: &[u8]) -> Option<usize> {
    while let Some(p) = find(b, from, b"</") {
        let s = p + 2;
        if is_end_tag(b, p, name) {
            return Some(find_byte(b, s + name.len(), b'>').map_or(b.len(), |e| e + 1));
        }
        from = s;
    }
    None
}

fn find_byte(b: &[u8], from: usize, c: u8) -> Option<usize> {
    memchr::memchr(c, b.get(from..)?).map(|p| p + from)
}

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    // The needles are two or three bytes: a memchr for the first beats building a searcher.
    let mut at = from;
    while let Some(p) = find_byte(b, at, needle[0]) {
        if b[p..].starts_with(needle) {
            return Some(p);
        }
        at = p + 1;
    }
    None
}

fn push_text(run: &str, in_pre: bool, out: &mut String) {
    // Most runs (white space between two tags, most often) hold no entity and no U+FFFC, whose
    // lead byte is 0xEF: one branch-free pass over the bytes tells, and such a run is copied
    // with its line breaks as spaces. The general path below made three searches per run
    // (line breaks, entities, U+FFFC), which cost more than the short runs themselves.
    let (entity_or_mark, line_break) = scan_run(run.as_bytes());
    if !entity_or_mark {
        if in_pre || !line_break {
            out.push_str(run);
        } else {
            push_lines(run, out, |piece, out| out.push_str(piece));
        }
        return;
    }
    push_text_general(run, in_pre, out);
}

/// Whether a text run holds an entity or U+FFFC (its lead byte 0xEF), and whether it holds a
/// line break. Byte flags OR-ed into integers with no early exit, so the compiler turns the loop
/// into vector compares (a fold over a pair of bools stayed one byte at a time, 10 % of
/// `sign_bench`'s samples).
fn scan_run(b: &[u8]) -> (bool, bool) {
    let (mut entity_or_mark, mut line_break) = (0u8, 0u8);
    for &c in b {
        entity_or_mark |= u8::from(c == b'&') | u8::from(c == 0xEF);
        line_break |= u8::from(c == b'\n') | u8::from(c == b'\r');
    }
    (entity_or_mark != 0, line_break != 0)
}

/// [`push_text`] for any run: entities decoded, a U+FFFC of the page blanked and, outside
/// preformatted text, line breaks as spaces.
fn push_text_general(run: &str, in_pre: bool, out: &mut String) {
    let start = out.len();
    if in_pre {
        push_decoded(run, out);
    } else {
        push_lines(run, out, push_decoded);
    }
    // The page's own U+FFFC (or one from an entity) must not open an image term (rare: this
    // path may allocate).
    if memchr::memmem::find(&out.as_bytes()[start..], IMG_TERM_MARK_UTF8).is_some() {
        let cleaned = out[start..].replace(IMG_TERM_MARK, " ");
        out.truncate(start);
        out.push_str(&cleaned);
    }
}

/// Outside preformatted text, source newlines are white space: pushes the pieces of `run`
/// between them with `push` (entities never span a line, so each piece decodes on its own),
/// each line break as a space, without allocating.
fn push_lines(run: &str, out: &mut String, push: impl Fn(&str, &mut String)) {
    let mut piece_start = 0;
    for nl in memchr::memchr2_iter(b'\n', b'\r', run.as_bytes()) {
        push(&run[piece_start..nl], out);
        out.push(' ');
        piece_start = nl + 1;
    }
    push(&run[piece_start..], out);
}

/// [`IMG_TERM_MARK`] encoded.
const IMG_TERM_MARK_UTF8: &[u8] = "\u{FFFC}".as_bytes();

/// Pushes `piece` with its character references decoded, exactly as
/// `html_escape::decode_html_entities` decodes them (only references ending in `;`).
///
/// The piece is cut before each `&`: a reference never holds a `&`, and html_escape, meeting one
/// while it reads a reference, starts again there, so decoding the pieces one by one gives the
/// same text. A piece that starts with one of the references most pages use is decoded here;
/// html_escape finds every other name by a binary search over its 2,231 names, and those
/// searches were 2.7 % of `neardup replay`'s CPU time on the medium crawl (perf).
fn push_decoded(piece: &str, out: &mut String) {
    let b = piece.as_bytes();
    let Some(first) = memchr::memchr(b'&', b) else {
        out.push_str(piece);
        return;
    };
    out.push_str(&piece[..first]);
    let mut start = first;
    while start < b.len() {
        let end = memchr::memchr(b'&', &b[start + 1..]).map_or(b.len(), |e| start + 1 + e);
        let segment = &piece[start..end];
        match common_reference(segment.as_bytes()) {
            Some((c, len)) => {
                out.push(c);
                out.push_str(&segment[len..]);
            }
            None => {
                html_escape::decode_html_entities_to_string(segment, out);
            }
        }
        start = end;
    }
}

/// The character and length of the reference `segment` starts with, when it is one of those
/// most pages use: `&nbsp;`, `&gt;`, `&lt;`, `&amp;`, `&quot;`, `&apos;` or a decimal reference
/// of a printable character. None: html_escape decides.
fn common_reference(segment: &[u8]) -> Option<(char, usize)> {
    const NAMED: [(&[u8], char); 6] = [
        (b"&nbsp;", '\u{a0}'),
        (b"&gt;", '>'),
        (b"&lt;", '<'),
        (b"&amp;", '&'),
        (b"&quot;", '"'),
        (b"&apos;", '\''),
    ];
    if segment.get(1) == Some(&b'#') {
        // `&#` and 1 to 6 digits: at most 999,999, so no overflow; html_escape rejects only
        // the C0 controls but tab, line feed, form feed and carriage return, and non-characters
        // of `char` (surrogates, beyond U+10FFFF), which go to it.
        let digits = segment[2..]
            .iter()
            .take(7)
            .take_while(|d| d.is_ascii_digit())
            .count();
        if !(1..=6).contains(&digits) || segment.get(2 + digits) != Some(&b';') {
            return None;
        }
        let n = segment[2..2 + digits]
            .iter()
            .fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
        return char::from_u32(n)
            .filter(|&c| c >= ' ')
            .map(|c| (c, digits + 3));
    }
    NAMED
        .iter()
        .find(|(name, _)| segment.starts_with(name))
        .map(|&(name, c)| (c, name.len()))
}

/// Calls `f` with every term of `text`, lower-cased, in order: each maximal run of letters and
/// digits, but that every character of a script written without spaces is a term of its own
/// (`is_unspaced`). `buf` is scratch space reused across calls so that steady-state
/// tokenizing allocates nothing.
pub fn for_each_term(text: &str, buf: &mut String, mut f: impl FnMut(&str)) {
    for_each_term_lines(text, buf, |t, _| f(t));
}

/// A byte that separates terms: ASCII, and neither a letter nor a digit.
#[inline(always)]
fn is_separator(c: u8) -> bool {
    c < 0x80 && !c.is_ascii_alphanumeric()
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The high bit of every byte of `x` (eight bytes, SWAR) that is an ASCII letter or digit. For
/// bytes below 0x80, `y + (0x80 - lo)` sets a byte's high bit iff `y >= lo`, and
/// `y + (0x7f - hi)` iff `y > hi`, with no carry into the next byte; `y | 0x20` folds upper-case
/// letters onto lower-case ones (and no other byte onto a letter).
#[inline(always)]
fn alnum_bytes(x: u64) -> u64 {
    let in_range = |y: u64, lo: u8, hi: u8| {
        (y + ONES * u64::from(0x80 - lo)) & !(y + ONES * u64::from(0x7f - hi)) & HIGH_BITS
    };
    let y = x & !HIGH_BITS;
    (in_range(y | (ONES * 0x20), b'a', b'z') | in_range(y, b'0', b'9')) & !x
}

/// The high bit of every zero byte of `x`, exactly (no borrow between bytes).
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    !(((x & !HIGH_BITS) + !HIGH_BITS) | x) & HIGH_BITS
}

/// The first index from `j` on whose byte is not an ASCII letter or digit (or `b.len()`),
/// eight bytes at a time.
#[inline(always)]
fn ascii_alnum_end(b: &[u8], mut j: usize) -> usize {
    while let Some(chunk) = b.get(j..j + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let other = !alnum_bytes(x) & HIGH_BITS;
        if other != 0 {
            return j + (other.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    while j < b.len() && b[j].is_ascii_alphanumeric() {
        j += 1;
    }
    j
}

/// The first index from `i` on whose byte is an ASCII letter or digit or not ASCII (or
/// `b.len()`), and whether a `'\n'` lies before it, eight bytes at a time.
#[inline(always)]
fn skip_separators(b: &[u8], mut i: usize) -> (usize, bool) {
    let mut new_line = false;
    while let Some(chunk) = b.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let stop = (alnum_bytes(x) | x) & HIGH_BITS;
        let newlines = zero_bytes(x ^ (ONES * u64::from(b'\n')));
        if stop != 0 {
            let before = (stop & stop.wrapping_neg()) - 1; // the bytes below the first stop
            return (
                i + (stop.trailing_zeros() / 8) as usize,
                new_line | (newlines & before != 0),
            );
        }
        new_line |= newlines != 0;
        i += 8;
    }
    while i < b.len() && is_separator(b[i]) {
        new_line |= b[i] == b'\n';
        i += 1;
    }
    (i, new_line)
}

/// `char::is_alphanumeric`, answered without the Unicode tables for the non-ASCII characters
/// that dominate real text: Latin-1 letters and signs, the General Punctuation block (dashes,
/// quotes, spaces) and U+FFFD. Each miss in the standard tables costs a few hundred
/// instructions; a unit test holds this to the standard answer on every character it decides.
#[inline]
fn is_alphanumeric(ch: char) -> bool {
    match ch as u32 {
        // ª ² ³ µ ¹ º ¼ ½ ¾, and the letters from À except × and ÷.
        c @ 0x80..=0xff => {
            matches!(c, 0xaa | 0xb2 | 0xb3 | 0xb5 | 0xb9 | 0xba | 0xbc..=0xbe | 0xc0..=0xff)
                && c != 0xd7
                && c != 0xf7
        }
        0x2000..=0x206f | 0xfffd => false,
        _ => ch.is_alphanumeric(),
    }
}

/// True for a letter of the scripts written without spaces between words: Chinese characters
/// (with their iteration marks and numerals), kana and bopomofo, and Thai, Lao, Khmer, Myanmar
/// and Tai Tham. Each is a term of its own: as runs, a Chinese or Japanese clause (a Thai
/// phrase) would be one term, and one character changed in it would change every shingle over
/// it, so near duplicates that are 95 % the same would share almost no shingle. (Korean is
/// written with spaces, and keeps its runs.) Splitting words needs a dictionary; characters
/// as terms is how near-duplicate detection shingles such text without one (k = 8 characters
/// span two or three words). The combining marks of these scripts that are not alphanumeric
/// (Thai and Lao tone marks, Khmer's coeng, Myanmar's asat) are separators, as before, and
/// drop out. Asked only of alphanumeric characters.
#[inline]
fn is_unspaced(ch: char) -> bool {
    matches!(ch as u32,
        0x0e00..=0x0eff // Thai, Lao
        | 0x1000..=0x109f // Myanmar
        | 0x1780..=0x17ff // Khmer
        | 0x19e0..=0x19ff // Khmer symbols
        | 0x1a20..=0x1aaf // Tai Tham
        | 0x3005..=0x303c // 々 〆 〇, Hangzhou numerals, kana repeat marks
        | 0x3040..=0x312f // hiragana, katakana, bopomofo
        | 0x3190..=0x31ff // kanbun, bopomofo extended, katakana phonetic extensions
        | 0x3400..=0x4dbf // CJK extension A
        | 0x4e00..=0x9fff // CJK unified ideographs
        | 0xa9e0..=0xa9ff // Myanmar extended-B
        | 0xaa60..=0xaa7f // Myanmar extended-A
        | 0xf900..=0xfaff // CJK compatibility ideographs
        | 0xff66..=0xff9f // halfwidth katakana
        | 0x1_b000..=0x1_b16f // kana supplement and extended-A
        | 0x2_0000..=0x3_134f // CJK extensions B-G, compatibility supplement
    )
}

/// Like [`for_each_term`], also telling whether a line break (`'\n'`) came between the previous
/// term (or the start of the text) and this one: the chunks of seed 003 are lines of terms.
///
/// The text is first copied into `buf` with its ASCII letters lower-cased (a vectorised copy,
/// and the same byte offsets as `text`); then one forward pass finds the runs of separators
/// and of ASCII letters and digits eight bytes at a time. A term of ASCII letters and digits (nearly every term of
/// most pages) is passed as a slice of that copy; a term with other characters is lower-cased
/// into `buf` after the copy, character by character.
pub fn for_each_term_lines(text: &str, buf: &mut String, mut f: impl FnMut(&str, bool)) {
    buf.clear();
    buf.push_str(text);
    buf.make_ascii_lowercase();
    let b = text.as_bytes();
    let n = b.len();
    let mut i = 0;
    let mut new_line = false;
    loop {
        let (start, nl) = skip_separators(b, i);
        new_line |= nl;
        i = start;
        if i >= n {
            break;
        }
        if b[i] >= 0x80 {
            let ch = text[i..].chars().next().expect("char boundary");
            if ch == IMG_TERM_MARK {
                // An <img> URL term: the whole span up to the closing mark is one term.
                let start = i + ch.len_utf8();
                let len = text[start..].find(IMG_TERM_MARK).unwrap_or(n - start);
                i = (start + len + IMG_TERM_MARK.len_utf8()).min(n);
                if len > 0 {
                    buf.truncate(n);
                    for c in text[start..start + len].chars() {
                        push_lower(c, buf);
                    }
                    f(&buf[n..], std::mem::take(&mut new_line));
                }
                continue;
            }
            if !is_alphanumeric(ch) {
                i += ch.len_utf8();
                continue;
            }
            if is_unspaced(ch) {
                let end = i + ch.len_utf8();
                f(&buf[i..end], std::mem::take(&mut new_line));
                i = end;
                continue;
            }
        } else {
            // An ASCII letter or digit: the run of them is the whole term unless a non-ASCII
            // character continues it.
            let j = ascii_alnum_end(b, i + 1);
            if j == n || is_separator(b[j]) {
                f(&buf[i..j], std::mem::take(&mut new_line));
                i = j;
                continue;
            }
        }
        // A term with non-ASCII characters starts at i: copy it lower-cased after the text,
        // ASCII runs as slices of the lower-cased copy, other characters one by one.
        buf.truncate(n);
        loop {
            let j = ascii_alnum_end(b, i);
            if j > i {
                let from = buf.len();
                buf.push_str(&text[i..j]);
                buf[from..].make_ascii_lowercase();
                i = j;
            }
            if i >= n || b[i] < 0x80 {
                break;
            }
            let ch = text[i..].chars().next().expect("char boundary");
            if !is_alphanumeric(ch) || is_unspaced(ch) {
                break;
            }
            push_lower(ch, buf);
            i += ch.len_utf8();
        }
        f(&buf[n..], std::mem::take(&mut new_line));
    }
}

fn push_lower(c: char, buf: &mut String) {
    if c.is_ascii() {
        buf.push(c.to_ascii_lowercase());
    } else {
        buf.extend(c.to_lowercase());
    }
}

/// The normalised-text hash: XXH3-128 of the terms joined by single spaces, and the term count.
/// Two pages with the same visible words in the same order hash alike whatever their markup.
pub fn text_hash(text: &str, buf: &mut String) -> (u128, u64) {
    let mut h = Xxh3::new();
    let mut count = 0u64;
    for_each_term(text, buf, |t| {
        if count > 0 {
            h.update(b" ");
        }
        h.update(t.as_bytes());
        count += 1;
    });
    (h.digest128(), count)
}

/// The title's hash: 32 bits of XXH3 of its terms joined by single spaces (so case, entities
/// and spacing do not matter), never 0; 0 when the page has no title or its title no terms.
pub fn title_hash(ex: &Extraction, buf: &mut String) -> u32 {
    match ex.title() {
        Some(title) => match text_hash(title, buf) {
            (_, 0) => 0,
            (h, _) => (h as u32).max(1),
        },
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(html: &str, page: &str) -> Extraction {
        let mut e = Extraction::default();
        extract(html, Some(&url::Url::parse(page).unwrap()), &mut e);
        e
    }

    #[test]
    fn img_urls_are_terms_per_seed_001() {
        let e = ex(
            r#"<p>see <img src="/pics/Logo.PNG"> and <IMG SRC='http://cdn.example/a/b.gif?x=1#f'> done</p>"#,
            "http://www.a.example/dir/page.html",
        );
        assert_eq!(
            terms(&e.text),
            [
                "see",
                "logo.png",
                "and",
                "http://cdn.example/a/b.gif?x=1",
                "done"
            ]
        );
    }

    #[test]
    fn links_are_resolved_absolute_http_only() {
        let e = ex(
            r#"<base href="http://b.example/root/"><a href="x.html#top">x</a><a href='../y.html?q=1&amp;r=2'>y</a>
               <a href="mailto:me@a.example">m</a><a href=javascript:void(0)>j</a><area href="/z">
               <iframe src="https://c.example/f"></iframe><a name=top>no href</a><a href = "http://d.example">d</a>"#,
            "http://a.example/dir/page.html",
        );
        assert_eq!(
            e.links().collect::<Vec<_>>(),
            [
                "http://b.example/root/x.html",
                "http://b.example/y.html?q=1&r=2",
                "http://b.example/z",
                "https://c.example/f",
                "http://d.example/"
            ]
        );
    }

    #[test]
    fn refresh_targets_are_read_as_browsers_read_them() {
        for (content, want) in [
            ("0;URL=../x.html", Some("../x.html")),
            ("0; url='x.html'", Some("x.html")),
            (" 0 , URL = \"x.html\" trailing", Some("x.html")),
            ("0.5;url=x.html", Some("x.html")),
            (".5;url=x.html", Some("x.html")),
            ("00 x.html", Some("x.html")),
            ("0;x.html", Some("x.html")),
            ("0;urlx.html", Some("x.html")),
            ("0", None),
            ("0;", None),
            ("0;url=", None),
            ("1;url=x.html", None),
            ("10; url=x.html", None),
            ("0x;url=x.html", None),
            ("url=x.html", None),
            ("", None),
        ] {
            assert_eq!(refresh_target(content), want, "{content:?}");
        }
    }

    #[test]
    fn an_instant_refresh_to_another_url_is_a_redirect() {
        let page = "http://a.example/docs/old.html";
        let redirects = |html: &str| ex(html, page).redirects();
        assert!(redirects(
            r#"<head><meta http-equiv="refresh" content="0;URL=../new/x.html"><title>Redirection</title></head>"#
        ));
        assert!(redirects(
            r#"<META HTTP-EQUIV=Refresh CONTENT="0; url=https://b.example/">"#
        ));
        assert!(redirects(
            r#"<base href="http://c.example/"><meta content="0;url=x" http-equiv="refresh">"#
        ));
        assert!(redirects(
            r#"<meta http-equiv="refresh" content="0;url=old.html?v=2">"#
        ));
        // Not redirects: a later refresh (the page shows first), a reload, the page itself,
        // another meta, a URL that is not http(s).
        for html in [
            r#"<meta http-equiv="refresh" content="5;url=../new/x.html"><p>Moved: see the new page.</p>"#,
            r#"<meta http-equiv="refresh" content="0">"#,
            r#"<meta http-equiv="refresh" content="300">"#,
            r#"<meta http-equiv="refresh" content="0;url=old.html#top">"#,
            r#"<meta name="refresh" content="0;url=x.html">"#,
            r#"<meta http-equiv="content-type" content="0;url=x.html">"#,
            r#"<meta http-equiv="refresh" content="0;url=javascript:go()">"#,
            // For browsers without scripts only.
            r#"<head><noscript><meta http-equiv="refresh" content="0;url=/nojs.html"></noscript></head>"#,
            "<p>0;url=x.html</p>",
        ] {
            assert!(!redirects(html), "{html}");
        }
        // After the noscript element, a refresh counts again.
        assert!(redirects(
            r#"<NOSCRIPT><p>on</p></NOSCRIPT><meta http-equiv="refresh" content="0;url=x">"#
        ));
        assert!(!redirects(
            r#"<noscript><noscriptx></noscriptx><meta http-equiv="refresh" content="0;url=x">"#
        ));
        // Without the page's URL nothing resolves, so nothing is a redirect.
        let mut e = Extraction::default();
        extract(
            r#"<meta http-equiv="refresh" content="0;url=x">"#,
            None,
            &mut e,
        );
        assert!(!e.redirects());
        // The next page starts clean.
        let mut e = Extraction::default();
        let url = url::Url::parse(page).unwrap();
        extract(
            r#"<meta http-equiv="refresh" content="0;url=x">"#,
            Some(&url),
            &mut e,
        );
        assert!(e.redirects());
        extract("<p>text</p>", Some(&url), &mut e);
        assert!(!e.redirects());
    }

    #[test]
    fn the_marker_in_page_text_is_blanked() {
        let e = ex("a\u{FFFC}b&#xFFFC;c", "http://a.example/");
        assert_eq!(terms(&e.text), ["a", "b", "c"]);
    }

    fn vt(html: &str) -> String {
        let mut s = String::new();
        visible_text(html, &mut s);
        s.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn terms(text: &str) -> Vec<String> {
        let mut v = vec![];
        for_each_term(text, &mut String::new(), |t| v.push(t.to_owned()));
        v
    }

    #[test]
    fn the_title_is_the_first_title_before_the_body() {
        let title = |html: &str| {
            let mut e = Extraction::default();
            extract(html, None, &mut e);
            (
                e.title().map(str::to_owned),
                title_hash(&e, &mut String::new()),
            )
        };
        let (t, h) = title("<html><head><TITLE>The  R&amp;D\nmanual</title></head><p>x</p>");
        assert_eq!(t.as_deref(), Some("The  R&D manual"));
        assert_ne!(h, 0);
        // Case, spacing and entities do not matter; words do.
        assert_eq!(title("<title>the r&#38;d MANUAL </title>").1, h);
        assert_ne!(title("<title>The R&amp;D guide</title>").1, h);
        // No title, an empty one, or one only inside the body (an SVG's) is none.
        assert_eq!(title("<html><body><p>no title</p></body>"), (None, 0));
        assert_eq!(title("<head><title> </title></head>").1, 0);
        assert_eq!(
            title("<body><svg><title>Chart</title></svg></body>"),
            (None, 0)
        );
        // The first one counts, and an unclosed one runs to the end.
        assert_eq!(
            title("<title>One</title><title>Two</title>").0.as_deref(),
            Some("One")
        );
        assert_eq!(
            title("<head><title>Open to the end").0.as_deref(),
            Some("Open to the end")
        );
    }

    #[test]
    fn drops_markup_script_style_comments() {
        let html = "<!doctype html><html><head><title>T&amp;C</title><style>p{color:red}</style>\
            <script type=\"x\">if (a<b) { x = '</p>'; }</script></head>\
            <body><!-- hidden <p>no</p> --><p class=\"a>b\">Caf&eacute; &#233;t&#xE9;</p>\
            <SCRIPT>bad()</SCRIPT>ok<br/>x < y <3</body></html>";
        assert_eq!(vt(html), "T&C Café été ok x < y <3");
    }

    #[test]
    fn tags_become_spaces() {
        assert_eq!(vt("a<b>b</b>c"), "a b c");
        assert_eq!(terms(&vt("<p>one</p><p>two</p>")), ["one", "two"]);
    }

    #[test]
    fn unclosed_constructs_run_to_the_end() {
        assert_eq!(vt("text <!-- never closed <p>x</p>"), "text");
        assert_eq!(vt("text <script>never closed"), "text");
        assert_eq!(vt("text <a href=\"never closed>more"), "text");
        assert_eq!(vt("a <"), "a <");
    }

    #[test]
    fn terms_are_unicode_alphanumeric_runs_lowercased() {
        assert_eq!(
            terms("Hello, WORLD! x_y Straße 42nd ÉCOLE http://a.example/b.html"),
            [
                "hello", "world", "x", "y", "straße", "42nd", "école", "http", "a", "example", "b",
                "html"
            ]
        );
    }

    #[test]
    fn each_character_of_a_script_without_spaces_is_a_term() {
        assert_eq!(
            terms("東京は日本の首都です。Tokyo市 ﾃｽﾄ 한국어 단어"),
            [
                "東",
                "京",
                "は",
                "日",
                "本",
                "の",
                "首",
                "都",
                "で",
                "す",
                "tokyo",
                "市",
                "ﾃ",
                "ｽ",
                "ﾄ",
                "한국어",
                "단어"
            ]
        );
        assert_eq!(terms("ab中cd"), ["ab", "中", "cd"]);
        assert_eq!(terms("É中é"), ["é", "中", "é"]);
        assert_eq!(terms("𠀀𠀁"), ["𠀀", "𠀁"], "extension B");
        // Thai: letters and vowel signs are terms, the tone mark (not alphanumeric) drops out,
        // Thai digits are terms one by one, as Lao, Khmer and Myanmar letters are.
        assert_eq!(
            terms("ภาษาไทย ค่ะ ๑๒"),
            ["ภ", "า", "ษ", "า", "ไ", "ท", "ย", "ค", "ะ", "๑", "๒"]
        );
        assert_eq!(terms("ລາວ"), ["ລ", "າ", "ວ"]);
        assert_eq!(terms("ខ្មែរ"), ["ខ", "ម", "ែ", "រ"]);
        assert_eq!(terms("မြန်မာ"), ["မ", "ြ", "န", "မ", "ာ"]);
        assert_eq!(terms("abไทยcd"), ["ab", "ไ", "ท", "ย", "cd"]);
    }

    #[test]
    fn text_hash_ignores_markup_and_spacing_but_not_words() {
        let mut buf = String::new();
        let (a, na) = text_hash("Hello   world", &mut buf);
        let (b, nb) = text_hash("hello world", &mut buf);
        let (c, _) = text_hash("hello world again", &mut buf);
        assert_eq!((a, na), (b, nb));
        assert_eq!(na, 2);
        assert_ne!(a, c);
        // golden: pins the hash function and the join rule
        assert_eq!(
            format!("{a:032x}"),
            format!("{:032x}", xxhash_rust::xxh3::xxh3_128(b"hello world"))
        );
    }

    /// The tokenizer as first written (char by char): the fast one must agree with it.
    fn reference_terms(text: &str) -> Vec<String> {
        let mut v = vec![];
        let mut chars = text.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            if c == IMG_TERM_MARK {
                let rest = &text[at + c.len_utf8()..];
                let len = rest.find(IMG_TERM_MARK).unwrap_or(rest.len());
                while chars
                    .peek()
                    .is_some_and(|&(k, _)| k <= at + c.len_utf8() + len)
                {
                    chars.next();
                }
                if len > 0 {
                    v.push(rest[..len].chars().flat_map(char::to_lowercase).collect());
                }
                continue;
            }
            if !c.is_alphanumeric() {
                continue;
            }
            if is_unspaced(c) {
                v.push(c.to_string());
                continue;
            }
            let mut t: String = c.to_lowercase().collect();
            while let Some(&(_, c)) = chars.peek() {
                if !c.is_alphanumeric() || is_unspaced(c) {
                    break;
                }
                t.extend(c.to_lowercase());
                chars.next();
            }
            v.push(t);
        }
        v
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(3000))]
        /// The references decoded here are decoded exactly as html_escape decodes them, whole
        /// pieces at a time: common ones, names it knows or not, numbers of every kind it takes
        /// or leaves (controls, surrogates, overflows, signs, leading zeros), references cut
        /// short or broken by another `&`.
        #[test]
        fn references_decode_as_html_escape_decodes_them(
            s in "(&|;|#|x|&#|&#x|a|é| |\\n|&nbsp;|&nbsp|&gt;|&GT;|&lt;|&amp;|&amp|&quot;|&apos;|&copy;|&rarr;|&Auml;|&foo;|&nbsp x;|&#39;|&#039;|&#0000039;|&#160;|&#9;|&#10;|&#0;|&#31;|&#32;|&#127;|&#151;|&#8212;|&#55296;|&#999999;|&#1114111;|&#1114112;|&#99999999999;|&#-5;|&#+5;|&#x41;|&#X41;|&#x;|&#;|&;|[0-9]){0,24}"
        ) {
            let mut ours = String::from("kept:");
            push_decoded(&s, &mut ours);
            let mut theirs = String::from("kept:");
            html_escape::decode_html_entities_to_string(&s, &mut theirs);
            proptest::prop_assert_eq!(ours, theirs);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(2000))]
        #[test]
        fn fast_tokenizer_agrees_with_the_reference(s in "([a-zA-Z0-9]{0,6}|[A-Z][a-z]{30,36}|[ .,\n_-]|\u{FFFC}|[\u{a0}-\u{ff}]|\u{130}|\u{2014}|\u{fffd}|\u{3000}|\u{4e2d}|\u{3042}|\u{d55c}|\u{0e01}|\u{0e48}|\u{17d2}|\u{1d7d8}|\u{2160}|\u{300}){0,40}") {
            proptest::prop_assert_eq!(terms(&s), reference_terms(&s));
            // The flag says whether a '\n' lies between the previous term (or the start) and
            // this term. Without image marks every term is one alphanumeric run, so a simple
            // scan gives the expected flags.
            let mut flags = vec![];
            for_each_term_lines(&s, &mut String::new(), |_, nl| flags.push(nl));
            proptest::prop_assert_eq!(flags.len(), terms(&s).len());
            if !s.contains(IMG_TERM_MARK) {
                let mut expected = vec![];
                let mut pending = false;
                let mut in_term = false;
                for c in s.chars() {
                    if c.is_alphanumeric() {
                        if !in_term || is_unspaced(c) {
                            expected.push(pending);
                            pending = false;
                        }
                        in_term = !is_unspaced(c);
                    } else {
                        pending |= c == '\n';
                        in_term = false;
                    }
                }
                proptest::prop_assert_eq!(&flags, &expected);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn swar_run_end_agrees_with_a_byte_loop(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40), skew in 0usize..12, from in 0usize..40) {
            // All byte values, at every alignment and start.
            let b = &b[skew.min(b.len())..];
            let from = from.min(b.len());
            let mut expect = from;
            while expect < b.len() && b[expect].is_ascii_alphanumeric() {
                expect += 1;
            }
            proptest::prop_assert_eq!(ascii_alnum_end(b, from), expect);
        }
    }

    proptest::proptest! {
        #[test]
        fn swar_skip_agrees_with_a_byte_loop(b in proptest::collection::vec(proptest::prop_oneof![proptest::prelude::any::<u8>(), proptest::prelude::Just(b'\n'), proptest::prelude::Just(b' ')], 0..40), skew in 0usize..12, from in 0usize..40) {
            let b = &b[skew.min(b.len())..];
            let from = from.min(b.len());
            let (mut expect, mut nl) = (from, false);
            while expect < b.len() && b[expect] < 0x80 && !b[expect].is_ascii_alphanumeric() {
                nl |= b[expect] == b'\n';
                expect += 1;
            }
            proptest::prop_assert_eq!(skip_separators(b, from), (expect, nl));
        }
    }

    #[test]
    fn swar_run_end_on_every_byte_value() {
        for v in 0..=255u8 {
            for at in 0..9 {
                let mut b = vec![b'a'; 9];
                b[at] = v;
                let expect = if v.is_ascii_alphanumeric() { 9 } else { at };
                assert_eq!(ascii_alnum_end(&b, 0), expect, "byte {v:#x} at {at}");
            }
        }
    }

    #[test]
    fn fast_alphanumeric_agrees_with_the_standard_library() {
        for c in (0..0x3000).chain([0xfffd, 0xfffc, 0x1d7d8]) {
            let ch = char::from_u32(c).unwrap();
            assert_eq!(is_alphanumeric(ch), ch.is_alphanumeric(), "{c:#x}");
        }
    }

    #[test]
    fn line_breaks_are_reported_between_terms() {
        let mut v = vec![];
        for_each_term_lines("a b\n\nc, d\ne", &mut String::new(), |t, nl| {
            v.push((t.to_owned(), nl))
        });
        assert_eq!(
            v,
            [
                ("a".into(), false),
                ("b".into(), false),
                ("c".into(), true),
                ("d".into(), false),
                ("e".into(), true)
            ]
        );
    }

    proptest::proptest! {
        #[test]
        fn the_quick_path_for_plain_runs_writes_what_the_general_one_does(
            run in "([a-z .]{0,4}|[a-z ]{20,40}|\n|\r|&|&amp;|&lt;b&gt;|&#xFFFC;|\u{FFFC}|\u{F000}|\u{FFFD}|\u{E9}|\t){0,12}",
            in_pre: bool,
        ) {
            let (mut quick, mut general) = (String::from("x"), String::from("x"));
            push_text(&run, in_pre, &mut quick);
            push_text_general(&run, in_pre, &mut general);
            proptest::prop_assert_eq!(quick, general);
        }

        #[test]
        fn never_panics_and_output_is_bounded(s in "(<[a-z!/?]{0,3}|[a-z ]{0,5}|&[a-z#0-9]{0,5};?|\"|'|=|>|-->){0,60}") {
            let mut out = String::new();
            visible_text(&s, &mut out);
            // Every byte of output comes from a text run or a tag's space.
            proptest::prop_assert!(out.chars().count() <= s.chars().count() + s.len());
        }

        /// Any `content` value is read without a panic (slicing stays on character
        /// boundaries), and a target, when there is one, is a non-empty trimmed piece of it.
        #[test]
        fn refresh_contents_of_any_shape_are_read_safely(content in "([0-9.]{0,3}|[;, ]|[uU][rR][lL]|=|\"|'|[a-z/]{0,4}|\u{e9}|\u{4e2d}|\u{1f600}){0,12}") {
            if let Some(url) = refresh_target(&content) {
                proptest::prop_assert!(!url.is_empty() && url.trim() == url);
                proptest::prop_assert!(content.contains(url));
            }
        }

        /// Pages whose meta tags and noscript elements come in any order and shape extract
        /// without a panic, and only a page with a refresh meta can be a redirect.
        #[test]
        fn pages_with_meta_tags_of_any_shape_extract_safely(html in "(<meta|<META| http-equiv=refresh| http-equiv=\"refresh\"| content=\"0;url=x\"| content='1;url=y'| content=0|>|<noscript>|</noscript>|</noscriptx>|<p>|text |\u{4e2d}){0,24}") {
            let page = url::Url::parse("http://a.example/p.html").unwrap();
            let mut e = Extraction::default();
            extract(&html, Some(&page), &mut e);
            if e.redirects() {
                proptest::prop_assert!(html.to_ascii_lowercase().contains("refresh"));
            }
        }
    }
}
