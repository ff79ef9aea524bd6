//! The documentation collection: the primary copy, its exact and its banner mirror, and how it
//! changes from round to round.

use super::{capitalize, plural, prose, sub_seed, Rng, WordList, NOUNS, SPECIALS_UTF8};
use std::collections::HashSet;

/// One page of the documentation collection: everything but the revision is fixed at birth.
#[derive(Debug, Clone)]
pub(super) struct DocPage {
    pub(super) id: usize,
    /// Path below the host's prefix, e.g. `howto/packet-buffers.html`.
    pub(super) path: String,
    pub(super) title: String,
    pub(super) seed: u64,
    /// (href, text) of the nav links.
    pub(super) nav: Vec<(String, String)>,
    /// (href, title) of the contents list (index page only).
    pub(super) toc: Vec<(String, String)>,
}

pub(super) struct DocState {
    pub(super) page: DocPage,
    pub(super) revision: u32,
    pub(super) born: u32,
    pub(super) vanished_in: Option<u32>,
}

pub(super) static TITLE_PREFIXES: WordList = WordList::new(
    "Configuring, Understanding, Tuning, Securing, Monitoring, Using, Indexing, Mirroring,
Caching, Migrating, Troubleshooting, Sharing, Planning, Testing",
);

/// Picks an unused slug such as `packet-buffers` and a title for the page it names.
pub(super) fn new_slug(rng: &mut Rng, slugs: &mut HashSet<String>) -> (String, String) {
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

pub(super) fn new_doc_page(
    rng: &mut Rng,
    seed: u64,
    id: usize,
    slugs: &mut HashSet<String>,
) -> DocPage {
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
        seed: sub_seed(seed, "doc", id as u64),
        nav: Vec::new(),
        toc: Vec::new(),
    }
}

/// Nav links of `page`: contents, previous, next, one or two related pages, and absolute links.
pub(super) fn doc_nav(rng: &mut Rng, page: &DocPage, known: &[DocPage]) -> Vec<(String, String)> {
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

pub(super) fn initial_docs(seed: u64, n: usize, slugs: &mut HashSet<String>) -> Vec<DocState> {
    let mut rng = Rng::new(sub_seed(seed, "docs", 0));
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
pub(super) fn evolve_docs(
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

pub(super) fn relative(from: &str, to: &str) -> String {
    match (from.rsplit_once('/'), to.rsplit_once('/')) {
        (None, _) => to.to_string(),
        (Some((a, _)), Some((b, file))) if a == b => file.to_string(),
        (Some(_), _) => format!("../{to}"),
    }
}

pub(super) const DOC_STYLE: &str =
    "body { font-family: Georgia, serif; margin: 2em auto; max-width: 42em; }
nav a { margin-right: 0.8em; }
ul.toc li { margin: 0.2em 0; }
footer { font-size: smaller; color: #555; }
";

pub(super) const DOC_SCRIPT: &str = "function toggleNav() {
  var nav = document.getElementById(\"nav\");
  if (nav && nav.children.length < 20) { nav.hidden = !nav.hidden; }
}
";

/// The primary's HTML of `page` at `revision` (mirrors serve these bytes, or add a banner).
pub(super) fn render_doc(page: &DocPage, revision: u32) -> String {
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
