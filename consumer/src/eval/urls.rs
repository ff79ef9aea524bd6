//! URLs and sites as the evaluation compares them: interned to numbers, hosts, seed 001's sites.

use std::collections::HashMap;

/// An unordered pair of interned URLs, smaller id first.
pub(super) type Pair = (u32, u32);

pub(super) fn pair(x: u32, y: u32) -> Pair {
    (x.min(y), x.max(y))
}

/// The host of an absolute URL, without scheme, user info and port (not yet lower-cased).
pub(super) fn host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = host_port.strip_prefix('[') {
        return v6.split_once(']').map_or(v6, |(h, _)| h);
    }
    host_port.split(':').next().unwrap_or("")
}

/// The site of a URL (seed 001): its lower-cased host if that has at most one dot, else the
/// host minus its first label.
pub(super) fn site(url: &str) -> String {
    let host = host(url).to_ascii_lowercase();
    if host.bytes().filter(|&b| b == b'.').count() <= 1 {
        host
    } else {
        host.split_once('.')
            .map_or(host.clone(), |(_, s)| s.to_owned())
    }
}

/// URLs and their sites as dense ids.
#[derive(Default)]
pub(super) struct Interner {
    pub(super) ids: HashMap<Box<str>, u32>,
    pub(super) urls: Vec<Box<str>>,
    pub(super) site_of: Vec<u32>,
    pub(super) sites: HashMap<String, u32>,
}

impl Interner {
    pub(super) fn id(&mut self, url: &str) -> u32 {
        if let Some(&id) = self.ids.get(url) {
            return id;
        }
        let id = u32::try_from(self.urls.len()).expect("fewer than 2^32 URLs");
        let n = self.sites.len() as u32;
        let site = *self.sites.entry(site(url)).or_insert(n);
        self.ids.insert(url.into(), id);
        self.urls.push(url.into());
        self.site_of.push(site);
        id
    }

    pub(super) fn url(&self, id: u32) -> &str {
        &self.urls[id as usize]
    }

    pub(super) fn same_site(&self, (x, y): Pair) -> bool {
        self.site_of[x as usize] == self.site_of[y as usize]
    }

    /// The pair as (smaller URL, larger URL) strings.
    pub(super) fn ordered(&self, (x, y): Pair) -> (String, String) {
        let (a, b) = (self.url(x), self.url(y));
        if a <= b {
            (a.to_owned(), b.to_owned())
        } else {
            (b.to_owned(), a.to_owned())
        }
    }
}
