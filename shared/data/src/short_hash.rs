//! The first eight bytes of blake3 for many short texts: a hash split's entity positions.
//!
//! A hash split hashes one id a row, and an id is a few bytes: one blake3 block, so the crate's
//! SIMD (which runs many *blocks of one input* side by side) never applies, and a single-block
//! compression was a tenth of shardify's time on narrow rows. Here eight texts of up to 64 bytes
//! are compressed side by side in AVX2 lanes, one lane per text. The function is blake3's, word
//! for word (the reference implementation's `compress` with the flags a one-block input gets),
//! so every position is the one `blake3::hash` gives; the tests compare them on every length.
//! Without AVX2, or for a longer text, `blake3::hash` itself is called.

/// The longest text hashed in a lane: one blake3 block.
const BLOCK: usize = 64;
const LANES: usize = 8;

/// blake3's initial chaining value (the SHA-256 IV).
const IV: [u32; 8] = [
    0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19,
];
/// CHUNK_START | CHUNK_END | ROOT: the flags of the one block of a input of at most 64 bytes.
const ONE_BLOCK_ROOT: u32 = 1 | 2 | 8;
/// The order each round reads the message words in: round r reads word `SCHEDULE[r][i]`
/// where the reference permutes the words between rounds.
const SCHEDULE: [[usize; 16]; 7] = schedule();

const fn schedule() -> [[usize; 16]; 7] {
    const PERMUTATION: [usize; 16] = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8];
    let mut rounds = [[0; 16]; 7];
    let mut i = 0;
    while i < 16 {
        rounds[0][i] = i;
        i += 1;
    }
    let mut round = 1;
    while round < 7 {
        let mut i = 0;
        while i < 16 {
            rounds[round][i] = rounds[round - 1][PERMUTATION[i]];
            i += 1;
        }
        round += 1;
    }
    rounds
}

/// The first eight bytes of a blake3 hash, as a little-endian number.
pub fn prefix_of(text: &[u8]) -> u64 {
    let hash = blake3::hash(text);
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash.as_bytes()[..8]);
    u64::from_le_bytes(first)
}

/// Collects texts and gives [`prefix_of`] of each, in the order pushed.
#[derive(Debug)]
pub struct ShortHashes {
    out: Vec<u64>,
    /// Message words by word then lane, as the lanes load them.
    words: [[u32; LANES]; 16],
    lengths: [u32; LANES],
    /// Words of each lane its last text wrote: the words past a text must be zero, and only
    /// those a longer text left are cleared (an id fills a few of the sixteen).
    written: [usize; LANES],
    /// Where each filled lane's prefix goes in `out`.
    slots: [usize; LANES],
    filled: usize,
    simd: bool,
}

impl ShortHashes {
    pub fn with_capacity(capacity: usize) -> ShortHashes {
        ShortHashes {
            out: Vec::with_capacity(capacity),
            words: [[0; LANES]; 16],
            lengths: [0; LANES],
            written: [0; LANES],
            slots: [0; LANES],
            filled: 0,
            simd: simd_available(),
        }
    }

    pub fn push(&mut self, text: &[u8]) {
        if !self.simd || text.len() > BLOCK {
            self.out.push(prefix_of(text));
            return;
        }
        let lane = self.filled;
        // Word by word from the text, the last one padded with zeros: copying the text into a
        // zeroed block first cost a call to memmove per id.
        let mut chunks = text.chunks_exact(4);
        let mut words = 0;
        for chunk in &mut chunks {
            self.words[words][lane] = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            words += 1;
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let last = rest
                .iter()
                .enumerate()
                .fold(0u32, |word, (i, &byte)| word | u32::from(byte) << (8 * i));
            self.words[words][lane] = last;
            words += 1;
        }
        for word in self.words[words..self.written[lane].max(words)].iter_mut() {
            word[lane] = 0;
        }
        self.written[lane] = words;
        self.lengths[lane] = text.len() as u32;
        self.slots[lane] = self.out.len();
        self.out.push(0);
        self.filled += 1;
        if self.filled == LANES {
            self.flush();
        }
    }

    /// Every pushed text's prefix, in order.
    pub fn finish(mut self) -> Vec<u64> {
        self.flush();
        self.out
    }

    fn flush(&mut self) {
        if self.filled == 0 {
            return;
        }
        let prefixes = compress_lanes(&self.words, &self.lengths);
        for (&slot, prefix) in self.slots[..self.filled].iter().zip(prefixes) {
            self.out[slot] = prefix;
        }
        self.filled = 0;
    }
}

fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Lanes left unfilled hold stale words; their prefixes are computed and dropped.
fn compress_lanes(words: &[[u32; LANES]; 16], lengths: &[u32; LANES]) -> [u64; LANES] {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `ShortHashes` fills lanes only where `simd_available` found AVX2.
        unsafe { avx2::compress(words, lengths) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (words, lengths);
        unreachable!("lanes are filled only where AVX2 was found")
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi32, _mm256_loadu_si256, _mm256_or_si256, _mm256_set1_epi32,
        _mm256_setr_epi8, _mm256_shuffle_epi8, _mm256_slli_epi32, _mm256_srli_epi32,
        _mm256_storeu_si256, _mm256_xor_si256,
    };

    use super::{IV, LANES, ONE_BLOCK_ROOT, SCHEDULE};

    #[inline]
    #[target_feature(enable = "avx2")]
    fn add(a: __m256i, b: __m256i) -> __m256i {
        _mm256_add_epi32(a, b)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn xor(a: __m256i, b: __m256i) -> __m256i {
        _mm256_xor_si256(a, b)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn splat(x: u32) -> __m256i {
        _mm256_set1_epi32(x as i32)
    }

    /// Rotations by 16 and 8 are byte shuffles; by 12 and 7, two shifts.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn rotate_16(x: __m256i) -> __m256i {
        let mask = _mm256_setr_epi8(
            2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11,
            8, 9, 14, 15, 12, 13,
        );
        _mm256_shuffle_epi8(x, mask)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn rotate_8(x: __m256i) -> __m256i {
        let mask = _mm256_setr_epi8(
            1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12, 1, 2, 3, 0, 5, 6, 7, 4, 9, 10,
            11, 8, 13, 14, 15, 12,
        );
        _mm256_shuffle_epi8(x, mask)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn rotate_12(x: __m256i) -> __m256i {
        _mm256_or_si256(_mm256_srli_epi32::<12>(x), _mm256_slli_epi32::<20>(x))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn rotate_7(x: __m256i) -> __m256i {
        _mm256_or_si256(_mm256_srli_epi32::<7>(x), _mm256_slli_epi32::<25>(x))
    }

    /// blake3's quarter-round on state words a, b, c, d with message words x, y.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn g(v: &mut [__m256i; 16], [a, b, c, d]: [usize; 4], x: __m256i, y: __m256i) {
        v[a] = add(add(v[a], v[b]), x);
        v[d] = rotate_16(xor(v[d], v[a]));
        v[c] = add(v[c], v[d]);
        v[b] = rotate_12(xor(v[b], v[c]));
        v[a] = add(add(v[a], v[b]), y);
        v[d] = rotate_8(xor(v[d], v[a]));
        v[c] = add(v[c], v[d]);
        v[b] = rotate_7(xor(v[b], v[c]));
    }

    /// blake3's compression of one root block per lane (chaining value IV, counter 0), cut
    /// to the output's first two words.
    #[target_feature(enable = "avx2")]
    pub fn compress(words: &[[u32; LANES]; 16], lengths: &[u32; LANES]) -> [u64; LANES] {
        let mut m = [splat(0); 16];
        for (vector, word) in m.iter_mut().zip(words) {
            // SAFETY: reads one [u32; 8], 32 bytes.
            *vector = unsafe { _mm256_loadu_si256(word.as_ptr().cast()) };
        }
        // SAFETY: as above.
        let lengths = unsafe { _mm256_loadu_si256(lengths.as_ptr().cast()) };
        let mut v = [
            splat(IV[0]),
            splat(IV[1]),
            splat(IV[2]),
            splat(IV[3]),
            splat(IV[4]),
            splat(IV[5]),
            splat(IV[6]),
            splat(IV[7]),
            splat(IV[0]),
            splat(IV[1]),
            splat(IV[2]),
            splat(IV[3]),
            splat(0),
            splat(0),
            lengths,
            splat(ONE_BLOCK_ROOT),
        ];
        for s in &SCHEDULE {
            g(&mut v, [0, 4, 8, 12], m[s[0]], m[s[1]]);
            g(&mut v, [1, 5, 9, 13], m[s[2]], m[s[3]]);
            g(&mut v, [2, 6, 10, 14], m[s[4]], m[s[5]]);
            g(&mut v, [3, 7, 11, 15], m[s[6]], m[s[7]]);
            g(&mut v, [0, 5, 10, 15], m[s[8]], m[s[9]]);
            g(&mut v, [1, 6, 11, 12], m[s[10]], m[s[11]]);
            g(&mut v, [2, 7, 8, 13], m[s[12]], m[s[13]]);
            g(&mut v, [3, 4, 9, 14], m[s[14]], m[s[15]]);
        }
        // The output's words 0 and 1 are v0 ^ v8 and v1 ^ v9.
        let mut low = [0u32; LANES];
        let mut high = [0u32; LANES];
        // SAFETY: each store writes one [u32; 8].
        unsafe {
            _mm256_storeu_si256(low.as_mut_ptr().cast(), xor(v[0], v[8]));
            _mm256_storeu_si256(high.as_mut_ptr().cast(), xor(v[1], v[9]));
        }
        let mut out = [0u64; LANES];
        for (lane, out) in out.iter_mut().enumerate() {
            *out = u64::from(low[lane]) | (u64::from(high[lane]) << 32);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(texts: &[Vec<u8>]) -> Vec<u64> {
        let mut hashes = ShortHashes::with_capacity(texts.len());
        for text in texts {
            hashes.push(text);
        }
        hashes.finish()
    }

    /// Every length from empty to past one block, in batches that fill the lanes and batches
    /// that do not, gives blake3's own first eight bytes.
    #[test]
    fn every_length_gives_what_blake3_gives() {
        let texts: Vec<Vec<u8>> = (0..=80)
            .flat_map(|length| {
                (0..3u8).map(move |salt| {
                    (0..length)
                        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt * 7 + 1))
                        .collect()
                })
            })
            .collect();
        for take in [1, 7, 8, 9, 17, texts.len()] {
            let expected: Vec<u64> = texts[..take].iter().map(|t| prefix_of(t)).collect();
            assert_eq!(all(&texts[..take]), expected, "{take} texts");
        }
        // Longest first, and long and short in turn: a lane's words past a shorter text must
        // not keep a longer one's bytes.
        let mut mixed: Vec<Vec<u8>> = texts.iter().rev().cloned().collect();
        mixed.extend(
            texts
                .iter()
                .zip(texts.iter().rev())
                .flat_map(|(a, b)| [a.clone(), b.clone()]),
        );
        let expected: Vec<u64> = mixed.iter().map(|t| prefix_of(t)).collect();
        assert_eq!(all(&mixed), expected);
    }

    #[test]
    fn integer_ids_as_text_give_what_blake3_gives() {
        let texts: Vec<Vec<u8>> = (-1000i64..5000)
            .chain([i64::MIN, i64::MAX])
            .map(|id| id.to_string().into_bytes())
            .collect();
        let expected: Vec<u64> = texts
            .iter()
            .map(|t| u64::from_le_bytes(blake3::hash(t).as_bytes()[..8].try_into().unwrap()))
            .collect();
        assert_eq!(all(&texts), expected);
    }

    #[test]
    fn the_schedule_is_the_reference_permutation_applied_per_round() {
        assert_eq!(SCHEDULE[0], std::array::from_fn(|i| i));
        assert_eq!(
            SCHEDULE[1],
            [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8]
        );
    }
}
