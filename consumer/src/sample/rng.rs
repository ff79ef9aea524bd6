//! Event times of the rounds, and the inline splitmix64 generator that drives every choice.

use super::WordList;

/// Seconds since the Unix epoch at the start of round `round` (1-based).
pub(super) fn round_start(round: u32) -> i64 {
    days_from_civil(2026, 11, 2) * 86_400 + 7 * 86_400 * (i64::from(round) - 1)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(super) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the Unix epoch (the topology's own formatter).
pub(super) fn rfc3339(secs: i64) -> String {
    neardup_topology::format_time(secs * 1000)
}

/// splitmix64: tiny, fast and fully specified, so the sample never depends on a crate's version.
#[derive(Debug, Clone)]
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub(super) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    pub(super) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub(super) fn word(&mut self, list: &WordList) -> &'static str {
        let words = list.words();
        words[self.below(words.len())]
    }

    pub(super) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// An independent seed for one purpose (`label`) and item (`n`) of the sample.
pub(super) fn sub_seed(seed: u64, label: &str, n: u64) -> u64 {
    // FNV-1a of the label, then splitmix rounds to spread seed, label and item over all bits.
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in label.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
    }
    let mut rng = Rng::new(seed ^ Rng::new(h ^ Rng::new(n).next_u64()).next_u64());
    rng.next_u64()
}
