//! Input mutation: seeded, so that a run is reproduced by its seed.
//!
//! In: seed inputs and a dictionary of tokens that matter to the target.
//! Out: mutated byte strings (bit flips, insertions, deletions, copies,
//! splices, dictionary tokens, deep nesting, long repeats).

use eddy_connectors::generator::rng::SplitMix64;

/// Deterministic pseudo-random numbers (the generator's SplitMix64).
pub struct Rng(SplitMix64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(SplitMix64::new(seed, 0))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Mutates inputs drawn from seeds.
pub struct Mutator {
    seeds: Vec<Vec<u8>>,
    dictionary: Vec<Vec<u8>>,
    /// Longest input produced.
    max_len: usize,
}

impl Mutator {
    /// A mutator over `seeds` (at least one) with `dictionary` tokens.
    pub fn new(seeds: Vec<Vec<u8>>, dictionary: &[&str], max_len: usize) -> Self {
        Self {
            seeds: if seeds.is_empty() {
                vec![Vec::new()]
            } else {
                seeds
            },
            dictionary: dictionary.iter().map(|t| t.as_bytes().to_vec()).collect(),
            max_len,
        }
    }

    /// A new input: a seed with 1 to 8 mutations.
    pub fn input(&self, rng: &mut Rng) -> Vec<u8> {
        let mut data = rng.pick(&self.seeds).clone();
        for _ in 0..1 + rng.below(8) {
            self.mutate(&mut data, rng);
        }
        data.truncate(self.max_len);
        data
    }

    fn mutate(&self, data: &mut Vec<u8>, rng: &mut Rng) {
        let at = rng.below(data.len() + 1);
        match rng.below(9) {
            0 if !data.is_empty() => {
                let i = rng.below(data.len());
                data[i] ^= 1 << rng.below(8);
            }
            1 => data.insert(at, rng.next_u64() as u8),
            2 if !data.is_empty() => {
                let len = 1 + rng.below(16.min(data.len() - at.min(data.len() - 1)));
                let start = at.min(data.len() - 1);
                data.drain(start..(start + len).min(data.len()));
            }
            3 if !data.is_empty() => {
                let start = rng.below(data.len());
                let len = 1 + rng.below((data.len() - start).min(64));
                let copy = data[start..start + len].to_vec();
                data.splice(at..at, copy);
            }
            4 | 5 => {
                let token = rng.pick(&self.dictionary).clone();
                data.splice(at..at, token);
            }
            6 => {
                // Deep nesting: many openers (and sometimes their closers).
                let depth = [10, 100, 1_000, 30_000][rng.below(4)];
                let open = *rng.pick(b"[{(");
                let close = match open {
                    b'[' => b']',
                    b'{' => b'}',
                    _ => b')',
                };
                let mut nest = vec![open; depth];
                if rng.below(2) == 0 {
                    nest.extend(std::iter::repeat_n(close, depth));
                }
                data.splice(at..at, nest);
            }
            7 => {
                // A long run of one byte (huge strings and numbers).
                let byte = *rng.pick(&[b'9', b'a', b' ', b'"', b'\\', 0xff]);
                let len = [100, 10_000, 200_000][rng.below(3)];
                data.splice(at..at, std::iter::repeat_n(byte, len));
            }
            _ => {
                let other = rng.pick(&self.seeds);
                if !other.is_empty() {
                    let start = rng.below(other.len());
                    let end = start + rng.below(other.len() - start + 1);
                    data.splice(at..at, other[start..end].iter().copied());
                }
            }
        }
    }
}
