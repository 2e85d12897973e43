//! A tiny, stable pseudo-random generator (SplitMix64). The same seed gives
//! the same sequence on every platform and in every eddy version, which is
//! what makes the built-in generator's output reproducible byte for byte.

/// SplitMix64 state.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// Seeds the generator; `stream` separates the sequences of different streams.
    pub fn new(seed: u64, stream: u64) -> Self {
        Self(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform integer in `0..bound` (`bound` > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound.max(1)
    }
}

/// A stable hash of a number under a seed, for per-entity attributes.
pub fn hash_of(seed: u64, value: u64) -> u64 {
    SplitMix64::new(seed, value.wrapping_add(0x5EED)).next_u64()
}
