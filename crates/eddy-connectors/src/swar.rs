//! Bytes eight at a time in a `u64` ("SIMD within a register"), for the
//! text scans of NDJSON decoding and tagged-line spacing.
//!
//! In: eight bytes as a little-endian word (the first byte lowest, so the
//! lowest flag is the earliest byte). Out: masks holding the high bit of
//! each byte that passes a test. Every mask is exact in every byte (no
//! carry crosses from one byte into the next), so all its flags can be
//! trusted, not only the lowest.

/// The high bit of every byte.
pub(crate) const HIGH: u64 = 0x8080_8080_8080_8080;
const ONES: u64 = 0x0101_0101_0101_0101;
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// The eight bytes of `bytes` at `at` as a word, when there are eight.
#[inline(always)]
pub(crate) fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let mut word = [0u8; 8];
    word.copy_from_slice(bytes.get(at..at + 8)?);
    Some(u64::from_le_bytes(word))
}

/// The high bit of each byte of `word` that equals `byte`.
#[inline(always)]
pub(crate) fn byte_mask(word: u64, byte: u8) -> u64 {
    let x = word ^ (ONES * u64::from(byte));
    !(((x & LOW7) + LOW7) | x | LOW7)
}

/// The high bit of each byte of `word` below `limit` (at most 0x80).
#[inline(always)]
pub(crate) fn below_mask(word: u64, limit: u8) -> u64 {
    debug_assert!(limit <= 0x80);
    // A byte's low seven bits plus 0x80 - limit reach the high bit exactly
    // when they are at least `limit`, and never carry out of the byte.
    !(((word & LOW7) + ONES * u64::from(0x80 - limit)) | word) & HIGH
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_flag_exactly_the_bytes_that_pass() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let interesting = [
            0x00, 0x1f, 0x20, 0x21, b'"', b'\\', b':', b',', 0x7f, 0x80, 0xff,
        ];
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Bytes near the tested values, so every boundary is crossed.
            let bytes: [u8; 8] = std::array::from_fn(|k| {
                let pick = (state >> (8 * k)) as u8;
                if pick.is_multiple_of(2) {
                    interesting[usize::from(pick / 2) % interesting.len()]
                } else {
                    pick
                }
            });
            let word = word_at(&bytes, 0).unwrap();
            let expect = |test: &dyn Fn(u8) -> bool| {
                bytes
                    .iter()
                    .enumerate()
                    .filter(|(_, &b)| test(b))
                    .fold(0u64, |mask, (k, _)| mask | 0x80 << (8 * k))
            };
            for byte in [b'"', b'\\', b':', 0x00, 0xff] {
                assert_eq!(byte_mask(word, byte), expect(&|b| b == byte), "{bytes:?}");
            }
            for limit in [0x00, 0x01, 0x20, 0x7f, 0x80] {
                assert_eq!(below_mask(word, limit), expect(&|b| b < limit), "{bytes:?}");
            }
        }
        assert_eq!(word_at(b"1234567", 0), None);
    }
}
