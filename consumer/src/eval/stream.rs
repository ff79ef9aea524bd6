//! The pair stream (`pairs.jsonl`) replayed into the live pair set, round by round.

use super::{pair, Interner, Pair};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::BufRead;

/// A pair's clustering level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Byte-identical bodies.
    Exact,
    /// 6 of 6 supershingles agree.
    VirtuallyIdentical,
    /// At least the policy's threshold.
    VerySimilar,
}

impl Level {
    pub(super) const ALL: [Level; 3] =
        [Level::Exact, Level::VirtuallyIdentical, Level::VerySimilar];

    pub(super) fn name(self) -> &'static str {
        match self {
            Level::Exact => "exact",
            Level::VirtuallyIdentical => "virtually_identical",
            Level::VerySimilar => "very_similar",
        }
    }
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub(super) enum State {
    Detected,
    Retracted,
}

/// The fields of a pair event this evaluation reads; others are ignored.
#[derive(Deserialize)]
pub(super) struct PairLine<'a> {
    #[serde(default, borrow)]
    pub(super) schema: Option<Cow<'a, str>>,
    pub(super) state: State,
    #[serde(borrow)]
    pub(super) a: Cow<'a, str>,
    #[serde(borrow)]
    pub(super) b: Cow<'a, str>,
    pub(super) level: Level,
    #[serde(default)]
    pub(super) jaccard: Option<f64>,
    #[serde(default, borrow)]
    pub(super) at: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) crawl_id: Option<Cow<'a, str>>,
}

/// A live pair.
#[derive(Debug, Clone, Copy)]
pub(super) struct Live {
    pub(super) level: Level,
    pub(super) jaccard: Option<f32>,
}

/// Counts of the events read.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PairEvents {
    /// Non-blank lines.
    pub lines: u64,
    /// `detected` events.
    pub detected: u64,
    /// `retracted` events.
    pub retracted: u64,
    /// `detected` events for a pair already live.
    pub level_updates: u64,
    /// `retracted` events for a pair that was not live.
    pub retracted_not_live: u64,
}

/// The live pair set, fed one line at a time.
#[derive(Default)]
pub(super) struct LiveSet {
    pub(super) live: HashMap<Pair, Live>,
    pub(super) events: PairEvents,
}

impl LiveSet {
    /// Applies one parsed event.
    pub(super) fn apply(&mut self, ev: &PairLine<'_>, interner: &mut Interner) {
        let key = pair(interner.id(&ev.a), interner.id(&ev.b));
        self.events.lines += 1;
        match ev.state {
            State::Detected => {
                self.events.detected += 1;
                let value = Live {
                    level: ev.level,
                    jaccard: ev.jaccard.map(|j| j as f32),
                };
                if self.live.insert(key, value).is_some() {
                    self.events.level_updates += 1;
                }
            }
            State::Retracted => {
                self.events.retracted += 1;
                if self.live.remove(&key).is_none() {
                    self.events.retracted_not_live += 1;
                }
            }
        }
    }
}

/// Only the schema of an event, to say clearly that a line is not a pair event.
#[derive(Deserialize)]
pub(super) struct SchemaPeek<'a> {
    #[serde(default, borrow)]
    pub(super) schema: Option<Cow<'a, str>>,
}

pub(super) const PAIRS_SCHEMA: &str = "neardup.pairs/v1";

/// Parses one line of a pairs file.
pub(super) fn parse_pair(line: &[u8]) -> Result<PairLine<'_>> {
    let schema = |s: &str| format!("schema is {s:?}, not {PAIRS_SCHEMA:?}: is this a pairs file?");
    match serde_json::from_slice::<PairLine>(line) {
        Ok(ev) => match &ev.schema {
            Some(s) if s != PAIRS_SCHEMA => bail!(schema(s)),
            _ => Ok(ev),
        },
        Err(e) => match serde_json::from_slice::<SchemaPeek>(line) {
            Ok(SchemaPeek { schema: Some(s) }) if s != PAIRS_SCHEMA => bail!(schema(&s)),
            _ => Err(e.into()),
        },
    }
}

/// Calls `f` on every non-blank line of `reader`; stops at the first error, naming its line.
pub(super) fn each_line(
    mut reader: impl BufRead,
    mut f: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let mut buf = Vec::with_capacity(1 << 16);
    let mut line_no = 0u64;
    loop {
        buf.clear();
        if reader
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("reading after line {line_no}"))?
            == 0
        {
            return Ok(());
        }
        line_no += 1;
        let line = buf.trim_ascii();
        if !line.is_empty() {
            f(line).with_context(|| format!("line {line_no}"))?;
        }
    }
}
