//! How the URLs of a compared pair relate ([`Naming`]): the default policy holds a pair of
//! pages that end in different names, or carry different titles, to a stricter threshold.

use crate::site;

/// How the URLs of a compared pair relate, for the default policy's thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// They end in the same name (see [`url_name`]).
    SameName,
    /// Different names, different sites.
    Renamed,
    /// Different names on one site.
    RenamedOnSite,
    /// Different titles, and different names or one site: held to the stricter of
    /// `min_jaccard_retitled` and the threshold of the names alone.
    Retitled {
        /// The URLs end in the same name.
        same_name: bool,
        /// Both pages are on one site.
        one_site: bool,
    },
}

impl Naming {
    /// The relation of two pages from their [`url_name`]s, site numbers and title hashes
    /// ([`super::Sketch::title`]; 0 for a page without a title, which never counts as a different
    /// title).
    pub fn of(names: (u32, u32), sites: (u32, u32), titles: (u32, u32)) -> Naming {
        let same = same_name(names.0, names.1);
        let one_site = sites.0 == sites.1;
        let retitled = titles.0 != 0 && titles.1 != 0 && titles.0 != titles.1;
        if retitled && (one_site || !same) {
            Naming::Retitled {
                same_name: same,
                one_site,
            }
        } else {
            Naming::by_names(same, one_site)
        }
    }

    /// The relation of two pages by their URLs alone.
    pub(super) fn by_names(same_name: bool, one_site: bool) -> Naming {
        match (same_name, one_site) {
            (true, _) => Naming::SameName,
            (false, true) => Naming::RenamedOnSite,
            (false, false) => Naming::Renamed,
        }
    }
}

/// The name a URL ends in, hashed: its last path segment with its query (not the fragment);
/// `0` for a directory or an `index.*` page without a query (which match any name, as a
/// directory URL serves its index). The query is part of the name: `item.php?id=1` and
/// `item.php?id=2` are two documents of one template, and a copy that differs only in a
/// session id (`x.html?sid=...`) is identical text, which is a pair under any name.
pub fn url_name(url: &str) -> u32 {
    let rest = site::after_scheme(url);
    let path = &rest[..rest
        .bytes()
        .position(|b| b == b'?' || b == b'#')
        .unwrap_or(rest.len())];
    let last = match path.bytes().position(|b| b == b'/') {
        Some(slash) => {
            let p = &path[slash + 1..];
            &p[p.bytes().rposition(|b| b == b'/').map_or(0, |i| i + 1)..]
        }
        None => "",
    };
    let after = &rest[path.len()..];
    let query = match after.strip_prefix('?') {
        Some(q) => &q[..q.find('#').unwrap_or(q.len())],
        None => "",
    };
    if query.is_empty() && (last.is_empty() || last.starts_with("index.")) {
        return 0;
    }
    let mut h = xxhash_rust::xxh3::xxh3_64(last.as_bytes());
    if !query.is_empty() {
        h ^= xxhash_rust::xxh3::xxh3_64(query.as_bytes()).rotate_left(17);
    }
    (h as u32).max(1)
}

pub(super) fn same_name(a: u32, b: u32) -> bool {
    a == 0 || b == 0 || a == b
}
