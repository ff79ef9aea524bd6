//! Hosts and sites of URLs (seed 001 §3): the site of a page is its host name if that has at
//! most one dot, else the host name minus its first label (`www.cs.berkeley.edu` ->
//! `cs.berkeley.edu`).

/// The host of an absolute URL, lower-cased, without port or user info. Cheap: no full parse.
pub fn host(url: &str) -> &str {
    let rest = after_scheme(url);
    let authority = &rest[..rest
        .bytes()
        .position(|b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.starts_with('[') {
        return host_port
            .split_once(']')
            .map_or(host_port, |(h, _)| h)
            .trim_start_matches('[');
    }
    host_port.split(':').next().unwrap_or("")
}

/// What follows the first `://` of a URL (all of it when there is none). A byte scan: this runs
/// several times per page, and a substring search sets up a two-way searcher on every call.
pub fn after_scheme(url: &str) -> &str {
    let b = url.as_bytes();
    let mut i = 0;
    while let Some(p) = b[i..].iter().position(|&c| c == b':') {
        let colon = i + p;
        if b[colon + 1..].starts_with(b"//") {
            return &url[colon + 3..];
        }
        i = colon + 1;
    }
    url
}

/// The site of a host name, per seed 001.
pub fn site(host: &str) -> &str {
    if host.bytes().filter(|&b| b == b'.').count() <= 1 {
        host
    } else {
        host.split_once('.').map_or(host, |(_, rest)| rest)
    }
}

/// True when two URLs are on the same site (compared case-insensitively).
pub fn same_site(a: &str, b: &str) -> bool {
    site(host(a)).eq_ignore_ascii_case(site(host(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_001_site_rule() {
        assert_eq!(site("www.cs.berkeley.edu"), "cs.berkeley.edu");
        assert_eq!(site("berkeley.edu"), "berkeley.edu");
        assert_eq!(site("localhost"), "localhost");
        assert_eq!(site("www.x.example"), "x.example");
    }

    proptest::proptest! {
        /// The byte scan cuts where `split_once("://")` does.
        #[test]
        fn after_scheme_is_split_once(url in "[a-z:/?#@.\\[\\]]{0,16}") {
            let want = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
            proptest::prop_assert_eq!(after_scheme(&url), want);
            let rest = want;
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            if !host_port.starts_with('[') {
                proptest::prop_assert_eq!(host(&url), host_port.split(':').next().unwrap_or(""));
            }
        }
    }

    #[test]
    fn host_extraction() {
        assert_eq!(host("http://www.a.example/x?y#z"), "www.a.example");
        assert_eq!(host("https://u:p@a.example:8080/x"), "a.example");
        assert_eq!(host("http://a.example"), "a.example");
        assert_eq!(host("http://[::1]:80/"), "::1");
    }

    #[test]
    fn same_site_pairs() {
        assert!(same_site("http://www.x.example/a", "http://x.example/b"));
        assert!(same_site(
            "http://www1.portal.example/a",
            "http://www2.portal.example/a"
        ));
        assert!(!same_site("http://a.example/", "http://b.example/"));
    }
}
