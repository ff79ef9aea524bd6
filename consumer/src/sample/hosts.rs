//! The simulated hosts and what each fetches in a round.

use super::Rng;
use std::collections::VecDeque;

/// A simulated host: name, address and the path prefix its pages live under.
pub(super) struct Host {
    pub(super) name: &'static str,
    pub(super) ip: &'static str,
    pub(super) prefix: &'static str,
    pub(super) content_type: &'static str,
}

pub(super) const UTF8_HTML: &str = "text/html; charset=utf-8";
pub(super) const LATIN1_HTML: &str = "text/html; charset=ISO-8859-1";

pub(super) const PRIMARY: Host = Host {
    name: "www.docs.example",
    ip: "192.0.2.10",
    prefix: "/manual/",
    content_type: UTF8_HTML,
};
pub(super) const MIRROR1: Host = Host {
    name: "mirror1.example",
    ip: "198.51.100.20",
    prefix: "/docs/",
    content_type: UTF8_HTML,
};
pub(super) const MIRROR2: Host = Host {
    name: "mirror2.example",
    ip: "203.0.113.30",
    prefix: "/pub/manual/",
    content_type: UTF8_HTML,
};
pub(super) const LATIN: Host = Host {
    name: "latin.example",
    ip: "198.51.100.41",
    prefix: "/notes/",
    content_type: LATIN1_HTML,
};
pub(super) const BLOG: Host = Host {
    name: "blog.example",
    ip: "203.0.113.52",
    prefix: "/posts/",
    content_type: UTF8_HTML,
};

pub(super) const BANNER: &str =
    "<div class=\"mirror-banner\">You are reading a mirror of the Library Network Manual, \
kindly hosted by mirror2.example; the original lives at \
<a href=\"http://www.docs.example/manual/index.html\">www.docs.example</a>.</div>";

/// A page body as it goes on the wire.
#[derive(Debug, Clone)]
pub(super) enum Payload {
    /// Sent as `body`.
    Text(String),
    /// Sent as `body_base64`.
    Bytes(Vec<u8>),
}

impl Payload {
    pub(super) fn raw(&self) -> &[u8] {
        match self {
            Payload::Text(s) => s.as_bytes(),
            Payload::Bytes(b) => b,
        }
    }
}

/// One good fetch event before it gets its time; `key` names the content it shows (copies share it).
#[derive(Debug, Clone)]
pub(super) struct Fetch {
    pub(super) url: String,
    pub(super) status: u16,
    pub(super) content_type: Option<&'static str>,
    pub(super) ip: Option<&'static str>,
    pub(super) body: Option<Payload>,
    pub(super) key: String,
}

impl Fetch {
    pub(super) fn html(url: String, host: &Host, body: String, key: &str) -> Fetch {
        Fetch {
            url,
            status: 200,
            content_type: Some(host.content_type),
            ip: Some(host.ip),
            body: Some(Payload::Text(body)),
            key: key.to_string(),
        }
    }

    pub(super) fn missing(url: String, status: u16, host: &Host, key: &str) -> Fetch {
        Fetch {
            url,
            status,
            content_type: None,
            ip: Some(host.ip),
            body: None,
            key: key.to_string(),
        }
    }

    pub(super) fn down(url: String, key: &str) -> Fetch {
        Fetch {
            url,
            status: 0,
            content_type: None,
            ip: None,
            body: None,
            key: key.to_string(),
        }
    }
}

/// A fetch placed in the stream.
pub(super) struct Timed {
    pub(super) crawl_id: String,
    pub(super) fetched_at: String,
    pub(super) fetch: Fetch,
}

/// Orders one host's fetches the way a crawler would: shallow paths first, otherwise shuffled.
pub(super) fn crawl_order(rng: &mut Rng, fetches: &mut [Fetch]) {
    rng.shuffle(fetches);
    fetches.sort_by_key(|f| {
        let path = f.url.splitn(4, '/').nth(3).unwrap_or("");
        (!path.ends_with("/index.html"), path.matches('/').count())
    });
}

/// Merges the hosts' queues at random (weighted by what is left), then keeps copies apart.
pub(super) fn interleave(rng: &mut Rng, queues: Vec<Vec<Fetch>>) -> Vec<Fetch> {
    let mut queues: Vec<VecDeque<Fetch>> = queues.into_iter().map(VecDeque::from).collect();
    let total: usize = queues.iter().map(VecDeque::len).sum();
    let mut out = Vec::with_capacity(total);
    for left in (1..=total).rev() {
        let mut pick = rng.below(left);
        for q in &mut queues {
            if pick < q.len() {
                out.extend(q.pop_front());
                break;
            }
            pick -= q.len();
        }
    }
    separate_copies(&mut out);
    out
}

/// Swaps fetches so that no two neighbours show the same content (when the stream allows it).
pub(super) fn separate_copies(items: &mut [Fetch]) {
    let n = items.len();
    // Can items i and j (at least two apart) trade places without creating a new clash?
    let fits = |items: &[Fetch], i: usize, j: usize| {
        let clash = |pos: usize, key: &str| pos < n && items[pos].key == key;
        !(clash(i - 1, &items[j].key)
            || clash(i + 1, &items[j].key)
            || (j > 0 && clash(j - 1, &items[i].key))
            || clash(j + 1, &items[i].key))
    };
    for i in 1..n {
        if items[i].key != items[i - 1].key {
            continue;
        }
        let later = (i + 2..n).find(|&j| fits(items, i, j));
        if let Some(j) =
            later.or_else(|| (0..i.saturating_sub(1)).rev().find(|&j| fits(items, i, j)))
        {
            items.swap(i, j);
        }
    }
}
