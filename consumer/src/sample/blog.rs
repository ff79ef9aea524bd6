//! The blog (unique pages sharing one template) and the Latin-1 host (pages sent as
//! `body_base64`, ISO-8859-1 bytes).

use super::{
    new_slug, prose, sub_seed, Fetch, Payload, Rng, WordList, LATIN, PLACES, SPECIALS_LATIN1,
    SPECIALS_UTF8,
};
use std::collections::HashSet;

#[derive(Debug, Clone)]
pub(super) struct PostPage {
    pub(super) id: usize,
    pub(super) path: String,
    pub(super) title: String,
    pub(super) seed: u64,
    pub(super) posted: String,
    pub(super) author: &'static str,
}

pub(super) struct PostState {
    pub(super) page: PostPage,
    pub(super) vanished_in: Option<u32>,
}

impl PostState {
    pub(super) fn new(page: PostPage) -> PostState {
        PostState {
            page,
            vanished_in: None,
        }
    }
}

pub(super) static AUTHORS: WordList =
    WordList::new("Ada Quill, Bram Oakes, Céline Marsh, Jonas Brandt, Mira Holt, Tomás Reed");

pub(super) fn blog_post(seed: u64, id: usize, slugs: &mut HashSet<String>) -> PostPage {
    let mut rng = Rng::new(sub_seed(seed, "post", id as u64));
    let (slug, title) = new_slug(&mut rng, slugs);
    let day = 1 + rng.below(28);
    let month = 1 + rng.below(10);
    PostPage {
        id,
        path: format!("2026/{slug}.html"),
        title,
        seed: sub_seed(seed, "post-prose", id as u64),
        posted: format!("2026-{month:02}-{day:02}"),
        author: rng.word(&AUTHORS),
    }
}

/// Round r ≥ 2 on the blog: one post vanishes (410), one new post appears.
pub(super) fn evolve_blog(
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

pub(super) fn render_post(page: &PostPage) -> String {
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
pub(super) fn latin_pages(seed: u64) -> Vec<Fetch> {
    let mut rng = Rng::new(sub_seed(seed, "latin", 0));
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
            for para in prose(sub_seed(seed, "latin-prose", n as u64), 0, &SPECIALS_LATIN1) {
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
pub(super) fn latin1(text: &str) -> Vec<u8> {
    text.chars()
        .map(|c| u8::try_from(u32::from(c)).expect("Latin-1 page text stays within U+00FF"))
        .collect()
}
