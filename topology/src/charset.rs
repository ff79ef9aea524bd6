//! Body bytes to text: the charset from `content_type`, else a byte-order mark, else a `<meta>`
//! declaration in the first 1024 bytes, else UTF-8 if the bytes are valid UTF-8, else
//! Windows-1252 (the WHATWG reading of ISO-8859-1), as seed 001 §2 and browsers do.
//!
//! Bodies sent as `body` are already Unicode text; only `body_base64` bytes go through here.
//! [`is_binary`] tells a body that is not text at all (either form), which is not read as text.

use encoding_rs::{Encoding, UTF_16BE, UTF_16LE, UTF_8, WINDOWS_1252};
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

/// A body's bytes as the text to read, with the name of their charset: a body that is not text
/// ([`is_binary`]) is not decoded, and reads as no text under the name [`BINARY`]; any other is
/// decoded as [`decode_body`] does, and is an error where that is.
pub fn read_body<'a>(
    bytes: &'a [u8],
    content_type: Option<&str>,
) -> Result<(Cow<'a, str>, &'static str), UndecodableBody> {
    if is_binary(bytes, content_type) {
        return Ok((Cow::Borrowed(""), BINARY));
    }
    decode_body(bytes, content_type)
}

/// The charset name signature events state for a body that is not text (as `file -i` says).
pub const BINARY: &str = "binary";

/// How many leading bytes [`is_binary`] sniffs: WHATWG MIME Sniffing's resource header.
const SNIFF_BYTES: usize = 1445;

/// Whether a body is not text at all (an image, a PDF, an archive), so that reading its bytes
/// as characters would only make noise: shingles of random bytes, which cost signing time and
/// window memory and can only ever pair by chance. Such a body keeps its checksum (identical
/// copies still pair, as `exact`) but has no text.
///
/// A body that starts with the signature of a common binary format (gzip, zip, PDF, PNG, JPEG,
/// GIF) is binary whatever its declared type: no text starts so, and servers mislabel such
/// files (and a crawler may forget to undo a `Content-Encoding: gzip`). Otherwise the declared
/// MIME type decides when it says: `text/*` but `text/plain`, XML, JSON and script types are
/// text (a page with a stray control byte stays a page); image, audio, video, font and model
/// types (but not `+xml` ones such as SVG), PDF, and archive and office formats are not. An
/// absent, unknown, `application/octet-stream` or `text/plain` type (the usual mislabel, which
/// browsers sniff too) is sniffed as WHATWG MIME Sniffing §7.2 does: a body is binary when its
/// first 1445 bytes hold a *binary data byte* (a control byte other than tab, line feed, form
/// feed, carriage return and escape), unless it starts with a byte-order mark or declares
/// UTF-16 or UTF-32, whose text holds such bytes.
pub fn is_binary(bytes: &[u8], content_type: Option<&str>) -> bool {
    const MAGIC: [&[u8]; 7] = [
        b"\x1f\x8b",   // gzip
        b"PK\x03\x04", // zip (and the office formats, jar, apk)
        b"%PDF-",
        b"\x89PNG\r\n\x1a\n",
        b"\xff\xd8\xff", // JPEG
        b"GIF87a",
        b"GIF89a",
    ];
    if MAGIC.iter().any(|m| bytes.starts_with(m)) {
        return true;
    }
    // The MIME type's essence, lower-cased on the stack (a longer one is no type we know).
    let essence = content_type.map_or("", essence);
    let mut lower = [0u8; 80];
    let essence = match lower.get_mut(..essence.len()) {
        Some(buf) => {
            buf.copy_from_slice(essence.as_bytes());
            buf.make_ascii_lowercase();
            std::str::from_utf8(buf).unwrap_or("")
        }
        None => "",
    };
    match declared_kind(essence) {
        Some(binary) => binary,
        None => {
            let label = content_type.and_then(charset_param).unwrap_or("");
            let wide = matches!(Encoding::for_label(label.as_bytes()), Some(e) if e == UTF_16LE || e == UTF_16BE)
                || label.to_ascii_lowercase().starts_with("utf-32");
            !wide
                && Encoding::for_bom(bytes).is_none()
                && bytes[..bytes.len().min(SNIFF_BYTES)]
                    .iter()
                    .any(|&b| is_binary_data_byte(b))
        }
    }
}

/// True when the declared type is `text/plain` (any parameters, any case): a body a browser
/// shows as text, whose markup-like characters are text too.
pub fn is_plain_text(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| essence(ct).eq_ignore_ascii_case("text/plain"))
}

/// A MIME type's essence: the type and subtype, without parameters, as written.
fn essence(content_type: &str) -> &str {
    content_type.split(';').next().unwrap_or("").trim()
}

/// What a MIME type essence (lower case) says: `Some(true)` binary, `Some(false)` text, `None`
/// nothing (sniff the bytes).
fn declared_kind(essence: &str) -> Option<bool> {
    let (top, sub) = essence.split_once('/')?;
    if sub.ends_with("+xml") || sub.ends_with("+json") {
        return Some(false);
    }
    match top {
        "text" if sub == "plain" => None,
        "text" => Some(false),
        "image" | "audio" | "video" | "font" | "model" => Some(true),
        "application" => match sub {
            "xml" | "xhtml" | "json" | "javascript" | "ecmascript" | "x-javascript" | "rss"
            | "atom" | "x-httpd-php" | "x-sh" | "x-tex" | "rtf" => Some(false),
            "pdf"
            | "zip"
            | "gzip"
            | "x-gzip"
            | "x-tar"
            | "x-bzip2"
            | "x-xz"
            | "zstd"
            | "x-7z-compressed"
            | "vnd.rar"
            | "x-rar-compressed"
            | "java-archive"
            | "wasm"
            | "x-shockwave-flash"
            | "msword"
            | "vnd.ms-excel"
            | "vnd.ms-powerpoint"
            | "vnd.ms-fontobject"
            | "x-font-ttf"
            | "x-font-woff"
            | "vnd.android.package-archive"
            | "x-msdownload"
            | "x-iso9660-image"
            | "ogg" => Some(true),
            s if s.starts_with("vnd.openxmlformats-officedocument.")
                || s.starts_with("vnd.oasis.opendocument.") =>
            {
                Some(true)
            }
            _ => None,
        },
        _ => None,
    }
}

/// WHATWG MIME Sniffing's binary data byte: 0x00-0x08, 0x0B, 0x0E-0x1A, 0x1C-0x1F.
fn is_binary_data_byte(b: u8) -> bool {
    matches!(b, 0x00..=0x08 | 0x0B | 0x0E..=0x1A | 0x1C..=0x1F)
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
    fn binary_bodies_are_told_from_text() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        // The declared type decides when it says.
        assert!(is_binary(b"plain words", Some("image/png")));
        assert!(is_binary(b"%PDF-1.7", Some("application/pdf")));
        assert!(is_binary(
            b"PK",
            Some("application/vnd.openxmlformats-officedocument.wordprocessingml.document")
        ));
        assert!(!is_binary(b"<svg></svg>", Some("image/svg+xml")));
        assert!(!is_binary(b"<p>a\0b</p>", Some("text/html; charset=utf-8")));
        // A format's signature overrules the declared type; text/plain is sniffed.
        assert!(is_binary(
            b"\x1f\x8b\x08\0\0\0\0\0",
            Some("text/html; charset=utf-8")
        ));
        assert!(is_binary(b"%PDF-1.4\n%\xe2\xe3", Some("text/html")));
        assert!(is_binary(b"\xff\xd8\xff\xe0\0\x10JFIF", Some("text/plain")));
        assert!(is_binary(
            b"abc\0\x01\x02",
            Some("text/plain; charset=us-ascii")
        ));
        assert!(!is_binary(b"plain text\r\n", Some("text/plain")));
        assert!(!is_binary(b"{\"a\":1}", Some("Application/JSON")));
        assert!(is_binary(b"PLTE", Some(" IMAGE/x-Icon ; q=1")));
        let long = format!("application/{}", "x".repeat(100));
        assert!(is_binary(b"\0", Some(&long)) && !is_binary(b"text", Some(&long)));
        // Else the first bytes do.
        assert!(is_binary(png, None));
        assert!(is_binary(png, Some("application/octet-stream")));
        assert!(is_binary(png, Some("application/x-unknown")));
        assert!(!is_binary(b"plain words\tand\r\nlines\x0c\x1b", None));
        assert!(!is_binary(b"plain words", Some("application/octet-stream")));
        assert!(!is_binary(b"", None));
        // UTF-16 text is full of NULs: a byte-order mark or a declared UTF-16 says it is text.
        let wide: Vec<u8> = "<p>wide</p>"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        assert!(is_binary(&wide, None));
        assert!(!is_binary(&[&[0xFF, 0xFE][..], &wide].concat(), None));
        assert!(!is_binary(
            &wide,
            Some("application/x-unknown; charset=UTF-16LE")
        ));
        // Only the resource header is sniffed.
        let late = [vec![b'a'; SNIFF_BYTES], vec![0u8]].concat();
        assert!(!is_binary(&late, None));
        assert!(is_binary(&late[1..], None));
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
