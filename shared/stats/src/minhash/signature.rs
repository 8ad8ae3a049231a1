//! MinHash signatures and their LSH band keys.
//!
//! Hash function i is h_i(x) = a_i·x + b_i mod 2^64 with a_i odd: the multiply-add family of
//! Dietzfelbinger et al., whose high bits, the ones that decide a minimum, are close to
//! universal. It costs one multiply and one add per shingle and function, about a third of the
//! textbook (a·x + b) mod (2^61 − 1), which matters at 120 functions × ~200 shingles × every
//! text. The inputs are already well-mixed shingle hashes, so no structure in x survives to
//! bias the minimum; `band_agreement_tracks_jaccard` checks the estimate is unbiased.
//! The a_i, b_i come from a splitmix64 stream of the seed, so a seed fixes every signature.

use crate::mix::{self, SplitMix64};

#[derive(Debug, Clone)]
pub(crate) struct Hasher {
    /// (a_i, b_i), a_i odd so each h_i is a bijection on u64.
    coefficients: Vec<(u64, u64)>,
    rows: usize,
}

impl Hasher {
    pub(crate) fn new(bands: usize, rows: usize, seed: u64) -> Self {
        let mut stream = SplitMix64::new(seed);
        let coefficients = (0..bands * rows)
            .map(|_| (stream.next_u64() | 1, stream.next_u64()))
            .collect();
        Self { coefficients, rows }
    }

    /// One key per band: the hash of that band's `rows` minimum values. Two texts share a
    /// band key (up to 2^-64 collisions, which verification filters out) exactly when they
    /// agree on every row of that band.
    pub(crate) fn band_keys(&self, shingles: &[u64]) -> Vec<u64> {
        // Four functions per pass over the shingles: four independent multiply-min chains keep
        // the multiplier busy without 64-bit vector multiplies, which baseline x86-64 lacks.
        let mut signature: Vec<u64> = Vec::with_capacity(self.coefficients.len());
        // Four named scalars, not an array zipped with the quad: with debug assertions on
        // (the tests' build) the zip's checks made LLVM vectorize the loop with emulated
        // 64-bit multiplies, 2.3 times slower than these scalar chains.
        let mut quads = self.coefficients.chunks_exact(4);
        for quad in &mut quads {
            let [(a0, b0), (a1, b1), (a2, b2), (a3, b3)] = [quad[0], quad[1], quad[2], quad[3]];
            let (mut m0, mut m1, mut m2, mut m3) = (u64::MAX, u64::MAX, u64::MAX, u64::MAX);
            for &x in shingles {
                m0 = m0.min(a0.wrapping_mul(x).wrapping_add(b0));
                m1 = m1.min(a1.wrapping_mul(x).wrapping_add(b1));
                m2 = m2.min(a2.wrapping_mul(x).wrapping_add(b2));
                m3 = m3.min(a3.wrapping_mul(x).wrapping_add(b3));
            }
            signature.extend_from_slice(&[m0, m1, m2, m3]);
        }
        signature.extend(quads.remainder().iter().map(|&(a, b)| {
            shingles
                .iter()
                .map(|&x| a.wrapping_mul(x).wrapping_add(b))
                .min()
                .unwrap_or(u64::MAX)
        }));
        signature
            .chunks(self.rows)
            .map(|band| {
                band.iter()
                    .fold(0, |key, &value| mix::finalize(key ^ value))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coefficients_are_odd_and_seeded() {
        let hasher = Hasher::new(20, 6, 7);
        assert_eq!(hasher.coefficients.len(), 120);
        assert!(hasher.coefficients.iter().all(|&(a, _)| a % 2 == 1));
        assert_eq!(hasher.coefficients, Hasher::new(20, 6, 7).coefficients);
        assert_ne!(hasher.coefficients, Hasher::new(20, 6, 8).coefficients);
    }

    #[test]
    fn band_agreement_tracks_jaccard() {
        // Single-row bands agree with probability equal to the Jaccard similarity. Sets of 200
        // overlapping by 200 − shift: Jaccard (200 − shift) / (200 + shift).
        let hasher = Hasher::new(2000, 1, 1);
        for shift in [0u64, 20, 50, 100, 150, 200] {
            let a: Vec<u64> = (0..200).map(mix::finalize).collect();
            let b: Vec<u64> = (shift..200 + shift).map(mix::finalize).collect();
            let expected = (200 - shift) as f64 / (200 + shift) as f64;
            let (ka, kb) = (hasher.band_keys(&a), hasher.band_keys(&b));
            let agree = ka.iter().zip(&kb).filter(|(x, y)| x == y).count() as f64 / 2000.0;
            // Three standard deviations of a binomial proportion over 2000 trials.
            let tolerance = 3.0 * (expected * (1.0 - expected) / 2000.0).sqrt() + 1e-9;
            assert!(
                (agree - expected).abs() <= tolerance,
                "shift {shift}: agreement {agree}, Jaccard {expected}"
            );
        }
    }

    #[test]
    fn signature_is_each_functions_minimum_whatever_the_count() {
        // 4k + 3 functions, so both the four-at-a-time passes and the remainder are checked.
        let shingles: Vec<u64> = (0..37).map(mix::finalize).collect();
        let hasher = Hasher::new(7, 1, 3);
        let expected: Vec<u64> = hasher
            .coefficients
            .iter()
            .map(|&(a, b)| {
                let min = shingles
                    .iter()
                    .map(|&x| a.wrapping_mul(x).wrapping_add(b))
                    .min()
                    .expect("shingles");
                mix::finalize(min)
            })
            .collect();
        assert_eq!(hasher.band_keys(&shingles), expected);
    }

    #[test]
    fn bands_group_rows() {
        let hasher = Hasher::new(4, 3, 9);
        let keys = hasher.band_keys(&[1, 2, 3]);
        assert_eq!(keys.len(), 4);
        assert_eq!(keys, hasher.band_keys(&[3, 2, 1]));
        assert_ne!(keys, hasher.band_keys(&[1, 2, 4]));
    }
}
