//! The first eight bytes of blake3 for many short texts: a hash split's entity positions.
//!
//! A hash split hashes one id a row, and an id is a few bytes: one blake3 block, so the crate's
//! SIMD (which runs many *blocks of one input* side by side) never applies, and a single-block
//! compression was a tenth of shardify's time on narrow rows. Here sixteen texts of up to 64
//! bytes are compressed side by side, one lane per text: in one AVX-512 vector, or in two AVX2
//! halves. The function is blake3's, word for word (the reference implementation's `compress`
//! with the flags a one-block input gets), so every position is the one `blake3::hash` gives;
//! the tests compare them on every length, on every path the machine has. Without AVX2, or for
//! a longer text, `blake3::hash` itself is called.

/// The longest text hashed in a lane: one blake3 block.
const BLOCK: usize = 64;
/// Texts compressed at once: an AVX-512 vector of 32-bit words (two of AVX2).
const LANES: usize = 16;

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
    simd: Option<Simd>,
}

/// The vectors the machine has.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Simd {
    Avx2,
    Avx512,
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
        if self.simd.is_none() || text.len() > BLOCK {
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
        let prefixes = compress_lanes(self.simd, &self.words, &self.lengths);
        for (&slot, prefix) in self.slots[..self.filled].iter().zip(prefixes) {
            self.out[slot] = prefix;
        }
        self.filled = 0;
    }
}

fn simd_available() -> Option<Simd> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            Some(Simd::Avx512)
        } else if std::arch::is_x86_feature_detected!("avx2") {
            Some(Simd::Avx2)
        } else {
            None
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// Lanes left unfilled hold stale words; their prefixes are computed and dropped.
fn compress_lanes(
    simd: Option<Simd>,
    words: &[[u32; LANES]; 16],
    lengths: &[u32; LANES],
) -> [u64; LANES] {
    let mut out = [0u64; LANES];
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `simd_available` found the features each path needs, and `ShortHashes` fills
    // lanes only where it found some.
    unsafe {
        match simd {
            Some(Simd::Avx512) => avx512::compress(words, lengths, 0, &mut out),
            Some(Simd::Avx2) => {
                avx2::compress(words, lengths, 0, &mut out);
                avx2::compress(words, lengths, 8, &mut out);
            }
            None => unreachable!("lanes are filled only where a vector unit was found"),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (simd, words, lengths);
        unreachable!("lanes are filled only where a vector unit was found")
    }
    out
}

/// blake3's quarter-round and one-block compression over the vectors of the module it is
/// expanded in, `$width` texts to a vector: that module gives `add`, `xor`, `splat`, `load`,
/// `store` and the four rotations, each with `$feature` enabled.
#[cfg(target_arch = "x86_64")]
macro_rules! lane_compression {
    ($vector:ty, $width:literal, $feature:literal) => {
        /// blake3's quarter-round on state words a, b, c, d with message words x, y.
        #[inline]
        #[target_feature(enable = $feature)]
        fn g(v: &mut [$vector; 16], [a, b, c, d]: [usize; 4], x: $vector, y: $vector) {
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
        /// to the output's first two words, for lanes `first..first + $width` into `out`.
        #[target_feature(enable = $feature)]
        pub fn compress(
            words: &[[u32; LANES]; 16],
            lengths: &[u32; LANES],
            first: usize,
            out: &mut [u64; LANES],
        ) {
            let lanes = first..first + $width;
            let mut m = [splat(0); 16];
            for (vector, word) in m.iter_mut().zip(words) {
                *vector = load(&word[lanes.clone()]);
            }
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
                load(&lengths[lanes.clone()]),
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
            let mut low = [0u32; $width];
            let mut high = [0u32; $width];
            store(&mut low, xor(v[0], v[8]));
            store(&mut high, xor(v[1], v[9]));
            for ((out, low), high) in out[lanes].iter_mut().zip(low).zip(high) {
                *out = u64::from(low) | (u64::from(high) << 32);
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi32, _mm256_loadu_si256, _mm256_or_si256, _mm256_set1_epi32,
        _mm256_setr_epi8, _mm256_shuffle_epi8, _mm256_slli_epi32, _mm256_srli_epi32,
        _mm256_storeu_si256, _mm256_xor_si256,
    };

    use super::{IV, LANES, ONE_BLOCK_ROOT, SCHEDULE};

    lane_compression!(__m256i, 8, "avx2");

    #[inline]
    #[target_feature(enable = "avx2")]
    fn load(words: &[u32]) -> __m256i {
        assert_eq!(words.len(), 8);
        // SAFETY: reads eight u32, the slice's length.
        unsafe { _mm256_loadu_si256(words.as_ptr().cast()) }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn store(words: &mut [u32; 8], vector: __m256i) {
        // SAFETY: writes eight u32, the array's length.
        unsafe { _mm256_storeu_si256(words.as_mut_ptr().cast(), vector) }
    }

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
}

/// AVX-512 rotates in one instruction, where AVX2 takes a shuffle or two shifts and an or.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::{
        __m512i, _mm512_add_epi32, _mm512_loadu_si512, _mm512_ror_epi32, _mm512_set1_epi32,
        _mm512_storeu_si512, _mm512_xor_si512,
    };

    use super::{IV, LANES, ONE_BLOCK_ROOT, SCHEDULE};

    lane_compression!(__m512i, 16, "avx512f");

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load(words: &[u32]) -> __m512i {
        assert_eq!(words.len(), 16);
        // SAFETY: reads sixteen u32, the slice's length.
        unsafe { _mm512_loadu_si512(words.as_ptr().cast()) }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn store(words: &mut [u32; 16], vector: __m512i) {
        // SAFETY: writes sixteen u32, the array's length.
        unsafe { _mm512_storeu_si512(words.as_mut_ptr().cast(), vector) }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn add(a: __m512i, b: __m512i) -> __m512i {
        _mm512_add_epi32(a, b)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn xor(a: __m512i, b: __m512i) -> __m512i {
        _mm512_xor_si512(a, b)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn splat(x: u32) -> __m512i {
        _mm512_set1_epi32(x as i32)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn rotate_16(x: __m512i) -> __m512i {
        _mm512_ror_epi32::<16>(x)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn rotate_12(x: __m512i) -> __m512i {
        _mm512_ror_epi32::<12>(x)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn rotate_8(x: __m512i) -> __m512i {
        _mm512_ror_epi32::<8>(x)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn rotate_7(x: __m512i) -> __m512i {
        _mm512_ror_epi32::<7>(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paths this machine can run: AVX2 where it has AVX-512 too.
    fn paths() -> Vec<Option<Simd>> {
        let mut paths = vec![None];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                paths.push(Some(Simd::Avx2));
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                paths.push(Some(Simd::Avx512));
            }
        }
        paths
    }

    /// Every text's prefix on every path the machine has, checked to agree.
    fn all(texts: &[Vec<u8>]) -> Vec<u64> {
        let mut results = paths().into_iter().map(|simd| {
            let mut hashes = ShortHashes::with_capacity(texts.len());
            hashes.simd = simd;
            for text in texts {
                hashes.push(text);
            }
            (simd, hashes.finish())
        });
        let (_, first) = results.next().unwrap();
        for (simd, other) in results {
            assert_eq!(other, first, "{simd:?}");
        }
        first
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
