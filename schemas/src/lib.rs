//! neardup's event contracts (DESIGN.md §2).
//!
//! One Rust type per event, serialized with serde to one JSON object per Kafka record. Every
//! output event carries `schema` (`neardup.<kind>/v1`) and a deterministic `event_id`: a hash of
//! everything else the event states, so a consumer can drop the repeats that at-least-once
//! delivery produces after a restart. The JSON Schema file for each event lives in
//! `schemas/json/`, is checked against real emitted events by tests, and is what downstream
//! teams read.
//!
//! ```
//! use neardup_schemas::{OutputEvent, PairEvent, PairLevel, PairState};
//! let mut pair = PairEvent::new(
//!     "http://a.example/x".into(), "http://b.example/x".into(), PairState::Detected,
//!     PairLevel::Exact, 6, 384, Some(1.0), false, "2026-11-02T10:15:00Z".into(), Some("week-01".into()),
//! );
//! pair.seal();
//! assert_eq!(pair.key(), "http://a.example/x http://b.example/x");
//! assert_eq!(pair.event_id.len(), 32);
//! ```

mod events;
mod input;

pub use events::*;
pub use input::*;

use serde::Serialize;

/// An event neardup publishes: it knows its topic kind, its record key and how to seal its id.
pub trait OutputEvent: Serialize {
    /// The output topic this event goes to.
    const KIND: OutputKind;
    /// The Kafka record key (DESIGN.md §2: URL, sorted URL pair, cluster id, ...).
    fn key(&self) -> String;
    /// Mutable access to the `event_id` field, so [`OutputEvent::seal`] can fill it.
    fn event_id_mut(&mut self) -> &mut String;

    /// Sets `event_id` to the hash of everything else the event states.
    ///
    /// The id is the 128-bit XXH3 of the event's JSON serialization with an empty `event_id`,
    /// written as 32 lower-case hex digits. serde serializes struct fields in declaration order,
    /// so the same event always hashes the same way.
    fn seal(&mut self) {
        self.event_id_mut().clear();
        // Serializing a plain struct of strings and numbers cannot fail.
        let bytes = serde_json::to_vec(&*self).expect("event serializes");
        *self.event_id_mut() = format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&bytes));
    }

    /// Seals the event and serializes it to the bytes published as the record value.
    fn to_record(mut self) -> (String, Vec<u8>)
    where
        Self: Sized,
    {
        // One serialization instead of two: the bytes with an empty `event_id` are what the id
        // hashes, and the id is then spliced into them, giving exactly what serializing the
        // sealed event gives (a test holds the two equal).
        self.event_id_mut().clear();
        let mut value = Vec::with_capacity(512);
        serde_json::to_writer(&mut value, &self).expect("event serializes");
        if let Err(id) = seal_json(&mut value) {
            *self.event_id_mut() = id;
            value = serde_json::to_vec(&self).expect("event serializes");
        }
        (self.key(), value)
    }
}

/// Seals the JSON of an event serialized with an empty `event_id`: the id is the hash of those
/// bytes ([`OutputEvent::seal`]), spliced into them, which gives exactly what serializing the
/// sealed event gives (a test holds the two equal). `Err` carries the id, `value` untouched,
/// when `"event_id":""` is not among its first 256 bytes (every event states its `schema` and
/// then its `event_id` first, so this does not happen): serialize the event again with it.
pub fn seal_json(value: &mut Vec<u8>) -> Result<(), String> {
    let id = hex32(xxhash_rust::xxh3::xxh3_128(value));
    const EMPTY_ID: &[u8] = b"\"event_id\":\"\"";
    let head = &value[..value.len().min(256)];
    match head.windows(EMPTY_ID.len()).position(|w| w == EMPTY_ID) {
        Some(at) => {
            // Open a 32-byte gap before the closing quote and write the id into it.
            let quote = at + EMPTY_ID.len() - 1;
            let len = value.len();
            value.resize(len + id.len(), 0);
            value.copy_within(quote..len, quote + id.len());
            value[quote..quote + id.len()].copy_from_slice(&id);
            Ok(())
        }
        None => Err(String::from_utf8_lossy(&id).into_owned()),
    }
}

/// `v` as 32 lower-case hex digits (as event ids and 128-bit hashes in events are written).
pub fn hex32(v: u128) -> [u8; 32] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 32];
    for (i, d) in out.iter_mut().enumerate() {
        *d = DIGITS[((v >> (124 - 4 * i)) & 0xf) as usize];
    }
    out
}

/// The output topics of DESIGN.md §2, by what they carry.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum OutputKind {
    /// `neardup.signatures`
    Signatures,
    /// `neardup.pairs`
    Pairs,
    /// `neardup.clusters`
    Clusters,
    /// `neardup.mirrors`
    Mirrors,
    /// `neardup.collections`
    Collections,
    /// `neardup.recrawl`
    Recrawl,
    /// `neardup.dead-letter`
    DeadLetter,
}

impl OutputKind {
    /// Every output kind, in a fixed order.
    pub const ALL: [OutputKind; 7] = [
        OutputKind::Signatures,
        OutputKind::Pairs,
        OutputKind::Clusters,
        OutputKind::Mirrors,
        OutputKind::Collections,
        OutputKind::Recrawl,
        OutputKind::DeadLetter,
    ];

    /// The default topic name, e.g. `neardup.pairs`.
    pub fn default_topic(self) -> &'static str {
        match self {
            OutputKind::Signatures => "neardup.signatures",
            OutputKind::Pairs => "neardup.pairs",
            OutputKind::Clusters => "neardup.clusters",
            OutputKind::Mirrors => "neardup.mirrors",
            OutputKind::Collections => "neardup.collections",
            OutputKind::Recrawl => "neardup.recrawl",
            OutputKind::DeadLetter => "neardup.dead-letter",
        }
    }

    /// The `schema` value events of this kind carry, e.g. `neardup.pairs/v1`.
    pub fn schema(self) -> &'static str {
        match self {
            OutputKind::Signatures => "neardup.signatures/v1",
            OutputKind::Pairs => "neardup.pairs/v1",
            OutputKind::Clusters => "neardup.clusters/v1",
            OutputKind::Mirrors => "neardup.mirrors/v1",
            OutputKind::Collections => "neardup.collections/v1",
            OutputKind::Recrawl => "neardup.recrawl/v1",
            OutputKind::DeadLetter => "neardup.dead-letter/v1",
        }
    }

    /// The short name used in file names and CLI flags, e.g. `pairs`, `dead-letter`.
    pub fn short_name(self) -> &'static str {
        &self.default_topic()["neardup.".len()..]
    }

    /// The JSON Schema file (under `schemas/json/`) that documents this kind.
    pub fn schema_file(self) -> String {
        format!("{}.v1.schema.json", self.default_topic())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spliced record equals the record of the sealed event serialized again.
    fn same_as_reserialized<E: OutputEvent + Clone + Serialize>(event: E) {
        let mut sealed = event.clone();
        sealed.seal();
        let expect = serde_json::to_vec(&sealed).expect("serializes");
        let (key, value) = event.to_record();
        assert_eq!(
            String::from_utf8_lossy(&value),
            String::from_utf8_lossy(&expect)
        );
        assert_eq!(key, sealed.key());
    }

    #[test]
    fn one_pass_records_equal_sealed_events() {
        // A URL that contains the very bytes the splice looks for, and escapes.
        let tricky = r#"http://a.example/"event_id":""/x?q="\u00e9""#.to_owned();
        same_as_reserialized(PairEvent::new(
            tricky.clone(),
            "http://b.example/é".into(),
            PairState::Detected,
            PairLevel::VerySimilar,
            3,
            370,
            Some(0.91),
            false,
            "2026-11-02T10:00:00Z".into(),
            Some("week-01".into()),
        ));
        same_as_reserialized(RecrawlEvent {
            schema: OutputKind::Recrawl.schema().into(),
            event_id: "stale id is replaced".into(),
            url: tricky,
            hint: RecrawlHint::Keep,
            canonical: None,
            cluster_id: "vs-1".into(),
            at: "2026-11-02T10:00:00Z".into(),
        });
    }
}
