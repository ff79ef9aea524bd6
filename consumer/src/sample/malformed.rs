//! The malformed records mixed into the stream, each with one defect and the dead-letter reason
//! neardup must give.

use super::{
    base64, good_line, json_str, latin1, object, rfc3339, round_start, sentence_from, sub_seed,
    Rng, Timed, BLOG, LATIN1_HTML, TEMPLATES, UTF8_HTML,
};

/// One kind of malformed record: the reason neardup must give and how to build it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Bad {
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

pub(super) const BAD_KINDS: [Bad; 15] = [
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
    pub(super) fn reason(self) -> &'static str {
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
    pub(super) fn build(
        self,
        rng: &mut Rng,
        n: usize,
        crawl_id: &str,
        fetched_at: &str,
    ) -> Vec<u8> {
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
pub(super) fn assemble(seed: u64, good: &[Timed]) -> (Vec<Vec<u8>>, Vec<(usize, &'static str)>) {
    let mut rng = Rng::new(sub_seed(seed, "bad", 0));
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
