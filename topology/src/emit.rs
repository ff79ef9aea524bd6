//! Collecting the records a stage outputs: already keyed and serialized, ready for any sink.

use neardup_schemas::{OutputEvent, OutputKind};

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
