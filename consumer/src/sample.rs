//! A small, deterministic sample crawl stream for `neardup demo` and the integration tests.
//!
//! The stream follows the input contract of `crawl.pages` (one JSON object per record, fields in
//! the order `url`, `fetched_at`, `status`, `content_type`, `ip`, `crawl_id`, `body` /
//! `body_base64`) and simulates a handful of hosts over weekly crawl rounds (`week-01`, ...,
//! round r starting 2026-11-02T00:00:00Z + 7 days × (r − 1)):
//!
//! - `www.docs.example` (`/manual/`): the primary copy of a documentation collection — HTML pages
//!   with a title, a style block, a script, a comment, a nav of relative and absolute links, 3–6
//!   paragraphs of prose (80–300 words) with entities (`&amp;`, `&lt;`, `&eacute;`, `&#233;`) and
//!   non-ASCII letters;
//! - `mirror1.example` (`/docs/`): an exact mirror (byte-identical pages); it syncs the file list
//!   every round but picks up modified files one round late;
//! - `mirror2.example` (`/pub/manual/`): a banner mirror that stopped syncing after round 1 — the
//!   round-1 pages with a one-line banner after `<body>`: near-duplicates, never byte-identical;
//! - `latin.example` (`/notes/`): three unique pages sent as `body_base64`, ISO-8859-1 bytes;
//! - `blog.example` (`/posts/`): unique background pages sharing one template.
//!
//! From round 2 on, each round one primary page changes by one sentence, one primary page vanishes
//! (404 on the primary and on `mirror1.example` that round and the next, then it is no longer
//! fetched), one `mirror1.example` page fails with status 0, a new page appears on the primary
//! and `mirror1.example`, and one blog post vanishes (410) while a new one appears.
//!
//! Malformed records are interleaved in the stream, each with exactly one defect and the
//! dead-letter reason neardup must give ([`SampleCrawl::bad_records`]); every reason except
//! `body_too_large` occurs at least once. [`SampleCrawl::exact_groups`] is computed from the bytes
//! generated, not assumed.
//!
//! Everything is synthetic and licence-clean: the prose is assembled from a word list and sentence
//! templates written for this module, driven by an inline splitmix64 generator, so the same
//! [`SampleOptions`] always give byte-identical records and no two pages share prose unless one is
//! a deliberate copy. All hosts are under `.example` and all addresses are TEST-NET addresses.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::OnceLock;

/// A generated sample crawl: the records to publish and what a correct neardup must find in them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleCrawl {
    /// The input records in stream order: each one JSON line (without the trailing newline), as bytes.
    pub records: Vec<Vec<u8>>,
    /// Groups of URLs whose bodies are byte-identical, per crawl round: (crawl_id, sorted urls), each group sorted, groups sorted.
    pub exact_groups: Vec<(String, Vec<String>)>,
    /// Indices into `records` of the malformed records, with the reason neardup must give (snake_case names below).
    pub bad_records: Vec<(usize, &'static str)>,
}

/// What to generate; the same options always give byte-identical records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleOptions {
    /// Seed of every random choice (page names, prose, stream order).
    pub seed: u64,
    /// Number of weekly crawl rounds (`week-01`, `week-02`, ...).
    pub rounds: u32,
    /// Pages of the primary documentation host in round 1 (the blog has four times as many).
    pub pages_per_host: usize,
}

impl Default for SampleOptions {
    fn default() -> Self {
        SampleOptions {
            seed: 7,
            rounds: 2,
            pages_per_host: 12,
        }
    }
}

/// Generates the sample crawl stream described in the module documentation.
pub fn sample_crawl(opts: &SampleOptions) -> SampleCrawl {
    let seed = opts.seed;
    let mut slugs = HashSet::new();
    let mut docs = initial_docs(seed, opts.pages_per_host, &mut slugs);
    let mut posts: Vec<PostState> = (0..opts.pages_per_host * 4)
        .map(|id| PostState::new(blog_post(seed, id, &mut slugs)))
        .collect();
    let latin = latin_pages(seed);

    // Good fetches of every round, in stream order, with their crawl id and time.
    let mut good: Vec<Timed> = Vec::new();
    for round in 1..=opts.rounds {
        let mut rng = Rng::new(derive(seed, "round", u64::from(round)));
        let crawl_id = format!("week-{round:02}");
        let mut down_page = None;
        // Revisions as of the previous round: what mirror1 serves for pages it already had.
        let synced: Vec<u32> = docs.iter().map(|d| d.revision).collect();
        if round >= 2 {
            down_page = evolve_docs(&mut rng, seed, round, &mut docs, &mut slugs);
            evolve_blog(&mut rng, seed, round, &mut posts, &mut slugs);
        }

        let mut primary = Vec::new();
        let mut mirror1 = Vec::new();
        let mut mirror2 = Vec::new();
        for (i, doc) in docs.iter().enumerate() {
            let key = format!("doc/{}", doc.page.id);
            // The banner mirror stopped syncing after round 1: it keeps serving what it had.
            if doc.born == 1 {
                let url = format!("http://{}{}{}", MIRROR2.name, MIRROR2.prefix, doc.page.path);
                let body = render_doc(&doc.page, 0).replacen(
                    "<body>\n",
                    &format!("<body>\n{BANNER}\n"),
                    1,
                );
                mirror2.push(Fetch::html(url, &MIRROR2, body, &key));
            }
            let gone = match doc.vanished_in {
                Some(v) if round >= v + 2 => continue,
                Some(_) => true,
                None => false,
            };
            let url_p = format!("http://{}{}{}", PRIMARY.name, PRIMARY.prefix, doc.page.path);
            let url_m = format!("http://{}{}{}", MIRROR1.name, MIRROR1.prefix, doc.page.path);
            if gone {
                primary.push(Fetch::missing(url_p, 404, &PRIMARY, &key));
                mirror1.push(Fetch::missing(url_m, 404, &MIRROR1, &key));
                continue;
            }
            primary.push(Fetch::html(
                url_p,
                &PRIMARY,
                render_doc(&doc.page, doc.revision),
                &key,
            ));
            if down_page == Some(i) {
                mirror1.push(Fetch::down(url_m, &key));
            } else {
                let rev = if doc.born == round {
                    doc.revision
                } else {
                    synced[i]
                };
                mirror1.push(Fetch::html(
                    url_m,
                    &MIRROR1,
                    render_doc(&doc.page, rev),
                    &key,
                ));
            }
        }
        let mut blog = Vec::new();
        for post in &posts {
            let url = format!("http://{}{}{}", BLOG.name, BLOG.prefix, post.page.path);
            let key = format!("post/{}", post.page.id);
            match post.vanished_in {
                Some(v) if round >= v + 2 => {}
                Some(_) => blog.push(Fetch::missing(url, 410, &BLOG, &key)),
                None => {
                    let mut fetch = Fetch::html(url, &BLOG, render_post(&post.page), &key);
                    // A few optional-field variants: sniff the charset, or no address recorded.
                    match post.page.id % 17 {
                        5 => fetch.content_type = None,
                        9 => fetch.content_type = Some("text/html"),
                        13 => fetch.ip = None,
                        _ => {}
                    }
                    blog.push(fetch);
                }
            }
        }
        let mut queues = vec![primary, mirror1, mirror2, latin.clone(), blog];
        for q in &mut queues {
            crawl_order(&mut rng, q);
        }
        let ordered = interleave(&mut rng, queues);
        let mut at = round_start(round);
        for (n, fetch) in ordered.into_iter().enumerate() {
            if n > 0 {
                at += 1 + rng.below(3) as i64;
            }
            good.push(Timed {
                crawl_id: crawl_id.clone(),
                fetched_at: rfc3339(at),
                fetch,
            });
        }
    }

    let exact_groups = exact_groups_of(&good);
    let (records, bad_records) = assemble(seed, &good);
    SampleCrawl {
        records,
        exact_groups,
        bad_records,
    }
}

// ------------------------------------------------------------------------------------------
// Hosts and fetches
// ------------------------------------------------------------------------------------------

/// A simulated host: name, address and the path prefix its pages live under.
struct Host {
    name: &'static str,
    ip: &'static str,
    prefix: &'static str,
    content_type: &'static str,
}

const UTF8_HTML: &str = "text/html; charset=utf-8";
const LATIN1_HTML: &str = "text/html; charset=ISO-8859-1";

const PRIMARY: Host = Host {
    name: "www.docs.example",
    ip: "192.0.2.10",
    prefix: "/manual/",
    content_type: UTF8_HTML,
};
const MIRROR1: Host = Host {
    name: "mirror1.example",
    ip: "198.51.100.20",
    prefix: "/docs/",
    content_type: UTF8_HTML,
};
const MIRROR2: Host = Host {
    name: "mirror2.example",
    ip: "203.0.113.30",
    prefix: "/pub/manual/",
    content_type: UTF8_HTML,
};
const LATIN: Host = Host {
    name: "latin.example",
    ip: "198.51.100.41",
    prefix: "/notes/",
    content_type: LATIN1_HTML,
};
const BLOG: Host = Host {
    name: "blog.example",
    ip: "203.0.113.52",
    prefix: "/posts/",
    content_type: UTF8_HTML,
};

const BANNER: &str =
    "<div class=\"mirror-banner\">You are reading a mirror of the Library Network Manual, \
kindly hosted by mirror2.example; the original lives at \
<a href=\"http://www.docs.example/manual/index.html\">www.docs.example</a>.</div>";

/// A page body as it goes on the wire.
#[derive(Debug, Clone)]
enum Payload {
    /// Sent as `body`.
    Text(String),
    /// Sent as `body_base64`.
    Bytes(Vec<u8>),
}

impl Payload {
    fn raw(&self) -> &[u8] {
        match self {
            Payload::Text(s) => s.as_bytes(),
            Payload::Bytes(b) => b,
        }
    }
}

/// One good fetch event before it gets its time; `key` names the content it shows (copies share it).
#[derive(Debug, Clone)]
struct Fetch {
    url: String,
    status: u16,
    content_type: Option<&'static str>,
    ip: Option<&'static str>,
    body: Option<Payload>,
    key: String,
}

impl Fetch {
    fn html(url: String, host: &Host, body: String, key: &str) -> Fetch {
        Fetch {
            url,
            status: 200,
            content_type: Some(host.content_type),
            ip: Some(host.ip),
            body: Some(Payload::Text(body)),
            key: key.to_string(),
        }
    }

    fn missing(url: String, status: u16, host: &Host, key: &str) -> Fetch {
        Fetch {
            url,
            status,
            content_type: None,
            ip: Some(host.ip),
            body: None,
            key: key.to_string(),
        }
    }

    fn down(url: String, key: &str) -> Fetch {
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
struct Timed {
    crawl_id: String,
    fetched_at: String,
    fetch: Fetch,
}

/// Orders one host's fetches the way a crawler would: shallow paths first, otherwise shuffled.
fn crawl_order(rng: &mut Rng, fetches: &mut [Fetch]) {
    rng.shuffle(fetches);
    fetches.sort_by_key(|f| {
        let path = f.url.splitn(4, '/').nth(3).unwrap_or("");
        (!path.ends_with("/index.html"), path.matches('/').count())
    });
}

/// Merges the hosts' queues at random (weighted by what is left), then keeps copies apart.
fn interleave(rng: &mut Rng, queues: Vec<Vec<Fetch>>) -> Vec<Fetch> {
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
fn separate_copies(items: &mut [Fetch]) {
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

// ------------------------------------------------------------------------------------------
// The documentation collection
// ------------------------------------------------------------------------------------------

/// One page of the documentation collection: everything but the revision is fixed at birth.
#[derive(Debug, Clone)]
struct DocPage {
    id: usize,
    /// Path below the host's prefix, e.g. `howto/packet-buffers.html`.
    path: String,
    title: String,
    seed: u64,
    /// (href, text) of the nav links.
    nav: Vec<(String, String)>,
    /// (href, title) of the contents list (index page only).
    toc: Vec<(String, String)>,
}

struct DocState {
    page: DocPage,
    revision: u32,
    born: u32,
    vanished_in: Option<u32>,
}

static TITLE_PREFIXES: WordList = WordList::new(
    "Configuring, Understanding, Tuning, Securing, Monitoring, Using, Indexing, Mirroring,
Caching, Migrating, Troubleshooting, Sharing, Planning, Testing",
);

/// Picks an unused slug such as `packet-buffers` and a title for the page it names.
fn new_slug(rng: &mut Rng, slugs: &mut HashSet<String>) -> (String, String) {
    loop {
        let a = rng.word(&NOUNS);
        let b = rng.word(&NOUNS);
        if a == b {
            continue;
        }
        let slug = format!("{a}-{}", plural(b));
        if slugs.insert(slug.clone()) {
            let title = format!(
                "{} {} {}",
                rng.word(&TITLE_PREFIXES),
                capitalize(a),
                capitalize(&plural(b))
            );
            return (slug, title);
        }
    }
}

fn new_doc_page(rng: &mut Rng, seed: u64, id: usize, slugs: &mut HashSet<String>) -> DocPage {
    let (path, title) = if id == 0 {
        ("index.html".to_string(), "Contents".to_string())
    } else {
        let (slug, title) = new_slug(rng, slugs);
        let path = if id % 3 == 2 {
            format!("howto/{slug}.html")
        } else {
            format!("{slug}.html")
        };
        (path, title)
    };
    DocPage {
        id,
        path,
        title,
        seed: derive(seed, "doc", id as u64),
        nav: Vec::new(),
        toc: Vec::new(),
    }
}

/// Nav links of `page`: contents, previous, next, one or two related pages, and absolute links.
fn doc_nav(rng: &mut Rng, page: &DocPage, known: &[DocPage]) -> Vec<(String, String)> {
    let mut nav = vec![(relative(&page.path, "index.html"), "Contents".to_string())];
    let pos = known.iter().position(|p| p.id == page.id);
    let prev = match pos {
        Some(k) => k.checked_sub(1),
        None => known.len().checked_sub(1),
    };
    if let Some(k) = prev {
        nav.push((relative(&page.path, &known[k].path), "Previous".to_string()));
    }
    if let Some(next) = pos.and_then(|k| known.get(k + 1)) {
        nav.push((relative(&page.path, &next.path), "Next".to_string()));
    }
    if known.len() > 2 {
        for _ in 0..1 + rng.below(2) {
            let other = rng.pick(known);
            if other.id != page.id && other.id != 0 {
                nav.push((relative(&page.path, &other.path), other.title.clone()));
            }
        }
    }
    nav.push((
        "http://www.docs.example/manual/index.html".to_string(),
        "Manual home".to_string(),
    ));
    nav.push((
        "https://www.project.example/download/".to_string(),
        "Download".to_string(),
    ));
    nav
}

fn initial_docs(seed: u64, n: usize, slugs: &mut HashSet<String>) -> Vec<DocState> {
    let mut rng = Rng::new(derive(seed, "docs", 0));
    let mut pages: Vec<DocPage> = (0..n)
        .map(|id| new_doc_page(&mut rng, seed, id, slugs))
        .collect();
    let snapshot = pages.clone();
    for page in &mut pages {
        page.nav = doc_nav(&mut rng, page, &snapshot);
        if page.id == 0 {
            page.toc = snapshot[1..]
                .iter()
                .map(|p| (p.path.clone(), p.title.clone()))
                .collect();
        }
    }
    pages
        .into_iter()
        .map(|page| DocState {
            page,
            revision: 0,
            born: 1,
            vanished_in: None,
        })
        .collect()
}

/// Round r ≥ 2 on the collection: one page changes, one vanishes, one new page appears.
/// Returns the index of the page `mirror1.example` fails to serve (status 0) this round.
fn evolve_docs(
    rng: &mut Rng,
    seed: u64,
    round: u32,
    docs: &mut Vec<DocState>,
    slugs: &mut HashSet<String>,
) -> Option<usize> {
    let mut candidates: Vec<usize> = (0..docs.len())
        .filter(|&i| docs[i].vanished_in.is_none() && docs[i].born < round)
        .collect();
    rng.shuffle(&mut candidates);
    let mut candidates = candidates.into_iter();
    if let Some(i) = candidates.next() {
        docs[i].revision += 1;
    }
    // The index page never vanishes: everything links to it.
    let mut rest: Vec<usize> = candidates.collect();
    if let Some(k) = rest.iter().position(|&i| docs[i].page.id != 0) {
        let i = rest.remove(k);
        docs[i].vanished_in = Some(round);
    }
    let down = rest.first().copied();

    if !docs.is_empty() {
        let id = docs.len();
        let mut page = new_doc_page(rng, seed, id, slugs);
        let known: Vec<DocPage> = docs.iter().map(|d| d.page.clone()).collect();
        page.nav = doc_nav(rng, &page, &known);
        docs.push(DocState {
            page,
            revision: 0,
            born: round,
            vanished_in: None,
        });
    }
    down
}

fn relative(from: &str, to: &str) -> String {
    match (from.rsplit_once('/'), to.rsplit_once('/')) {
        (None, _) => to.to_string(),
        (Some((a, _)), Some((b, file))) if a == b => file.to_string(),
        (Some(_), _) => format!("../{to}"),
    }
}

const DOC_STYLE: &str = "body { font-family: Georgia, serif; margin: 2em auto; max-width: 42em; }
nav a { margin-right: 0.8em; }
ul.toc li { margin: 0.2em 0; }
footer { font-size: smaller; color: #555; }
";

const DOC_SCRIPT: &str = "function toggleNav() {
  var nav = document.getElementById(\"nav\");
  if (nav && nav.children.length < 20) { nav.hidden = !nav.hidden; }
}
";

/// The primary's HTML of `page` at `revision` (mirrors serve these bytes, or add a banner).
fn render_doc(page: &DocPage, revision: u32) -> String {
    let up = if page.path.contains('/') { "../" } else { "" };
    let mut html = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<title>{title} \u{2014} Library Network Manual</title>\n<style>\n{DOC_STYLE}</style>\n\
<script>\nvar manualPage = {id};\n{DOC_SCRIPT}</script>\n</head>\n<body>\n\
<!-- built from the manual sources; edit those, not this page -->\n<nav id=\"nav\">",
        title = page.title,
        id = page.id,
    );
    let links: Vec<String> = page
        .nav
        .iter()
        .map(|(href, text)| format!("<a href=\"{href}\">{text}</a>"))
        .collect();
    html.push_str(&links.join(" | "));
    html.push_str(&format!(
        "</nav>\n<img src=\"{up}images/logo.png\" alt=\"Library Network Manual\">\n<h1>{}</h1>\n",
        page.title
    ));
    for para in prose(page.seed, revision, &SPECIALS_UTF8) {
        html.push_str(&format!("<p>{}</p>\n", para.join(" ")));
    }
    if !page.toc.is_empty() {
        html.push_str("<ul class=\"toc\">\n");
        for (href, title) in &page.toc {
            html.push_str(&format!("<li><a href=\"{href}\">{title}</a></li>\n"));
        }
        html.push_str("</ul>\n");
    }
    html.push_str(
        "<footer>Copyright 2026 The Example Library Project &middot; \
<a href=\"http://www.docs.example/manual/index.html\">Manual home</a></footer>\n</body>\n</html>\n",
    );
    html
}

// ------------------------------------------------------------------------------------------
// The blog and the Latin-1 host
// ------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct PostPage {
    id: usize,
    path: String,
    title: String,
    seed: u64,
    posted: String,
    author: &'static str,
}

struct PostState {
    page: PostPage,
    vanished_in: Option<u32>,
}

impl PostState {
    fn new(page: PostPage) -> PostState {
        PostState {
            page,
            vanished_in: None,
        }
    }
}

static AUTHORS: WordList =
    WordList::new("Ada Quill, Bram Oakes, Céline Marsh, Jonas Brandt, Mira Holt, Tomás Reed");

fn blog_post(seed: u64, id: usize, slugs: &mut HashSet<String>) -> PostPage {
    let mut rng = Rng::new(derive(seed, "post", id as u64));
    let (slug, title) = new_slug(&mut rng, slugs);
    let day = 1 + rng.below(28);
    let month = 1 + rng.below(10);
    PostPage {
        id,
        path: format!("2026/{slug}.html"),
        title,
        seed: derive(seed, "post-prose", id as u64),
        posted: format!("2026-{month:02}-{day:02}"),
        author: rng.word(&AUTHORS),
    }
}

/// Round r ≥ 2 on the blog: one post vanishes (410), one new post appears.
fn evolve_blog(
    rng: &mut Rng,
    seed: u64,
    round: u32,
    posts: &mut Vec<PostState>,
    slugs: &mut HashSet<String>,
) {
    let live: Vec<usize> = (0..posts.len())
        .filter(|&i| posts[i].vanished_in.is_none())
        .collect();
    if live.is_empty() {
        return;
    }
    let i = *rng.pick(&live);
    posts[i].vanished_in = Some(round);
    let id = posts.len();
    posts.push(PostState::new(blog_post(seed, id, slugs)));
}

fn render_post(page: &PostPage) -> String {
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width\">\n<title>{title} | Field Notes</title>\n\
<link rel=\"stylesheet\" href=\"/static/notes.css\">\n</head>\n<body>\n\
<header><a href=\"/\">Field Notes</a> | <a href=\"/posts/\">All posts</a> | \
<a href=\"http://www.docs.example/manual/index.html\">The manual</a></header>\n<article>\n\
<h1>{title}</h1>\n<p class=\"byline\">Posted on {posted} by {author}</p>\n",
        title = page.title,
        posted = page.posted,
        author = page.author,
    );
    for para in prose(page.seed, 0, &SPECIALS_UTF8) {
        html.push_str(&format!("<p>{}</p>\n", para.join(" ")));
    }
    html.push_str(
        "</article>\n<footer>Field Notes is written by the reading-room volunteers. Comments are closed.</footer>\n\
</body>\n</html>\n",
    );
    html
}

/// Three pages of travel notes, sent as ISO-8859-1 bytes (`body_base64`).
fn latin_pages(seed: u64) -> Vec<Fetch> {
    let mut rng = Rng::new(derive(seed, "latin", 0));
    let mut places: Vec<&(&str, &str)> = PLACES.iter().collect();
    rng.shuffle(&mut places);
    places
        .into_iter()
        .take(3)
        .enumerate()
        .map(|(n, (place, slug))| {
            let mut html = format!(
                "<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 4.01//EN\">\n<html>\n<head>\n\
<meta http-equiv=\"Content-Type\" content=\"text/html; charset=iso-8859-1\">\n\
<title>Notes from {place}</title>\n</head>\n<body>\n<h1>Notes from {place}</h1>\n"
            );
            for para in prose(derive(seed, "latin-prose", n as u64), 0, &SPECIALS_LATIN1) {
                html.push_str(&format!("<p>{}</p>\n", para.join(" ")));
            }
            html.push_str("<p><a href=\"http://blog.example/posts/\">Back to Field Notes</a></p>\n</body>\n</html>\n");
            let url = format!("http://{}{}{slug}.html", LATIN.name, LATIN.prefix);
            Fetch {
                url,
                status: 200,
                content_type: Some(LATIN.content_type),
                ip: Some(LATIN.ip),
                body: Some(Payload::Bytes(latin1(&html))),
                key: format!("latin/{n}"),
            }
        })
        .collect()
}

/// ISO-8859-1 bytes of `text`; every character the templates use is in Latin-1.
fn latin1(text: &str) -> Vec<u8> {
    text.chars()
        .map(|c| u8::try_from(u32::from(c)).expect("Latin-1 page text stays within U+00FF"))
        .collect()
}

// ------------------------------------------------------------------------------------------
// Prose
// ------------------------------------------------------------------------------------------

/// Paragraphs of sentences for a page: 3–6 paragraphs, 80–300 words, with the `specials`
/// templates each used once; `revision` k replaces k ordinary sentences, one per revision.
fn prose(seed: u64, revision: u32, specials: &[&[&str]]) -> Vec<Vec<String>> {
    let mut rng = Rng::new(seed);
    let target = 85 + rng.below(136);
    let n_para = 3 + rng.below(4);
    // (sentence, ordinary?) so that revisions only touch ordinary sentences.
    let mut paras: Vec<Vec<(String, bool)>> = vec![Vec::new(); n_para];
    let mut words = 0;
    for (i, para) in paras.iter_mut().enumerate() {
        let goal = target * (i + 1) / n_para;
        loop {
            let s = sentence_from(&mut rng, TEMPLATES);
            words += s.split_whitespace().count();
            para.push((s, true));
            if words >= goal {
                break;
            }
        }
    }
    for templates in specials {
        let s = sentence_from(&mut rng, templates);
        let p = rng.below(n_para);
        let at = rng.below(paras[p].len() + 1);
        paras[p].insert(at, (s, false));
    }
    for k in 1..=revision {
        let mut r = Rng::new(derive(seed, "revision", u64::from(k)));
        let ordinary: Vec<(usize, usize)> = paras
            .iter()
            .enumerate()
            .flat_map(|(p, ss)| {
                ss.iter()
                    .enumerate()
                    .filter(|(_, s)| s.1)
                    .map(move |(j, _)| (p, j))
            })
            .collect();
        let &(p, j) = r.pick(&ordinary);
        loop {
            let s = sentence_from(&mut r, TEMPLATES);
            if s != paras[p][j].0 {
                paras[p][j].0 = s;
                break;
            }
        }
    }
    paras
        .into_iter()
        .map(|ss| ss.into_iter().map(|(s, _)| s).collect())
        .collect()
}

/// A sentence from one of `templates`, picked at random.
fn sentence_from(rng: &mut Rng, templates: &[&str]) -> String {
    let template = *rng.pick(templates);
    sentence(rng, template)
}

/// Fills a template's slots: {N} noun, {Ns} plural, {T} tag-like noun, {V} verb (third person),
/// {Vb} verb (base form), {A} adjective, {D} adverb, {P} place, {X} loanword with accents.
fn sentence(rng: &mut Rng, template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = start + rest[start..].find('}').expect("template slots are closed");
        let word = match &rest[start + 1..end] {
            "N" | "T" => rng.word(&NOUNS).to_string(),
            "Ns" => plural(rng.word(&NOUNS)),
            "V" => third_person(rng.word(&VERBS)),
            "Vb" => rng.word(&VERBS).to_string(),
            "A" => rng.word(&ADJECTIVES).to_string(),
            "D" => rng.word(&ADVERBS).to_string(),
            "P" => rng.pick(PLACES).0.to_string(),
            "X" => rng.word(&LOANWORDS).to_string(),
            other => panic!("unknown template slot {other}"),
        };
        out.push_str(&word);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    capitalize(&with_articles(&out))
}

/// "a" becomes "an" before a vowel, so filled templates read naturally.
fn with_articles(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let mut out = Vec::with_capacity(words.len());
    for (i, w) in words.iter().enumerate() {
        let next_vowel = words
            .get(i + 1)
            .and_then(|n| n.chars().next())
            .is_some_and(|c| "aeiouAEIOU".contains(c));
        out.push(match *w {
            "a" if next_vowel => "an",
            "A" if next_vowel => "An",
            other => other,
        });
    }
    out.join(" ")
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn ends_in_sibilant(w: &str) -> bool {
    ["s", "x", "z", "ch", "sh"].iter().any(|e| w.ends_with(e))
}

fn ends_in_consonant_y(w: &str) -> bool {
    let b = w.as_bytes();
    b.len() >= 2 && b[b.len() - 1] == b'y' && !b"aeiou".contains(&b[b.len() - 2])
}

fn plural(noun: &str) -> String {
    if ends_in_sibilant(noun) {
        format!("{noun}es")
    } else if ends_in_consonant_y(noun) {
        format!("{}ies", &noun[..noun.len() - 1])
    } else {
        format!("{noun}s")
    }
}

fn third_person(verb: &str) -> String {
    plural(verb)
}

/// A comma-separated word list, split once on first use (a string keeps the lists compact).
struct WordList {
    text: &'static str,
    words: OnceLock<Vec<&'static str>>,
}

impl WordList {
    const fn new(text: &'static str) -> WordList {
        WordList {
            text,
            words: OnceLock::new(),
        }
    }

    fn words(&self) -> &[&'static str] {
        self.words.get_or_init(|| {
            self.text
                .split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .collect()
        })
    }
}

const TEMPLATES: &[&str] = &[
    "The {A} {N} {V} the {N} {D}.",
    "Each {N} {V} a {A} {N} before the {N} {V} it.",
    "When the {N} is {A}, the {N} {D} {V} every {N}.",
    "A {A} {N} rarely {V} the {Ns} of a {A} {N}.",
    "If you {Vb} the {N}, the {N} {V} its {Ns} {D}.",
    "{Ns} and {Ns} {Vb} together in the {A} {N}.",
    "Most {Ns} {Vb} {A} {Ns}, but the {N} {V} only one.",
    "The {N} keeps a {A} {N} for every {N} it {V}.",
    "Before you {Vb} a {N}, ask the {N} whether the {N} is {A}.",
    "Our {Ns} {Vb} the {A} {N} twice a week.",
    "There is no {A} {N} in the {N}, so the {N} {V} the {N} instead.",
    "The {N} of the {N} {V} {D}, and the {Ns} stay {A}.",
    "You can {Vb} the {N} with a {A} {N} and a {N}.",
    "Every {A} {N} should {Vb} the {N} once the {N} is {A}.",
    "In a {A} {N}, the {N} {V} {Ns} that the {N} {V}.",
    "Ask a {N} to {Vb} the {Ns} if the {N} looks {A}.",
    "Without a {N}, no {N} can {Vb} the {A} {Ns}.",
    "The {A} {Ns} on the {N} {Vb} {D} after the {N} {V}.",
    "A {N} that {V} a {N} also {V} the {A} {N}.",
    "Sometimes the {N} {V} the {N}; the {N} then {V} a {A} {N}.",
    "Nobody expects the {N} to {Vb} a {A} {N} on the first day.",
    "The {N} {V} {D} because the {Ns} are {A}.",
];

/// Sentences with markup entities (`&amp;`, `&lt;`, `&gt;`).
const WITH_MARKUP: &[&str] = &[
    "Keep the {N} &amp; the {N} in the same &lt;{T}&gt; list.",
    "Write &lt;{T}&gt; &amp; &lt;/{T}&gt; around the {N} so that the {N} {V} it.",
    "The {Ns} &amp; {Ns} chapter {V} how a {N} uses &lt;{T}&gt; and &lt;/{T}&gt;.",
    "Use a &lt;{T}&gt; element when the {N} &amp; the {N} are {A}.",
];

/// Sentences with named and numeric accent entities (`&eacute;`, `&#233;`, ...).
const WITH_ACCENT_ENTITIES: &[&str] = &[
    "The caf&eacute; next to the {N} {V} a r&#233;sum&#233; of every {N}.",
    "A r&#233;sum&#233; of the {A} {N} {V} the caf&eacute; {N}.",
    "The {A} fa&ccedil;ade of the {N} hides a caf&#233; and a d&eacute;but {N}.",
    "Our {N} in Z&uuml;rich {V} the {N} from the caf&#233; next door, says the r&eacute;sum&eacute;.",
];

/// Sentences with raw non-ASCII letters.
const WITH_ACCENTS: &[&str] = &[
    "The mirror in {P} {V} the {A} {N} {D}.",
    "A {X} near the {N} {V} the {Ns} in {P}.",
    "Readers in {P} {Vb} the {N} with a {A} {X}.",
    "The {N} from {P} {V} our {X} {D}.",
];

/// Latin-1 pages: é and ü in every page.
const WITH_E_AND_U: &[&str] = &[
    "The café in Zürich {V} the {A} {N} {D}.",
    "A crème brûlée and a müesli {Vb} the {N} in {P}.",
    "The über-{N} of Düsseldorf {V} every café {N}.",
];

const SPECIALS_UTF8: [&[&str]; 3] = [WITH_MARKUP, WITH_ACCENT_ENTITIES, WITH_ACCENTS];
const SPECIALS_LATIN1: [&[&str]; 3] = [WITH_E_AND_U, WITH_ACCENTS, WITH_MARKUP];

static NOUNS: WordList = WordList::new(
    "library, catalogue, index, archive, record, volume, chapter, section, page, manual, guide,
reference, glossary, appendix, footnote, citation, author, editor, reader, librarian,
collection, edition, revision, draft, release, version, changelog, tutorial, example, table,
figure, diagram, heading, paragraph, sentence, keyword, term, topic, subject, summary,
abstract, journal, article, report, notebook, folder, file, directory, path, link, anchor,
bookmark, network, router, switch, packet, frame, socket, port, address, gateway, firewall,
proxy, mirror, server, client, host, domain, resolver, protocol, header, payload, checksum,
buffer, queue, stream, channel, connection, session, timeout, request, response, handshake,
certificate, key, token, signature, cache, crawler, fetcher, scheduler, worker, thread,
process, daemon, service, endpoint, interface, module, package, component, plugin, parser,
tokenizer, encoder, decoder, compiler, loader, function, method, parameter, argument,
variable, constant, value, field, column, row, schema, query, filter, cursor, transaction,
snapshot, checkpoint, partition, segment, offset, broker, producer, consumer, message,
event, log, metric, counter, gauge, histogram, dashboard, alert, threshold, window, shingle,
fingerprint, sketch, cluster, bucket, hash, digest, bitmap, vector, graph, node, edge, tree,
branch, root, commit, patch, diff, merge, conflict, test, benchmark, profile, trace,
warning, error, exception, bug, fix, feature, option, setting, default, flag, command,
shell, terminal, prompt, script, template, stylesheet, font, layout, menu, button, form,
image, caption, label, badge, banner, footer, sidebar, toolbar, tab, panel, reviewer,
maintainer, translator, contributor, volunteer, workshop, meeting, deadline, schedule,
budget, policy, rule, guideline, convention, standard, proposal, decision, question, answer,
problem, solution, pattern, habit, lesson, course, student, teacher, classroom, campus,
building, room, desk, lamp, garden, street, city, river, bridge, harbour, station, train,
ticket, map, compass, lantern, kettle, teapot, biscuit, sandwich, umbrella, bicycle",
);

static VERBS: WordList = WordList::new(
    "store, index, mirror, fetch, parse, cache, compress, encode, decode, publish, archive, link,
resolve, route, forward, retry, refresh, update, replace, remove, rename, copy, compare,
merge, split, sort, filter, count, measure, sample, check, verify, validate, sign, hash,
scan, read, write, print, render, translate, explain, describe, document, summarise, review,
approve, reject, schedule, track, monitor, report, trace, buffer, queue, batch, stream,
send, receive, accept, drop, block, allow, open, close, lock, unlock, load, save, restore,
build, test, deploy, configure, tune, install, upgrade, rebuild, lend, borrow, shelve,
annotate, highlight, search, find, collect, gather, share, keep, hold, skip, ignore, follow,
group, rank, label",
);

static ADJECTIVES: WordList = WordList::new(
    "small, large, stale, fresh, quick, slow, careful, simple, complex, quiet, busy, remote,
local, nearby, distant, public, private, shared, hidden, visible, empty, full, partial,
complete, broken, healthy, stable, unstable, recent, ancient, modern, classic, tidy, messy,
clear, vague, precise, rough, exact, similar, different, identical, plain, rich, compact,
verbose, brief, lengthy, narrow, wide, deep, shallow, early, late, weekly, monthly, patient,
eager, gentle, strict, lenient, friendly, reliable, fragile, robust, secure, open, closed,
new, old, spare, primary, secondary, curious, bright, dusty, cosy, wooden, green, golden,
silver, northern, southern",
);

static ADVERBS: WordList = WordList::new(
    "quickly, slowly, carefully, quietly, often, usually, always, seldom, gently, eagerly,
patiently, reliably, silently, briefly, eventually, immediately, periodically, gradually,
politely, twice, again, locally, remotely, directly, lazily, safely, neatly, today,
overnight, sometimes",
);

/// (place, ASCII slug): every name is within Latin-1.
const PLACES: &[(&str, &str)] = &[
    ("Zürich", "zurich"),
    ("Malmö", "malmo"),
    ("Tromsø", "tromso"),
    ("Kraków", "krakow"),
    ("Bogotá", "bogota"),
    ("Québec", "quebec"),
    ("Reykjavík", "reykjavik"),
    ("São Paulo", "sao-paulo"),
    ("Düsseldorf", "dusseldorf"),
    ("Besançon", "besancon"),
    ("Málaga", "malaga"),
    ("Göteborg", "goteborg"),
    ("Århus", "arhus"),
];

static LOANWORDS: WordList = WordList::new(
    "café, façade, résumé, naïveté, jalapeño, smörgåsbord, entrée, fiancé, protégé, doppelgänger,
soufflé, piñata, crème brûlée, déjà vu",
);

// ------------------------------------------------------------------------------------------
// Malformed records
// ------------------------------------------------------------------------------------------

/// One kind of malformed record: the reason neardup must give and how to build it.
#[derive(Debug, Clone, Copy)]
enum Bad {
    Truncated,
    Array,
    Number,
    Null,
    NoUrl,
    EmptyObject,
    StatusString,
    FtpUrl,
    NoHostUrl,
    Yesterday,
    Status999,
    NotBase64,
    Latin1DeclaredUtf8,
    NotUtf8Line,
    BothBodies,
}

const BAD_KINDS: [Bad; 15] = [
    Bad::Truncated,
    Bad::Array,
    Bad::Number,
    Bad::Null,
    Bad::NoUrl,
    Bad::EmptyObject,
    Bad::StatusString,
    Bad::FtpUrl,
    Bad::NoHostUrl,
    Bad::Yesterday,
    Bad::Status999,
    Bad::NotBase64,
    Bad::Latin1DeclaredUtf8,
    Bad::NotUtf8Line,
    Bad::BothBodies,
];

impl Bad {
    fn reason(self) -> &'static str {
        match self {
            Bad::Truncated => "not_json",
            Bad::Array | Bad::Number | Bad::Null => "not_an_object",
            Bad::NoUrl | Bad::EmptyObject => "missing_field",
            Bad::StatusString => "wrong_type",
            Bad::FtpUrl | Bad::NoHostUrl => "invalid_url",
            Bad::Yesterday => "invalid_timestamp",
            Bad::Status999 => "status_out_of_range",
            Bad::NotBase64 => "invalid_base64",
            Bad::Latin1DeclaredUtf8 => "undecodable_body",
            Bad::NotUtf8Line => "invalid_utf8",
            Bad::BothBodies => "conflicting_body",
        }
    }

    /// The record, made to look like the good record it follows (same round, same time).
    fn build(self, rng: &mut Rng, n: usize, crawl_id: &str, fetched_at: &str) -> Vec<u8> {
        let url = format!(
            "http://{}{}drafts/draft-{n:02}.html",
            BLOG.name, BLOG.prefix
        );
        let text = sentence_from(rng, TEMPLATES);
        let body = format!(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Draft {n}</title></head>\n\
<body><p>{text}</p></body></html>\n"
        );
        let fields = |url: &str, status: &str, body_field: Option<(&'static str, String)>| {
            let mut f = vec![
                ("url", json_str(url)),
                ("fetched_at", json_str(fetched_at)),
                ("status", status.to_string()),
                ("content_type", json_str(UTF8_HTML)),
                ("ip", json_str(BLOG.ip)),
                ("crawl_id", json_str(crawl_id)),
            ];
            f.extend(body_field);
            f
        };
        let text_body = Some(("body", json_str(&body)));
        let line = match self {
            Bad::Truncated => {
                let full = object(&fields(&url, "200", text_body));
                let mut cut = full.len() * 3 / 5;
                while !full.is_char_boundary(cut) {
                    cut -= 1;
                }
                full[..cut].to_string()
            }
            Bad::Array => "[1,2]".to_string(),
            Bad::Number => "42".to_string(),
            Bad::Null => "null".to_string(),
            Bad::NoUrl => {
                let mut f = fields(&url, "200", text_body);
                f.remove(0);
                object(&f)
            }
            Bad::EmptyObject => "{}".to_string(),
            Bad::StatusString => object(&fields(&url, "\"200\"", text_body)),
            Bad::FtpUrl => {
                let url = format!("ftp://files.example/pub/manual/draft-{n:02}.tar.gz");
                object(&fields(&url, "200", text_body))
            }
            Bad::NoHostUrl => {
                let url = format!("http:///manual/draft-{n:02}.html");
                object(&fields(&url, "200", text_body))
            }
            Bad::Yesterday => {
                let mut f = fields(&url, "200", text_body);
                f[1].1 = json_str("yesterday");
                object(&f)
            }
            Bad::Status999 => object(&fields(&url, "999", None)),
            Bad::NotBase64 => {
                let mut f = fields(&url, "200", Some(("body_base64", json_str("!!notbase64"))));
                f[3].1 = json_str(LATIN1_HTML);
                object(&f)
            }
            Bad::Latin1DeclaredUtf8 => {
                let bytes = latin1(&body.replace("</p>", " The café in Zürich is closed.</p>"));
                object(&fields(
                    &url,
                    "200",
                    Some(("body_base64", json_str(&base64(&bytes)))),
                ))
            }
            Bad::NotUtf8Line => {
                let marker = "\u{1}MARK\u{1}";
                let with_marker = body.replace("</p>", &format!(" The caf{marker} is closed.</p>"));
                let line = object(&fields(&url, "200", Some(("body", json_str(&with_marker)))));
                let escaped_marker = json_str(marker);
                let escaped_marker = &escaped_marker[1..escaped_marker.len() - 1];
                let (head, tail) = line
                    .split_once(escaped_marker)
                    .expect("marker survives escaping");
                let mut bytes = head.as_bytes().to_vec();
                bytes.push(0xE9); // é in Latin-1: not UTF-8 on its own
                bytes.extend_from_slice(tail.as_bytes());
                return bytes;
            }
            Bad::BothBodies => {
                let mut f = fields(&url, "200", text_body);
                f.push(("body_base64", json_str(&base64(body.as_bytes()))));
                object(&f)
            }
        };
        line.into_bytes()
    }
}

/// Places the good fetches and the malformed records into one stream of JSON lines.
fn assemble(seed: u64, good: &[Timed]) -> (Vec<Vec<u8>>, Vec<(usize, &'static str)>) {
    let mut rng = Rng::new(derive(seed, "bad", 0));
    let g = good.len();
    // About one in 30, but never fewer than one of each kind.
    let n_bad = BAD_KINDS.len().max((g + 15) / 30);
    let mut kinds = Vec::with_capacity(n_bad);
    while kinds.len() < n_bad {
        let mut cycle = BAD_KINDS.to_vec();
        rng.shuffle(&mut cycle);
        kinds.extend(cycle);
    }
    kinds.truncate(n_bad);
    // Bad record k follows good record after[k]: one per stretch of g / n_bad good records.
    let after: Vec<usize> = (0..n_bad)
        .map(|k| {
            let (lo, hi) = (k * g / n_bad, (k + 1) * g / n_bad);
            lo + rng.below((hi - lo).max(1))
        })
        .collect();

    let mut records = Vec::with_capacity(g + n_bad);
    let mut bad_records = Vec::with_capacity(n_bad);
    let mut push_bad = |records: &mut Vec<Vec<u8>>, k: usize, crawl_id: &str, fetched_at: &str| {
        bad_records.push((records.len(), kinds[k].reason()));
        records.push(kinds[k].build(&mut rng, k + 1, crawl_id, fetched_at));
    };
    let mut next_bad = 0;
    if g == 0 {
        let start = rfc3339(round_start(1));
        for k in 0..n_bad {
            push_bad(&mut records, k, "week-01", &start);
        }
    }
    for (i, t) in good.iter().enumerate() {
        records.push(good_line(t));
        while next_bad < n_bad && after[next_bad] == i {
            push_bad(&mut records, next_bad, &t.crawl_id, &t.fetched_at);
            next_bad += 1;
        }
    }
    (records, bad_records)
}

// ------------------------------------------------------------------------------------------
// Records and groups
// ------------------------------------------------------------------------------------------

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serializes")
}

/// `{"k":v,...}` with the fields in the order given (values already JSON).
fn object(fields: &[(&str, String)]) -> String {
    let parts: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{v}", json_str(k)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

fn good_line(t: &Timed) -> Vec<u8> {
    let f = &t.fetch;
    let mut fields = vec![
        ("url", json_str(&f.url)),
        ("fetched_at", json_str(&t.fetched_at)),
        ("status", f.status.to_string()),
    ];
    if let Some(ct) = f.content_type {
        fields.push(("content_type", json_str(ct)));
    }
    if let Some(ip) = f.ip {
        fields.push(("ip", json_str(ip)));
    }
    fields.push(("crawl_id", json_str(&t.crawl_id)));
    match &f.body {
        Some(Payload::Text(s)) => fields.push(("body", json_str(s))),
        Some(Payload::Bytes(b)) => fields.push(("body_base64", json_str(&base64(b)))),
        None => {}
    }
    object(&fields).into_bytes()
}

/// Every set of ≥ 2 status-200 URLs of one round with byte-identical bodies.
fn exact_groups_of(good: &[Timed]) -> Vec<(String, Vec<String>)> {
    let mut by_body: BTreeMap<(&str, &[u8]), Vec<String>> = BTreeMap::new();
    for t in good {
        if let (200, Some(body)) = (t.fetch.status, &t.fetch.body) {
            by_body
                .entry((&t.crawl_id, body.raw()))
                .or_default()
                .push(t.fetch.url.clone());
        }
    }
    let mut groups: Vec<(String, Vec<String>)> = by_body
        .into_iter()
        .filter(|(_, urls)| urls.len() >= 2)
        .map(|((crawl_id, _), mut urls)| {
            urls.sort();
            (crawl_id.to_string(), urls)
        })
        .collect();
    groups.sort();
    groups
}

/// Standard base64 (RFC 4648 alphabet, with padding).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

// ------------------------------------------------------------------------------------------
// Time and randomness
// ------------------------------------------------------------------------------------------

/// Seconds since the Unix epoch at the start of round `round` (1-based).
fn round_start(round: u32) -> i64 {
    days_from_civil(2026, 11, 2) * 86_400 + 7 * 86_400 * (i64::from(round) - 1)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the Unix epoch.
fn rfc3339(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

/// splitmix64: tiny, fast and fully specified, so the sample never depends on a crate's version.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn word(&mut self, list: &WordList) -> &'static str {
        let words = list.words();
        words[self.below(words.len())]
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// An independent seed for one purpose (`label`) and item (`n`) of the sample.
fn derive(seed: u64, label: &str, n: u64) -> u64 {
    // FNV-1a of the label, then splitmix rounds to spread seed, label and item over all bits.
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in label.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
    }
    let mut rng = Rng::new(seed ^ Rng::new(h ^ Rng::new(n).next_u64()).next_u64());
    rng.next_u64()
}

/// The Kafka key of a record: its `url` when it has a string one, else empty (DESIGN.md §2:
/// input key = URL).
pub fn record_key(record: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(record)
        .ok()
        .and_then(|v| v.get("url").and_then(|u| u.as_str()).map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value};
    use std::collections::BTreeSet;

    const REASONS: [&str; 11] = [
        "not_json",
        "not_an_object",
        "missing_field",
        "wrong_type",
        "invalid_url",
        "invalid_timestamp",
        "status_out_of_range",
        "invalid_base64",
        "undecodable_body",
        "invalid_utf8",
        "conflicting_body",
    ];

    fn decode_base64(s: &str) -> Option<Vec<u8>> {
        let value = |c: u8| match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        };
        let s = s.as_bytes();
        if !s.chunks_exact(4).remainder().is_empty() {
            return None;
        }
        let mut out = Vec::new();
        for (i, quad) in s.chunks(4).enumerate() {
            let last = i + 1 == s.len() / 4;
            let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
            if pad > 2 || (pad > 0 && !last) {
                return None;
            }
            let mut n = 0u32;
            for &c in &quad[..4 - pad] {
                n = (n << 6) | u32::from(value(c)?);
            }
            n <<= 6 * pad as u32;
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            out.extend_from_slice(&bytes[..3 - pad]);
        }
        Some(out)
    }

    /// Seconds since the epoch of a `YYYY-MM-DDTHH:MM:SSZ` timestamp.
    fn parse_time(s: &str) -> Option<i64> {
        let b = s.as_bytes();
        let shape_ok = b.len() == 20
            && b.iter().enumerate().all(|(i, &c)| match i {
                4 | 7 => c == b'-',
                10 => c == b'T',
                13 | 16 => c == b':',
                19 => c == b'Z',
                _ => c.is_ascii_digit(),
            });
        if !shape_ok {
            return None;
        }
        let num = |r: std::ops::Range<usize>| s[r].parse::<i64>().ok();
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 59 {
            return None;
        }
        Some(days_from_civil(y, mo as u32, d as u32) * 86_400 + h * 3_600 + mi * 60 + se)
    }

    fn host_of(url: &str) -> Option<&str> {
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))?;
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        (!host.is_empty() && !url.contains(char::is_whitespace)).then_some(host)
    }

    fn test_net(ip: &str) -> bool {
        ["192.0.2.", "198.51.100.", "203.0.113."].iter().any(|net| {
            ip.strip_prefix(net)
                .is_some_and(|last| last.parse::<u8>().is_ok_and(|n| n.to_string() == last))
        })
    }

    /// Every contract violation of one record, named by the dead-letter reason it maps to.
    fn defects(line: &[u8]) -> BTreeSet<&'static str> {
        let mut d = BTreeSet::new();
        let Ok(text) = std::str::from_utf8(line) else {
            d.insert("invalid_utf8");
            return d;
        };
        let Ok(value) = serde_json::from_str::<Value>(text) else {
            d.insert("not_json");
            return d;
        };
        let Some(obj) = value.as_object() else {
            d.insert("not_an_object");
            return d;
        };
        for field in ["url", "fetched_at", "status"] {
            if !obj.contains_key(field) {
                d.insert("missing_field");
            }
        }
        for field in [
            "url",
            "fetched_at",
            "content_type",
            "ip",
            "crawl_id",
            "body",
            "body_base64",
        ] {
            if obj.get(field).is_some_and(|v| !v.is_string()) {
                d.insert("wrong_type");
            }
        }
        if obj.get("status").is_some_and(|v| !v.is_u64()) {
            d.insert("wrong_type");
        }
        if let Some(url) = obj.get("url").and_then(Value::as_str) {
            if host_of(url).is_none() {
                d.insert("invalid_url");
            }
        }
        if let Some(at) = obj.get("fetched_at").and_then(Value::as_str) {
            if parse_time(at).is_none() {
                d.insert("invalid_timestamp");
            }
        }
        if let Some(status) = obj.get("status").and_then(Value::as_u64) {
            if status != 0 && !(100..=599).contains(&status) {
                d.insert("status_out_of_range");
            }
        }
        if obj.contains_key("body") && obj.contains_key("body_base64") {
            d.insert("conflicting_body");
        }
        if let Some(b64) = obj.get("body_base64").and_then(Value::as_str) {
            match decode_base64(b64) {
                None => {
                    d.insert("invalid_base64");
                }
                Some(bytes) => {
                    let ct = obj
                        .get("content_type")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let utf8 = !ct.to_ascii_lowercase().contains("iso-8859-1");
                    if utf8 && std::str::from_utf8(&bytes).is_err() {
                        d.insert("undecodable_body");
                    }
                }
            }
        }
        d
    }

    fn good_objects(sample: &SampleCrawl) -> Vec<(usize, Map<String, Value>)> {
        let bad: HashSet<usize> = sample.bad_records.iter().map(|&(i, _)| i).collect();
        sample
            .records
            .iter()
            .enumerate()
            .filter(|(i, _)| !bad.contains(i))
            .map(|(i, r)| match serde_json::from_slice::<Value>(r) {
                Ok(Value::Object(obj)) => (i, obj),
                other => panic!("record {i} is not a JSON object: {other:?}"),
            })
            .collect()
    }

    fn raw_body(obj: &Map<String, Value>) -> Option<Vec<u8>> {
        if let Some(text) = obj.get("body").and_then(Value::as_str) {
            return Some(text.as_bytes().to_vec());
        }
        obj.get("body_base64")
            .and_then(Value::as_str)
            .map(|b| decode_base64(b).expect("valid base64"))
    }

    fn str_of<'a>(obj: &'a Map<String, Value>, field: &str) -> &'a str {
        obj.get(field)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{field} missing in {obj:?}"))
    }

    fn option_sets() -> Vec<SampleOptions> {
        vec![
            SampleOptions::default(),
            SampleOptions {
                seed: 1,
                rounds: 4,
                pages_per_host: 12,
            },
            SampleOptions {
                seed: 99,
                rounds: 3,
                pages_per_host: 3,
            },
            SampleOptions {
                seed: 5,
                rounds: 3,
                pages_per_host: 1,
            },
            SampleOptions {
                seed: 5,
                rounds: 1,
                pages_per_host: 0,
            },
            SampleOptions {
                seed: u64::MAX,
                rounds: 5,
                pages_per_host: 20,
            },
        ]
    }

    #[test]
    fn same_options_give_identical_records() {
        for opts in option_sets() {
            assert_eq!(sample_crawl(&opts), sample_crawl(&opts));
        }
        assert_ne!(
            sample_crawl(&SampleOptions::default()).records,
            sample_crawl(&SampleOptions {
                seed: 8,
                ..SampleOptions::default()
            })
            .records
        );
    }

    #[test]
    fn default_size_is_small() {
        let sample = sample_crawl(&SampleOptions::default());
        let n = sample.records.len();
        assert!((150..=250).contains(&n), "{n} records");
    }

    #[test]
    fn good_records_follow_the_contract() {
        let expected_keys = [
            "url",
            "fetched_at",
            "status",
            "content_type",
            "ip",
            "crawl_id",
            "body",
            "body_base64",
        ];
        for opts in option_sets() {
            let sample = sample_crawl(&opts);
            for (i, obj) in good_objects(&sample) {
                assert!(
                    defects(&sample.records[i]).is_empty(),
                    "record {i}: {:?}",
                    defects(&sample.records[i])
                );
                // Field order as in the contract, no unknown fields.
                assert!(
                    obj.keys().all(|k| expected_keys.contains(&k.as_str())),
                    "{obj:?}"
                );
                let line = std::str::from_utf8(&sample.records[i]).unwrap();
                let positions: Vec<usize> = expected_keys
                    .iter()
                    .filter(|k| obj.contains_key(**k))
                    .map(|k| line.find(&format!("\"{k}\":")).unwrap())
                    .collect();
                assert!(
                    positions.windows(2).all(|w| w[0] < w[1]),
                    "field order in {line:.160}"
                );

                let url = str_of(&obj, "url");
                assert!(host_of(url).unwrap().ends_with(".example"), "{url}");
                let crawl_id = str_of(&obj, "crawl_id");
                assert!(crawl_id.starts_with("week-"));
                let status = obj["status"].as_u64().unwrap();
                assert!([200, 404, 410, 0].contains(&status));
                let has_body = obj.contains_key("body") || obj.contains_key("body_base64");
                assert_eq!(has_body, status == 200, "{url} status {status}");
                if status == 0 {
                    assert!(!obj.contains_key("ip"));
                }
                if let Some(ip) = obj.get("ip") {
                    assert!(test_net(ip.as_str().unwrap()), "{ip}");
                }
                if obj.contains_key("body_base64") {
                    assert_eq!(str_of(&obj, "content_type"), LATIN1_HTML);
                    let bytes = raw_body(&obj).unwrap();
                    assert!(
                        bytes.contains(&0xE9) && bytes.contains(&0xFC),
                        "{url}: é and ü in Latin-1"
                    );
                }
            }
        }
    }

    #[test]
    fn bad_records_have_exactly_their_one_defect() {
        for opts in option_sets() {
            let sample = sample_crawl(&opts);
            for &(i, reason) in &sample.bad_records {
                let found = defects(&sample.records[i]);
                assert_eq!(
                    found,
                    BTreeSet::from([reason]),
                    "record {i}: {:?}",
                    String::from_utf8_lossy(&sample.records[i])
                );
            }
            let seen: BTreeSet<&str> = sample.bad_records.iter().map(|&(_, r)| r).collect();
            assert_eq!(seen, REASONS.iter().copied().collect::<BTreeSet<_>>());
            let lines: HashSet<&[u8]> = sample
                .bad_records
                .iter()
                .map(|&(i, _)| sample.records[i].as_slice())
                .collect();
            assert!(
                lines.contains(&b"{}"[..])
                    && lines.contains(&b"[1,2]"[..])
                    && lines.contains(&b"null"[..])
            );
            // Interleaved: never the first record, never two in a row (with enough good records).
            if sample.records.len() > 3 * sample.bad_records.len() {
                assert!(sample.bad_records.windows(2).all(|w| w[1].0 > w[0].0 + 1));
                assert!(sample.bad_records[0].0 > 0);
            }
        }
    }

    #[test]
    fn fetch_times_increase_by_one_to_three_seconds() {
        for opts in option_sets() {
            let sample = sample_crawl(&opts);
            let mut prev: Option<(String, i64)> = None;
            for (_, obj) in good_objects(&sample) {
                let crawl_id = str_of(&obj, "crawl_id").to_string();
                let at = parse_time(str_of(&obj, "fetched_at")).unwrap();
                let round: i64 = crawl_id["week-".len()..].parse().unwrap();
                let start = round_start(round as u32);
                assert!((start..start + 86_400).contains(&at));
                match &prev {
                    Some((id, t)) if *id == crawl_id => {
                        assert!((1..=3).contains(&(at - t)), "{t} -> {at}")
                    }
                    Some((_, t)) => assert!(at > *t && at == start),
                    None => assert_eq!(at, start),
                }
                prev = Some((crawl_id, at));
            }
        }
    }

    #[test]
    fn exact_groups_match_an_independent_recomputation() {
        for opts in option_sets() {
            let sample = sample_crawl(&opts);
            let mut by_body: BTreeMap<(String, Vec<u8>), BTreeSet<String>> = BTreeMap::new();
            let mut rounds = BTreeSet::new();
            for (_, obj) in good_objects(&sample) {
                rounds.insert(str_of(&obj, "crawl_id").to_string());
                if obj["status"] == 200 {
                    let key = (
                        str_of(&obj, "crawl_id").to_string(),
                        raw_body(&obj).unwrap(),
                    );
                    assert!(by_body
                        .entry(key)
                        .or_default()
                        .insert(str_of(&obj, "url").to_string()));
                }
            }
            let mut expected: Vec<(String, Vec<String>)> = by_body
                .into_iter()
                .filter(|(_, urls)| urls.len() > 1)
                .map(|((id, _), urls)| (id, urls.into_iter().collect()))
                .collect();
            expected.sort();
            assert_eq!(sample.exact_groups, expected);
            if opts.pages_per_host > 0 {
                let with_groups: BTreeSet<String> = sample
                    .exact_groups
                    .iter()
                    .map(|(id, _)| id.clone())
                    .collect();
                assert_eq!(with_groups, rounds, "every round has exact groups");
            }
            // Only the primary and its exact mirror are ever byte-identical.
            for (_, urls) in &sample.exact_groups {
                let hosts: Vec<&str> = urls.iter().map(|u| host_of(u).unwrap()).collect();
                assert_eq!(hosts, ["mirror1.example", "www.docs.example"], "{urls:?}");
                let paths: BTreeSet<&str> = urls
                    .iter()
                    .map(|u| {
                        u.split_once("/manual/")
                            .or(u.split_once("/docs/"))
                            .unwrap()
                            .1
                    })
                    .collect();
                assert_eq!(paths.len(), 1, "{urls:?}");
            }
        }
    }

    #[test]
    fn copies_are_never_neighbours() {
        for opts in option_sets().into_iter().filter(|o| o.pages_per_host >= 3) {
            let sample = sample_crawl(&opts);
            let objs = good_objects(&sample);
            for w in objs.windows(2) {
                if let (Some(a), Some(b)) = (raw_body(&w[0].1), raw_body(&w[1].1)) {
                    assert!(
                        a != b,
                        "{opts:?}: {} next to {}",
                        str_of(&w[0].1, "url"),
                        str_of(&w[1].1, "url")
                    );
                }
            }
        }
    }

    #[test]
    fn later_rounds_change_vanish_fail_and_grow() {
        let sample = sample_crawl(&SampleOptions::default());
        let objs = good_objects(&sample);
        let round = |id: &str| -> BTreeMap<String, (u64, Option<Vec<u8>>)> {
            objs.iter()
                .filter(|(_, o)| str_of(o, "crawl_id") == id)
                .map(|(_, o)| {
                    (
                        str_of(o, "url").to_string(),
                        (o["status"].as_u64().unwrap(), raw_body(o)),
                    )
                })
                .collect()
        };
        let (r1, r2) = (round("week-01"), round("week-02"));
        let count = |r: &BTreeMap<String, (u64, Option<Vec<u8>>)>, host: &str, status: u64| {
            r.iter()
                .filter(|(u, (s, _))| host_of(u) == Some(host) && *s == status)
                .count()
        };
        assert_eq!(count(&r1, "www.docs.example", 200), 12);
        assert_eq!(count(&r1, "mirror1.example", 200), 12);
        assert_eq!(count(&r1, "mirror2.example", 200), 12);
        assert_eq!(count(&r1, "latin.example", 200), 3);
        assert_eq!(count(&r1, "blog.example", 200), 48);
        assert_eq!(count(&r2, "www.docs.example", 404), 1);
        assert_eq!(count(&r2, "mirror1.example", 404), 1);
        assert_eq!(count(&r2, "mirror1.example", 0), 1);
        assert_eq!(count(&r2, "blog.example", 410), 1);
        assert_eq!(count(&r2, "www.docs.example", 200), 12);
        // Exactly one primary page changed, by one sentence.
        let changed: Vec<&String> = r2
            .iter()
            .filter(|(u, (s, b))| {
                host_of(u) == Some("www.docs.example")
                    && *s == 200
                    && r1.get(*u).is_some_and(|old| &old.1 != b)
            })
            .map(|(u, _)| u)
            .collect();
        assert_eq!(changed.len(), 1);
        let old = String::from_utf8(r1[changed[0]].1.clone().unwrap()).unwrap();
        let new = String::from_utf8(r2[changed[0]].1.clone().unwrap()).unwrap();
        let (old_lines, new_lines): (Vec<&str>, Vec<&str>) =
            (old.lines().collect(), new.lines().collect());
        assert_eq!(old_lines.len(), new_lines.len());
        assert_eq!(
            old_lines
                .iter()
                .zip(&new_lines)
                .filter(|(a, b)| a != b)
                .count(),
            1
        );
        // mirror1 still serves the old bytes of the changed page.
        let mirror_url = changed[0].replace("www.docs.example/manual/", "mirror1.example/docs/");
        if r2[&mirror_url].0 == 200 {
            assert_eq!(r2[&mirror_url].1.as_deref(), Some(old.as_bytes()));
        }
        // A new page on the primary and mirror1, not on the banner mirror.
        let new_urls: Vec<&String> = r2.keys().filter(|u| !r1.contains_key(*u)).collect();
        let new_hosts: BTreeSet<&str> = new_urls.iter().map(|u| host_of(u).unwrap()).collect();
        assert_eq!(
            new_hosts,
            BTreeSet::from(["blog.example", "mirror1.example", "www.docs.example"])
        );
    }

    #[test]
    fn banner_mirror_is_near_but_not_exact() {
        let sample = sample_crawl(&SampleOptions::default());
        let objs = good_objects(&sample);
        let bodies: BTreeMap<(String, String), Vec<u8>> = objs
            .iter()
            .filter(|(_, o)| o["status"] == 200)
            .map(|(_, o)| {
                (
                    (
                        str_of(o, "crawl_id").to_string(),
                        str_of(o, "url").to_string(),
                    ),
                    raw_body(o).unwrap(),
                )
            })
            .collect();
        let mut checked = 0;
        for ((round, url), body) in &bodies {
            if host_of(url) != Some("mirror2.example") {
                continue;
            }
            let text = String::from_utf8(body.clone()).unwrap();
            assert!(text.contains("class=\"mirror-banner\""));
            let primary = url.replace("mirror2.example/pub/manual/", "www.docs.example/manual/");
            if let Some(p) = bodies.get(&(round.clone(), primary)) {
                assert_ne!(p, body);
            }
            let r1 = bodies[&(
                "week-01".to_string(),
                url.replace("mirror2.example/pub/manual/", "www.docs.example/manual/"),
            )]
                .clone();
            assert_eq!(
                text.replacen(&format!("{BANNER}\n"), "", 1).as_bytes(),
                &r1[..]
            );
            checked += 1;
        }
        assert_eq!(checked, 24);
    }

    #[test]
    fn doc_pages_have_the_promised_markup() {
        let sample = sample_crawl(&SampleOptions::default());
        for (_, obj) in good_objects(&sample) {
            let url = str_of(&obj, "url");
            if host_of(url) != Some("www.docs.example") || obj["status"] != 200 {
                continue;
            }
            let body = str_of(&obj, "body");
            for needle in [
                "<title>",
                "<style>",
                "<script>",
                "<!--",
                "<nav",
                "href=\"http://",
                "&amp;",
                "&lt;",
                "&eacute;",
                "&#233;",
            ] {
                assert!(body.contains(needle), "{url} lacks {needle}");
            }
            assert!(body.contains("<a href=\"") && body.matches("<p>").count() >= 3);
            let prose_text: String = body
                .split("<p>")
                .skip(1)
                .map(|p| p.split("</p>").next().unwrap())
                .collect::<Vec<_>>()
                .join(" ");
            assert!(!prose_text.is_ascii(), "{url}: non-ASCII letters");
        }
    }

    #[test]
    fn prose_has_three_to_six_paragraphs_of_80_to_300_words() {
        let mut seen = HashSet::new();
        for seed in 0..500 {
            for revision in 0..3 {
                let paras = prose(seed, revision, &SPECIALS_UTF8);
                assert!((3..=6).contains(&paras.len()));
                let words: usize = paras
                    .iter()
                    .flatten()
                    .map(|s| s.split_whitespace().count())
                    .sum();
                assert!((80..=300).contains(&words), "seed {seed}: {words} words");
                assert!(
                    seen.insert(paras.concat().join(" ")),
                    "seed {seed} repeats prose"
                );
            }
            let latin = prose(seed, 0, &SPECIALS_LATIN1).concat().join(" ");
            latin1(&latin);
        }
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded);
            assert_eq!(decode_base64(encoded).unwrap(), plain.as_bytes());
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode_base64(&base64(&all)).unwrap(), all);
    }

    #[test]
    fn timestamps_format_as_rfc_3339() {
        assert_eq!(rfc3339(round_start(1)), "2026-11-02T00:00:00Z");
        assert_eq!(rfc3339(round_start(2) + 3_661), "2026-11-09T01:01:01Z");
        assert_eq!(rfc3339(round_start(9)), "2026-12-28T00:00:00Z");
        assert_eq!(rfc3339(round_start(10)), "2027-01-04T00:00:00Z");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }
}
