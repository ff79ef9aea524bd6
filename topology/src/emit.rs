//! Collecting the records a stage outputs: already keyed and serialized, ready for any sink.

use neardup_schemas::{ChangeSinceLast, OutputEvent, OutputKind, SignatureEvent};

use crate::signed::ContentJson;

/// One output record: the topic kind, the record key and the JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emit {
    /// Which output topic.
    pub kind: OutputKind,
    /// The record key.
    pub key: String,
    /// The JSON value.
    pub value: Vec<u8>,
}

/// Where a stage writes its outputs while it handles one input, with that input's event time.
#[derive(Debug, Default)]
pub struct Emitter {
    at: String,
    records: Vec<Emit>,
}

impl Emitter {
    /// An empty emitter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a new input at event time `at` (RFC 3339), keeping earlier records.
    pub fn set_at(&mut self, at: &str) {
        self.at.clear();
        self.at.push_str(at);
    }

    /// The event time of the input being handled.
    pub fn at(&self) -> &str {
        &self.at
    }

    /// Seals and appends one event.
    pub fn emit<E: OutputEvent>(&mut self, event: E) {
        let (key, value) = event.to_record();
        self.records.push(Emit {
            kind: E::KIND,
            key,
            value,
        });
    }

    /// Seals and appends the signature event `event` with `content` as its `content` (the
    /// event's own is `None`): the record serializing the event with that content gives (a
    /// test holds the two equal), the content copied in as it is written, not parsed again.
    pub(crate) fn emit_signature(
        &mut self,
        mut event: SignatureEvent,
        content: Option<&ContentJson>,
    ) {
        debug_assert!(event.content.is_none(), "the content comes as JSON");
        event.event_id.clear();
        let change = event.change.take();
        let mut value = signature_json(&event, content, change.as_ref());
        // As `OutputEvent::to_record` does when the id cannot be spliced in (it always can:
        // the id comes second): written again with it.
        if let Err(id) = neardup_schemas::seal_json(&mut value) {
            event.event_id = id;
            value = signature_json(&event, content, change.as_ref());
        }
        self.records.push(Emit {
            kind: OutputKind::Signatures,
            key: event.url,
            value,
        });
    }

    /// Appends a record made already.
    pub(crate) fn push(&mut self, record: Emit) {
        self.records.push(record);
    }

    /// The records so far.
    pub fn records(&self) -> &[Emit] {
        &self.records
    }

    /// Takes the records out, leaving the emitter empty.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Emit> {
        self.records.drain(..)
    }
}

/// The JSON of the signature event `event` (its `content` and `change` `None`) with `content`
/// and `change`, which are its last fields, in that order: written after the others, in place
/// of the closing brace.
fn signature_json(
    event: &SignatureEvent,
    content: Option<&ContentJson>,
    change: Option<&ChangeSinceLast>,
) -> Vec<u8> {
    let mut value = Vec::with_capacity(512 + content.map_or(0, |c| c.get().len()));
    serde_json::to_writer(&mut value, event).expect("event serializes");
    debug_assert_eq!(value.last(), Some(&b'}'));
    value.pop();
    if let Some(c) = content {
        value.extend_from_slice(b",\"content\":");
        value.extend_from_slice(c.get().as_bytes());
    }
    if let Some(ch) = change {
        value.extend_from_slice(b",\"change\":");
        serde_json::to_writer(&mut value, ch).expect("event serializes");
    }
    value.push(b'}');
    value
}
