//! Resolving link references against a page URL (RFC 3986 §5.2) into a reusable buffer.
//!
//! Pages carry dozens of links, and `url::Url::join` allocates a new URL for each. The shapes
//! that make up almost every link on the web (absolute `http(s)://host/path`, `/root/relative`,
//! `relative/../paths`, `?query`, `#fragment`) are resolved here by hand into the caller's
//! buffer, without allocating; anything else (other schemes, ports, user info, `//authority`,
//! characters that need percent-encoding, upper-case hosts) goes to `url::Url::join`, so the
//! result is always what the `url` crate would give. A differential property test holds the two
//! paths to the same output.

use url::{Position, Url};

/// Characters the fast path copies as they are: the `url` crate leaves them unchanged in paths
/// and queries of http(s) URLs (`%` stays as it is, valid escape or not; `@` is only special in
/// the authority, which the fast path checks separately).
const fn is_plain(c: u8) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'/'
                | b'?'
                | b'='
                | b'&'
                | b'+'
                | b':'
                | b';'
                | b','
                | b'!'
                | b'$'
                | b'('
                | b')'
                | b'*'
                | b'%'
                | b'@'
        )
}

/// [`BYTE_CLASS`] bits: the fast path copies the byte in a reference, or percent-encodes it;
/// the bytes that matter to a reference's shape; and the bytes of a plain host name.
const PLAIN: u8 = 1;
const ENCODED: u8 = 2;
const COLON: u8 = 4;
const DELIMITER: u8 = 8; // '/' or '?'
const PERCENT: u8 = 16;
const HOST: u8 = 32; // a letter, a digit, '-' or '.'

/// The classes of every byte (0: the fast path does not handle the reference).
static BYTE_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = if is_plain(b) {
            PLAIN
        } else if is_encoded(b) {
            ENCODED
        } else {
            0
        };
        t[c] |= match b {
            b':' => COLON,
            b'/' | b'?' => DELIMITER,
            b'%' => PERCENT,
            _ => 0,
        };
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'.' {
            t[c] |= HOST;
        }
        c += 1;
    }
    t
};

/// Resolves `reference` against `base` into `out` (cleared), fragment dropped. Returns false
/// when the result is not an http(s) URL or the reference does not parse.
pub fn resolve(base: &Url, reference: &str, out: &mut String) -> bool {
    out.clear();
    if resolve_fast(base, reference, out) {
        return !out.is_empty();
    }
    out.clear();
    match base.join(reference) {
        Ok(mut u) if matches!(u.scheme(), "http" | "https") => {
            u.set_fragment(None);
            out.push_str(u.as_str());
            true
        }
        _ => false,
    }
}

/// The allocation-free path: true when it handled `reference`; the result is in `out`, left
/// empty when the reference resolves to something other than an http(s) URL.
pub fn resolve_fast(base: &Url, reference: &str, out: &mut String) -> bool {
    if !matches!(base.scheme(), "http" | "https") {
        return false;
    }
    let reference = reference.split('#').next().unwrap_or("");
    // One pass over the bytes: every one plain, and where the first ':' lies before any '/' or
    // '?' (a scheme, or a relative path the url crate must judge).
    let b = reference.as_bytes();
    let mut colon = false;
    // Leading and trailing spaces are trimmed by the url crate, not encoded.
    if b.first() == Some(&b' ') || b.last() == Some(&b' ') {
        return false;
    }
    // Each byte's classes from one table, OR-ed up without a branch but the one that leaves.
    let mut seen = 0u8;
    for &c in b {
        let class = BYTE_CLASS[usize::from(c)];
        if class == 0 {
            return false;
        }
        // A ':' counts only before the first '/' or '?'.
        colon |= class & COLON != 0 && seen & DELIMITER == 0;
        seen |= class;
    }
    let (percent, encode) = (seen & PERCENT != 0, seen & ENCODED != 0);
    // `%2e` is a dot in dot segments (WHATWG URL): leave such paths to the url crate.
    if percent
        && b.windows(3)
            .any(|w| w[0] == b'%' && w[1] == b'2' && (w[2] | 0x20) == b'e')
    {
        return false;
    }
    if colon {
        if let Some(scheme) = scheme_of(reference) {
            if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
                // mailto:, javascript:, ftp: ...: never an http(s) result, decided without
                // parsing.
                out.clear();
                return true;
            }
        }
    }
    if let Some((https, rest)) = strip_http_scheme(reference) {
        // Absolute: [user@]host[:port], then a path without dot segments.
        let authority_len = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_len);
        let (user, host_port) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let (host, port) = match host_port.find(':') {
            Some(colon) => (&host_port[..colon], Some(&host_port[colon + 1..])),
            None => (host_port, None),
        };
        let user_ok = user.is_none_or(|u| {
            !u.is_empty()
                && u.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~'))
        });
        let port = match port.map(parse_port) {
            None => None,
            Some(Some(p)) => Some(p),
            Some(None) => return false,
        };
        if !user_ok || !is_plain_host(host) || has_dot_segment(tail.split('?').next().unwrap_or(""))
        {
            return false;
        }
        out.push_str(if https { "https://" } else { "http://" });
        if let Some(u) = user {
            out.push_str(u);
            out.push('@');
        }
        let host_start = out.len();
        out.push_str(host);
        out[host_start..].make_ascii_lowercase();
        let default_port = if https { 443 } else { 80 };
        if let Some(p) = port.flatten().filter(|&p| p != default_port) {
            out.push(':');
            push_number(p, out);
        }
        if !tail.starts_with('/') {
            out.push('/'); // `http://host` and `http://host?q` get the root path
        }
        push_path_and_query(tail, encode, out);
        return true;
    }
    if reference.starts_with("//") {
        return false;
    }
    let origin = &base[..Position::BeforePath];
    if reference.is_empty() {
        out.push_str(&base[..Position::AfterQuery]);
        return true;
    }
    if reference.starts_with('?') {
        out.push_str(&base[..Position::AfterPath]);
        push_path_and_query(reference, encode, out);
        return true;
    }
    let (path, query) = match reference.find('?') {
        Some(q) => reference.split_at(q),
        None => (reference, ""),
    };
    if colon {
        return false; // a ':' in the first segment (`http:x`, `a:b`): the url crate decides
    }
    out.push_str(origin);
    let root = out.len();
    if let Some(rooted) = path.strip_prefix('/') {
        out.push('/');
        push_segments(rooted, root, encode, out);
    } else {
        let base_path = base.path();
        let dir_len = base_path
            .bytes()
            .rposition(|c| c == b'/')
            .map_or(0, |i| i + 1);
        let dir = &base_path[..dir_len];
        if dir.is_empty() {
            out.push('/');
        } else {
            out.push_str(dir);
        }
        push_segments(path, root, encode, out);
    }
    push_encoded(query, QUERY, encode, out);
    true
}

/// Appends the `/`-separated `segments` to `out` (which ends with `/`), removing `.` and `..`
/// as RFC 3986 §5.2.4 does; `..` never climbs above `root` (the index of the path's first `/`).
fn push_segments(segments: &str, root: usize, encode: bool, out: &mut String) {
    if !has_dot_segment(segments) {
        push_encoded(segments, PATH, encode, out); // nothing to remove: copied whole
        return;
    }
    let mut parts = segments.split('/').peekable();
    while let Some(seg) = parts.next() {
        let last = parts.peek().is_none();
        match seg {
            "." => {}
            ".." => {
                // out ends with '/': drop the last segment before it, keeping the root '/'.
                if out.len() > root + 1 {
                    out.pop();
                    let cut = out[root..].rfind('/').map_or(root + 1, |i| root + i + 1);
                    out.truncate(cut);
                }
            }
            _ => {
                push_encoded(seg, PATH, encode, out);
                if !last {
                    out.push('/');
                }
            }
        }
    }
}

/// Bytes the fast path percent-encodes where the url crate does (WHATWG URL's path and special
/// query percent-encode sets, restricted to the printable ones): space, `"`, `<`, `>`, the
/// path-only `` ` ``, `{`, `}`, the query-only `'`, and every byte of a non-ASCII character.
const fn is_encoded(c: u8) -> bool {
    c >= 0x80 || matches!(c, b' ' | b'"' | b'<' | b'>' | b'`' | b'{' | b'}' | b'\'')
}

/// Which percent-encode set applies.
const PATH: bool = false;
const QUERY: bool = true;

/// Appends `s` with the bytes of its percent-encode set (path or query) encoded as `%XX`;
/// `encode` false says the reference has no such byte at all, so `s` is copied as it is.
fn push_encoded(s: &str, query: bool, encode: bool, out: &mut String) {
    let needs = |c: u8| {
        c >= 0x80
            || matches!(c, b' ' | b'"' | b'<' | b'>')
            || (!query && matches!(c, b'`' | b'{' | b'}'))
            || (query && c == b'\'')
    };
    if !encode {
        out.push_str(s);
        return;
    }
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for c in s.bytes() {
        if needs(c) {
            out.push('%');
            out.push(char::from(HEX[usize::from(c >> 4)]));
            out.push(char::from(HEX[usize::from(c & 15)]));
        } else {
            out.push(char::from(c));
        }
    }
}

/// Appends a path (optionally followed by `?query`), each part with its percent-encode set.
fn push_path_and_query(s: &str, encode: bool, out: &mut String) {
    match s.find('?').filter(|_| encode) {
        Some(q) => {
            push_encoded(&s[..q], PATH, encode, out);
            push_encoded(&s[q..], QUERY, encode, out);
        }
        None => push_encoded(s, PATH, encode, out),
    }
}

/// `http://` or `https://` in any case: (is https, the rest).
fn strip_http_scheme(reference: &str) -> Option<(bool, &str)> {
    let b = reference.as_bytes();
    if b.len() >= 7 && b[..7].eq_ignore_ascii_case(b"http://") {
        Some((false, &reference[7..]))
    } else if b.len() >= 8 && b[..8].eq_ignore_ascii_case(b"https://") {
        Some((true, &reference[8..]))
    } else {
        None
    }
}

/// A host name the fast path copies (lower-cased): letters, digits, `-` and inner dots, and a
/// last label that does not start with a digit (a number there makes the url crate parse and
/// normalise an IPv4 address, e.g. `1.2` as `1.0.0.2`), or an IPv4 address already in its
/// canonical form (four decimal numbers up to 255, no leading zeros). One pass over the bytes:
/// a link's host is checked for every absolute link of every page.
fn is_plain_host(host: &str) -> bool {
    let b = host.as_bytes();
    let (Some(&first), Some(&last)) = (b.first(), b.last()) else {
        return false;
    };
    let (mut ok, mut prev_dot, mut last_label) = (true, false, 0);
    for (i, &c) in b.iter().enumerate() {
        let dot = c == b'.';
        ok &= BYTE_CLASS[usize::from(c)] & HOST != 0 && !(dot && prev_dot);
        if dot {
            last_label = i + 1;
        }
        prev_dot = dot;
    }
    if b.get(last_label).is_some_and(u8::is_ascii_digit) {
        return is_canonical_ipv4(host);
    }
    ok && first != b'.' && first != b'-' && last != b'.'
}

/// Four decimal numbers up to 255 without leading zeros, separated by dots.
fn is_canonical_ipv4(host: &str) -> bool {
    let mut labels = 0;
    host.split('.').all(|l| {
        labels += 1;
        !l.is_empty()
            && l.len() <= 3
            && l.bytes().all(|c| c.is_ascii_digit())
            && (l == "0" || !l.starts_with('0'))
            && l.parse::<u16>().is_ok_and(|v| v <= 255)
    }) && labels == 4
}

/// A port as the url crate reads it: `Some(None)` for an empty port, `Some(Some(n))` for digits
/// up to 65535 (leading zeros dropped), `None` when the url crate would refuse it.
fn parse_port(p: &str) -> Option<Option<u16>> {
    if p.is_empty() {
        return Some(None);
    }
    if !p.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let digits = p.trim_start_matches('0');
    if digits.len() > 5 {
        return None;
    }
    digits.parse::<u32>().unwrap_or(0).try_into().ok().map(Some)
}

/// Appends a number in decimal without allocating.
fn push_number(n: u16, out: &mut String) {
    let mut digits = [0u8; 5];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[i..].iter().map(|&d| char::from(d)));
}

/// The scheme of a reference (RFC 3986 §3.1: a letter, then letters, digits, `+`, `-`, `.`,
/// before the first `:` of the first segment), if it has one.
fn scheme_of(reference: &str) -> Option<&str> {
    let first = reference.split(['/', '?', '#']).next()?;
    let (scheme, _) = first.split_once(':')?;
    let mut bytes = scheme.bytes();
    let ok = bytes.next().is_some_and(|c| c.is_ascii_alphabetic())
        && bytes.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'));
    ok.then_some(scheme)
}

/// Whether a `/`-separated segment of `path` is `.` or `..` (a byte scan over its dots).
fn has_dot_segment(path: &str) -> bool {
    let b = path.as_bytes();
    let mut i = 0;
    while let Some(p) = b[i..].iter().position(|&c| c == b'.') {
        let at = i + p;
        let mut end = at + 1;
        if b.get(end) == Some(&b'.') {
            end += 1;
        }
        if (at == 0 || b[at - 1] == b'/') && (end == b.len() || b[end] == b'/') {
            return true;
        }
        i = at + 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn join(base: &str, r: &str) -> Option<String> {
        let mut u = Url::parse(base).unwrap().join(r).ok()?;
        u.set_fragment(None);
        matches!(u.scheme(), "http" | "https").then(|| u.to_string())
    }

    #[test]
    fn common_shapes_take_the_fast_path_and_match_the_url_crate() {
        let base = Url::parse("http://www.a.example/docs/15/sub/page.html?x=1#f").unwrap();
        for r in [
            "other.html",
            "../up.html",
            "../../../../too-far.html",
            "./here.html",
            "/root.html?q=1&r=2",
            "dir/",
            "?only=query",
            "",
            "#frag",
            "https://b.example/x/y.html#z",
            "a/./b/../c.html",
            "..",
            ".",
            "http://e.example",
            "http://e.example?q=1",
            "%7Euser/a%20b.html?x=%zz&y=@z",
            // found on the benchmark's pages: ports, upper case, quotes, spaces, non-ASCII
            "http://localhost:8000/polls/",
            "http://127.0.0.1:8000/",
            "https://h.example:443/x",
            "http://h.example:0080/x",
            "HTTP://B.example/x",
            "https://EconPapers.repec.org/RePEc:pra:mprapa:19081",
            "https://en.wikipedia.org/wiki/Cramer's_V?q='x'",
            "Desktop Integration",
            "https://upload.wikimedia.org/x/Balance_\u{e0}_tabac.JPG",
            "https://doi.org/10.1175/1520-0493(1973)101<0701:TKDMLE>2.3.CO;2",
            "https://committer@git.example.org/org2/project2.git",
            "http://http://httpd.apache.org/download.cgi#verify",
            "a`b{c}.html?d`e{f}\"g\"",
        ] {
            let mut out = String::new();
            assert!(resolve_fast(&base, r, &mut out), "{r:?} should be fast");
            assert_eq!(Some(out), join(base.as_str(), r), "{r:?}");
        }
        for r in ["javascript:void(0)", "mailto:x", "ftp:/pub/x", "tel:123"] {
            let mut out = String::new();
            assert!(resolve_fast(&base, r, &mut out) && out.is_empty(), "{r:?}");
            assert_eq!(join(base.as_str(), r), None, "{r:?}");
        }
    }

    #[test]
    fn unusual_shapes_fall_back_and_still_match() {
        let base = Url::parse("http://www.a.example/docs/page.html").unwrap();
        for r in [
            "//c.example/y",
            "http://1.2/z",
            "http://d.example:99999/z",
            "http://u:pw@e.example/",
            "HTTP:x",
            " a.html",
            "a|b.html",
            "http://h\u{e9}.example/",
        ] {
            let mut out = String::new();
            assert!(!resolve_fast(&base, r, &mut out), "{r:?} should fall back");
            let ok = resolve(&base, r, &mut out);
            assert_eq!(ok.then(|| out.clone()), join(base.as_str(), r), "{r:?}");
        }
    }

    #[test]
    fn dot_segments_are_found_by_bytes() {
        for (p, expect) in [
            ("a/b.html", false),
            (".", true),
            ("..", true),
            ("a/./b", true),
            ("a/../b", true),
            ("a/..", true),
            ("./", true),
            ("a.b/c..d/...", false),
            ("/.hidden/x", false),
            ("", false),
        ] {
            assert_eq!(has_dot_segment(p), expect, "{p:?}");
            assert_eq!(p.split('/').any(|s| s == "." || s == ".."), expect, "{p:?}");
        }
    }

    /// `is_plain_host` as it was first written, a condition at a time: the one-pass version
    /// is held to it.
    fn is_plain_host_reference(host: &str) -> bool {
        if host
            .rsplit('.')
            .next()
            .is_some_and(|last| last.starts_with(|c: char| c.is_ascii_digit()))
        {
            return is_canonical_ipv4(host);
        }
        !host.is_empty()
            && host
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-')
            && !host.starts_with(['.', '-'])
            && !host.ends_with('.')
            && !host.as_bytes().windows(2).any(|w| w == b"..")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn one_pass_host_check_agrees_with_the_reference(host in "([a-cA-C]{1,2}|[0-9]{1,3}|\\.|-|_| |\u{e0}){0,6}") {
            prop_assert_eq!(is_plain_host(&host), is_plain_host_reference(&host), "{:?}", host);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn fast_path_agrees_with_the_url_crate(
            base in "https?://[a-c]{1,2}\\.example(:[0-9]{1,3})?(/[a-z.]{0,3}){0,4}(\\?[a-z=&]{0,4})?",
            r in "(https?://([a-z]{1,3}@)?([a-cA-C]{1,2}\\.example|[0-9]\\.[0-9]{1,3}|[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}|[a-c]\\.[0-9]b|http)(:[0-9]{0,6})?|HTTPS?://[A-C]\\.example|mailto:|javascript:|[a-z]{1,4}:|HTTP:)?(/|\\.\\./|\\./|[a-z]{1,3}/?|\\?[a-z=]{0,3}|#[a-z]{0,2}|\\.|\\.\\.|//|:| |%|%2[0-9A-Fa-f]|%zz|@|u@h|[\"<>`{}'|^]|\u{e0}|\u{4e2d}){0,6}",
        ) {
            let base = Url::parse(&base).unwrap();
            let mut out = String::new();
            let ok = resolve(&base, &r, &mut out);
            prop_assert_eq!(ok.then(|| out.clone()), join(base.as_str(), &r), "base {} ref {:?}", base, r);
        }
    }
}
