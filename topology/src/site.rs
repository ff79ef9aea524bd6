//! Hosts and sites of URLs (seed 001 §3): the site of a page is its host name if that has at
//! most one dot, else the host name minus its first label (`www.cs.berkeley.edu` ->
//! `cs.berkeley.edu`).

/// The host of an absolute URL, lower-cased, without port or user info. Cheap: no full parse.
pub fn host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.starts_with('[') {
        return host_port
            .split_once(']')
            .map_or(host_port, |(h, _)| h)
            .trim_start_matches('[');
    }
    host_port.split(':').next().unwrap_or("")
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
