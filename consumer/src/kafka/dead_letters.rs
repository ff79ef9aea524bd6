//! The dead-letter policy: a run whose recent inputs are mostly dead letters stops instead of
//! routing everything to the dead-letter topic (a deployment of bad code must not lose the input
//! silently).

use anyhow::{bail, Result};

/// Stops a run whose recent input goes mostly to the dead-letter topic: that is a broken
/// deployment (a schema change, a bug) far more often than a broken crawler, and routing
/// everything to the dead letters while committing would empty the input silently.
#[derive(Debug)]
pub struct DeadLetterGuard {
    pub(super) max_ratio: f64,
    pub(super) window: std::collections::VecDeque<bool>,
    pub(super) size: usize,
    pub(super) dead: usize,
}

impl DeadLetterGuard {
    /// At most `max_ratio` of the latest `size` records may be dead letters (1 disables).
    pub fn new(max_ratio: f64, size: usize) -> Self {
        DeadLetterGuard {
            max_ratio,
            window: std::collections::VecDeque::with_capacity(size),
            size: size.max(1),
            dead: 0,
        }
    }

    /// Records whether the latest record was a dead letter; an error when more than
    /// `max_ratio × size` of the latest `size` records were.
    pub fn record(&mut self, dead: bool) -> Result<()> {
        if self.max_ratio >= 1.0 {
            return Ok(());
        }
        self.window.push_back(dead);
        self.dead += usize::from(dead);
        if self.window.len() > self.size && self.window.pop_front() == Some(true) {
            self.dead -= 1;
        }
        let share = self.dead as f64 / self.size as f64;
        if share > self.max_ratio {
            bail!(
                "{} of the last {} records went to the dead-letter topic, more than \
                 max_dead_letter_ratio = {}: stopping rather than dead-lettering the input \
                 (check the dead-letter topic's reasons; raise the ratio, or set it to 1, if \
                 this input really is that bad)",
                self.dead,
                self.size,
                self.max_ratio
            );
        }
        Ok(())
    }
}
