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
fn is_plain(c: u8) -> bool {
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
    let (mut colon, mut delimited, mut percent) = (false, false, false);
    for &c in b {
        if !is_plain(c) {
            return false;
        }
        match c {
            b':' if !delimited => colon = true,
            b'/' | b'?' => delimited = true,
            b'%' => percent = true,
            _ => {}
        }
    }
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
    if let Some(rest) = reference
        .strip_prefix("http://")
        .or_else(|| reference.strip_prefix("https://"))
    {
        // Absolute: a plain lower-case host, then a path without dot segments.
        let host_len = rest.find(['/', '?']).unwrap_or(rest.len());
        let (host, tail) = rest.split_at(host_len);
        let host_ok = !host.is_empty()
            && host
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
            && !host.starts_with(['.', '-'])
            && !host.ends_with('.')
            && !host.contains("..");
        if !host_ok || has_dot_segment(tail.split('?').next().unwrap_or("")) {
            return false;
        }
        out.push_str(&reference[..reference.len() - tail.len()]);
        if !tail.starts_with('/') {
            out.push('/'); // `http://host` and `http://host?q` get the root path
        }
        out.push_str(tail);
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
        out.push_str(reference);
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
        push_segments(rooted, root, out);
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
        push_segments(path, root, out);
    }
    out.push_str(query);
    true
}

/// Appends the `/`-separated `segments` to `out` (which ends with `/`), removing `.` and `..`
/// as RFC 3986 §5.2.4 does; `..` never climbs above `root` (the index of the path's first `/`).
fn push_segments(segments: &str, root: usize, out: &mut String) {
    if !has_dot_segment(segments) {
        out.push_str(segments); // nothing to remove: the common case, copied whole
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
                out.push_str(seg);
                if !last {
                    out.push('/');
                }
            }
        }
    }
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
            "HTTP://B.example/x",
            "//c.example/y",
            "http://d.example:8080/z",
            "a b.html",
            "http://u@e.example/",
            "HTTP:x",
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn fast_path_agrees_with_the_url_crate(
            base in "https?://[a-c]{1,2}\\.example(/[a-z.]{0,3}){0,4}(\\?[a-z=&]{0,4})?",
            r in "(https?://[a-cA-C]{1,2}\\.example|mailto:|javascript:|[a-z]{1,4}:|HTTP:)?(/|\\.\\./|\\./|[a-z]{1,3}/?|\\?[a-z=]{0,3}|#[a-z]{0,2}|\\.|\\.\\.|//|:| |%|%2[0-9A-Fa-f]|%zz|@|u@h){0,6}",
        ) {
            let base = Url::parse(&base).unwrap();
            let mut out = String::new();
            let ok = resolve(&base, &r, &mut out);
            prop_assert_eq!(ok.then(|| out.clone()), join(base.as_str(), &r), "base {} ref {:?}", base, r);
        }
    }
}
