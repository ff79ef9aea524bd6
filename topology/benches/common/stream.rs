//! A synthetic stream of page sketches with realistic structure, shared by the index benchmark
//! (`benches/index.rs`) and the figures script (`examples/index_bench.rs`).
//!
//! 2,000 sites; a third have no template, a third a light one (30 % of min-values come from the
//! site's template), a third a heavy one (90 %, like record databases); 25 % of pages are
//! copies of one of the last 10,000 pages with 5 % of min-values and a simhash bit changed.

#![allow(dead_code)]

use neardup_topology::near::Sketch;

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

pub const SITES: usize = 2000;

pub struct Stream {
    rng: Rng,
    templates: Vec<([u8; 84], u64)>,
    recent: Vec<Sketch>,
    n: u64,
}

impl Stream {
    pub fn new(seed: u64) -> Self {
        let mut rng = Rng(seed);
        let templates = (0..SITES)
            .map(|s| {
                let mut t = [0u8; 84];
                for v in t.iter_mut() {
                    *v = rng.next() as u8;
                }
                let share = [0u64, 30, 90][s % 3];
                (t, share)
            })
            .collect();
        Stream {
            rng,
            templates,
            recent: Vec::new(),
            n: 0,
        }
    }

    /// The next (site, sketch), on a random site.
    pub fn next(&mut self) -> (usize, Sketch) {
        let site = self.rng.below(SITES as u64) as usize;
        (site, self.next_on(site))
    }

    /// The next sketch of a page on `site` (a copy of a recent page, of any site, a quarter of
    /// the time).
    pub fn next_on(&mut self, site: usize) -> Sketch {
        self.n += 1;
        let sketch = if !self.recent.is_empty() && self.rng.below(4) == 0 {
            let i = self.rng.below(self.recent.len() as u64) as usize;
            let mut s = self.recent[i].clone();
            for _ in 0..4 {
                let p = self.rng.below(84) as usize;
                s.mins[p] = self.rng.next() as u8;
            }
            s.simhash[0] ^= 1 << self.rng.below(64);
            s.checksum = self.rng.next();
            s.text = self.rng.next();
            s
        } else {
            let (template, share) = self.templates[site];
            let mut mins = [0u8; 84];
            for (i, m) in mins.iter_mut().enumerate() {
                *m = if self.rng.below(100) < share {
                    template[i]
                } else {
                    self.rng.next() as u8
                };
            }
            let mut simhash = [0u64; 6];
            for w in simhash.iter_mut() {
                *w = self.rng.next();
            }
            Sketch {
                mins,
                ss: [
                    self.rng.next() as u16,
                    self.rng.next() as u16,
                    self.rng.next() as u16,
                    self.rng.next() as u16,
                    self.rng.next() as u16,
                    self.rng.next() as u16,
                ],
                simhash,
                checksum: self.rng.next(),
                text: self.rng.next(),
                title: 0,
                has_terms: true,
            }
        };
        if self.recent.len() < 10_000 {
            self.recent.push(sketch.clone());
        } else {
            let i = (self.n % 10_000) as usize;
            self.recent[i] = sketch.clone();
        }
        sketch
    }
}
