//! The stateless half of processing ([`Preparer`]): a record decoded and its page signed, on
//! any thread, ahead of the one [`crate::Topology`] that applies the results in order.

use crate::signed::{Signed, SignedParts};
use crate::signer::Signer;
use crate::{charset, decode, near, sign_cache};
use crate::{Config, DecodeError, DecodeLimits};
use neardup_schemas::{Body, DeadLetterReason, PageEvent};
use std::sync::Arc;

/// A record decoded and signed, ready for [`crate::Topology::apply`].
pub struct Prepared(pub(crate) Result<Box<PreparedPage>, DecodeError>);

impl Prepared {
    /// A record refused before it could be prepared, for a reason the reader found (a WARC
    /// record too large to hold, of which the reader kept only the start): applied, it is a
    /// dead letter with `reason` and `detail`, its payload the bytes given to `apply`.
    pub fn rejected(reason: DeadLetterReason, detail: impl Into<String>) -> Prepared {
        Prepared(Err(DecodeError::new(reason, detail)))
    }
}

/// A decoded page with its signatures.
pub(crate) struct PreparedPage {
    pub(crate) page: PageEvent,
    pub(crate) signed: Option<Signed>,
    /// For a page read back from the sign stage: where that stage read it (partition, offset
    /// of the input topic), so a repeat is recognised.
    pub(crate) origin: Option<(i32, i64)>,
}

impl Prepared {
    /// The page's event time (`fetched_at`), or `None` for a record that cannot be decoded.
    pub fn event_time_ms(&self) -> Option<i64> {
        self.0.as_ref().ok().map(|p| p.page.fetched_at_ms)
    }

    /// For a page read back from the sign stage: the input partition and offset that stage
    /// read it at.
    pub fn origin(&self) -> Option<(i32, i64)> {
        self.0.as_ref().ok()?.origin
    }

    /// What the sketch index sees of the page: its URL and its sketch (`None` for a fetch
    /// without content), or `None` for a record that cannot be decoded. For benchmarks and tools
    /// that drive a [`near::NearIndex`] themselves.
    pub fn index_input(&self) -> Option<(&str, Option<&near::Sketch>)> {
        let p = self.0.as_ref().ok()?;
        Some((&p.page.url, p.signed.as_ref().map(|s| &s.sketch)))
    }
}

/// The stateless half of processing: decoding a record and signing its page depend only on
/// the record and the configuration, so any number of preparers (one per thread; each keeps
/// its own buffers) can work ahead of the one [`crate::Topology`] that applies the results in
/// order.
pub struct Preparer {
    pub(crate) decode: DecodeLimits,
    pub(crate) emit_minvalues: bool,
    pub(crate) signer: Signer,
    pub(crate) cache: Option<std::sync::Arc<sign_cache::SignCache>>,
}

impl Preparer {
    /// A preparer for topologies of configuration `cfg`.
    pub fn new(cfg: &Config) -> Self {
        Preparer {
            decode: cfg.decode.clone(),
            emit_minvalues: cfg.emit_minvalues,
            signer: Signer::new(cfg.signer.clone()),
            cache: None,
        }
    }

    /// How many paragraph fingerprints a signature event carries.
    pub(crate) fn max_paragraphs(&self) -> usize {
        self.signer.config().caps.paragraphs
    }

    /// A preparer that looks pages up in `cache` before signing them, and caches what it signs.
    /// Every preparer sharing a cache must have the same configuration; the results do not
    /// depend on the cache.
    pub fn with_cache(cfg: &Config, cache: std::sync::Arc<sign_cache::SignCache>) -> Self {
        Preparer {
            cache: Some(cache),
            ..Preparer::new(cfg)
        }
    }

    /// Decodes and signs one record.
    pub fn prepare(&mut self, raw: &[u8]) -> Prepared {
        Prepared(self.prepare_page(raw).map(Box::new))
    }

    pub(crate) fn prepare_page(&mut self, raw: &[u8]) -> Result<PreparedPage, DecodeError> {
        let envelope = decode::envelope(raw, &self.decode)?;
        let content = envelope.page.has_content() && envelope.has_body();
        // A page the cache knows by its body's JSON text needs no decoding of its body.
        let key = match (&self.cache, envelope.body_literal()) {
            (Some(cache), Some((literal, form))) if content => {
                let key = sign_cache::BodyKey::new(literal, form);
                if let Some(parts) = cache.get(&sign_cache::Fetch::new(&envelope.page, key)) {
                    return Ok(PreparedPage {
                        signed: Some(Signed::new(
                            parts,
                            self.emit_minvalues,
                            self.max_paragraphs(),
                        )),
                        page: envelope.page,
                        origin: None,
                    });
                }
                Some(key)
            }
            _ => None,
        };
        let mut page = envelope.into_page(&self.decode)?;
        // Only signing reads the body: it is freed here, on the preparing thread, rather than
        // carried to the one thread that applies pages in order.
        // An instant redirect (see `Extraction::redirects`) has no content, as a 3xx fetch has
        // none; it is not cached, so each fetch of it is read again (such stubs are small).
        let signed = match page.body.take() {
            Some(body) if content => self.sign_uncached(&page, &body).map(|parts| {
                let parts = Arc::new(parts);
                if let (Some(cache), Some(key)) = (&self.cache, key) {
                    cache.put(&sign_cache::Fetch::new(&page, key), Arc::clone(&parts));
                }
                Signed::new(parts, self.emit_minvalues, self.max_paragraphs())
            }),
            _ => None,
        };
        Ok(PreparedPage {
            page,
            signed,
            origin: None,
        })
    }

    /// The page's signatures; `None` when it is an instant redirect.
    pub(crate) fn sign_uncached(&mut self, page: &PageEvent, body: &Body) -> Option<SignedParts> {
        let checksum = xxhash_rust::xxh3::xxh3_128(body.raw());
        let page_url = url::Url::parse(&page.url).ok();
        let content_type = page.content_type.as_deref();
        let (html, charset) = match body {
            // Not text: its characters would be noise (see `charset::is_binary`).
            Body::Text(html) if charset::is_binary(html.as_bytes(), content_type) => {
                (std::borrow::Cow::Borrowed(""), charset::BINARY)
            }
            Body::Text(html) => (std::borrow::Cow::Borrowed(html.as_str()), "UTF-8"),
            // decode() already proved the bytes readable; a failure here cannot happen, but is
            // handled as empty text rather than a panic.
            Body::Bytes(bytes) => charset::read_body(bytes, content_type)
                .unwrap_or((std::borrow::Cow::Borrowed(""), "UTF-8")),
        };
        let caps = self.signer.config().caps;
        let sig = match charset::is_plain_text(content_type) {
            true => self.signer.sign_plain(&html),
            false => self.signer.sign(&html, page_url.as_ref()),
        };
        if sig.extraction.redirects() {
            return None;
        }
        // The links the cap keeps: all of them, without a list of their own, on almost
        // every page.
        let ((links, link_ends), links_omitted) = match caps.keep_links(sig.extraction.links()) {
            None => (concat_links(sig.extraction.links()), 0),
            Some((kept, omitted)) => (concat_links(kept.into_iter()), omitted),
        };
        Some(SignedParts {
            checksum,
            text_hash: sig.text_hash,
            title: sig.title,
            b: sig.b,
            c: sig.c,
            body_bytes: body.raw().len() as u64,
            text_bytes: sig.extraction.text.len() as u64,
            tokens: sig.tokens,
            charset: charset.into(),
            tokens_truncated: sig.truncated,
            chunks: sig.chunks.clone(),
            chunks_omitted: sig.chunks_omitted,
            paragraphs: sig.paragraphs.clone(),
            short_page: sig.paragraph_info.short,
            rp: sig.rp.clone(),
            links,
            link_ends,
            links_omitted: u32::try_from(links_omitted).unwrap_or(u32::MAX),
        })
    }
}

/// `links` concatenated, with where each ends, sized exactly (the sign cache keeps them).
pub(crate) fn concat_links<'a>(
    links: impl Iterator<Item = &'a str> + Clone,
) -> (String, Vec<usize>) {
    let mut all = String::with_capacity(links.clone().map(str::len).sum());
    let mut ends = Vec::with_capacity(links.clone().count());
    for l in links {
        all.push_str(l);
        ends.push(all.len());
    }
    (all, ends)
}
