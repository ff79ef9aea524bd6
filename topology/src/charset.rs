//! Body bytes to text: the charset from `content_type`, else a byte-order mark, else a `<meta>`
//! declaration in the first 1024 bytes, else UTF-8 if the bytes are valid UTF-8, else
//! Windows-1252 (the WHATWG reading of ISO-8859-1), as seed 001 §2 and browsers do.
//!
//! Bodies sent as `body` are already Unicode text; only `body_base64` bytes go through here.

use encoding_rs::{Encoding, UTF_8, WINDOWS_1252};
use std::borrow::Cow;

/// The body's bytes are malformed in the charset they were declared in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("body bytes are not valid {charset} (declared by {declared_by}); fix the content type or send the body as text")]
pub struct UndecodableBody {
    /// The charset used.
    pub charset: &'static str,
    /// Where the charset came from: `content_type`, `bom`, `meta`.
    pub declared_by: &'static str,
}

/// Decodes `bytes` to text. Returns the text and the name of the charset used.
///
/// A declared charset is trusted, so bytes that are malformed in it are an error. Sniffed UTF-8
/// never fails: undeclared bytes that are not UTF-8 are read as Windows-1252.
pub fn decode_body<'a>(
    bytes: &'a [u8],
    content_type: Option<&str>,
) -> Result<(Cow<'a, str>, &'static str), UndecodableBody> {
    if let Some((enc, bom_len)) = Encoding::for_bom(bytes) {
        return strict(enc, &bytes[bom_len..], "bom");
    }
    if let Some(enc) = content_type
        .and_then(charset_param)
        .and_then(|l| Encoding::for_label(l.as_bytes()))
    {
        return strict(enc, bytes, "content_type");
    }
    if let Some(enc) = meta_charset(&bytes[..bytes.len().min(1024)]) {
        return strict(enc, bytes, "meta");
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok((Cow::Borrowed(s), UTF_8.name())),
        Err(_) => {
            let (text, _) = WINDOWS_1252.decode_without_bom_handling(bytes);
            Ok((text, WINDOWS_1252.name()))
        }
    }
}

fn strict<'a>(
    enc: &'static Encoding,
    bytes: &'a [u8],
    declared_by: &'static str,
) -> Result<(Cow<'a, str>, &'static str), UndecodableBody> {
    // A page that declares UTF-16 in its <meta> is ASCII-compatible by construction (browsers
    // read such a declaration as UTF-8), so follow the WHATWG rule.
    let enc = if declared_by == "meta" {
        enc.output_encoding()
    } else {
        enc
    };
    enc.decode_without_bom_handling_and_without_replacement(bytes)
        .map(|t| (t, enc.name()))
        .ok_or(UndecodableBody {
            charset: enc.name(),
            declared_by,
        })
}

/// The `charset=` parameter of a content type, without quotes.
pub fn charset_param(content_type: &str) -> Option<&str> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches(|c| c == '"' || c == '\''))
    })
}

/// A `<meta charset=...>` or `<meta http-equiv content="...; charset=...">` declaration (also
/// `<?xml encoding=...?>`), found by a byte scan of the document head.
fn meta_charset(head: &[u8]) -> Option<&'static Encoding> {
    let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
    let mut from = 0;
    while let Some(pos) = find(&lower[from..], b"charset") {
        let at = from + pos + b"charset".len();
        from = at;
        let rest = &lower[at..];
        let rest = skip_ws(rest);
        let Some(rest) = rest.strip_prefix(b"=") else {
            continue;
        };
        let rest = skip_ws(rest);
        let rest = rest
            .strip_prefix(b"\"")
            .or_else(|| rest.strip_prefix(b"'"))
            .unwrap_or(rest);
        let end = rest
            .iter()
            .position(|&c| {
                !(c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.' || c == b':')
            })
            .unwrap_or(rest.len());
        if let Some(enc) = Encoding::for_label(&rest[..end]) {
            return Some(enc);
        }
    }
    if let Some(pos) = find(&lower, b"encoding=") {
        let rest = &lower[pos + b"encoding=".len()..];
        let rest = rest
            .strip_prefix(b"\"")
            .or_else(|| rest.strip_prefix(b"'"))
            .unwrap_or(rest);
        let end = rest
            .iter()
            .position(|&c| c == b'"' || c == b'\'' || c == b'?')
            .unwrap_or(rest.len());
        return Encoding::for_label(&rest[..end]);
    }
    None
}

fn skip_ws(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &b[n..]
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_type_wins_and_is_strict() {
        let (t, cs) = decode_body(b"caf\xe9", Some("text/html; charset=ISO-8859-1")).unwrap();
        assert_eq!((t.as_ref(), cs), ("café", "windows-1252"));
        let err = decode_body(b"caf\xe9", Some("text/html; charset=\"utf-8\"")).unwrap_err();
        assert_eq!(err.declared_by, "content_type");
    }

    #[test]
    fn meta_and_sniffing() {
        let page = b"<html><head><meta charset=\"iso-8859-1\"></head><body>caf\xe9</body></html>";
        let (t, cs) = decode_body(page, Some("text/html")).unwrap();
        assert!(t.contains("café"));
        assert_eq!(cs, "windows-1252");
        let page = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=utf-8\"><p>caf\xc3\xa9";
        assert!(decode_body(page, None).unwrap().0.contains("café"));
        let xml = b"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><p>\xfc</p>";
        assert!(decode_body(xml, None).unwrap().0.contains('ü'));
        // undeclared, not UTF-8: Windows-1252
        assert_eq!(
            decode_body(b"\x93hi\x94", None).unwrap().0,
            "\u{201c}hi\u{201d}"
        );
        // undeclared UTF-8
        assert_eq!(decode_body("žluť".as_bytes(), None).unwrap().1, "UTF-8");
    }

    #[test]
    fn bom_wins() {
        let (t, cs) =
            decode_body(b"\xef\xbb\xbfhi", Some("text/html; charset=iso-8859-1")).unwrap();
        assert_eq!((t.as_ref(), cs), ("hi", "UTF-8"));
    }

    #[test]
    fn charset_param_parses() {
        assert_eq!(charset_param("text/html; charset=UTF-8"), Some("UTF-8"));
        assert_eq!(
            charset_param("text/html;charset='latin1' ; x=y"),
            Some("latin1")
        );
        assert_eq!(charset_param("text/html"), None);
    }
}
