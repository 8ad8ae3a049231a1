//! Near-duplicate texts across groups (splits): MinHash with LSH banding finds candidate pairs,
//! exact Jaccard over the shingle sets decides.
//!
//! With b bands of r rows, two texts of Jaccard s become candidates with probability
//! 1 − (1 − s^r)^b. The default 20 × 6 puts the threshold near (1/20)^(1/6) ≈ 0.61 and finds
//! a pair at s = 0.8 with probability ≈ 0.998. Candidates are verified exactly, so LSH costs
//! recall only, never precision.

mod shingles;
mod signature;

use std::collections::HashMap;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

pub use shingles::{jaccard, normalize_text, shingle_hashes};
use signature::Hasher;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinHashParams {
    pub bands: usize,
    pub rows: usize,
    /// Characters per shingle.
    pub shingle_chars: usize,
    pub seed: u64,
    /// A bucket whose texts would form more cross-group pairs than this is skipped and counted
    /// in `skipped_buckets`: boilerplate shared by thousands of rows would otherwise make the
    /// search quadratic. Its pairs are still found through any other band they share.
    pub max_bucket_pairs: usize,
}

impl Default for MinHashParams {
    fn default() -> Self {
        Self {
            bands: 20,
            rows: 6,
            shingle_chars: 5,
            seed: 0x6e65_6172_5f64_7570,
            max_bucket_pairs: 250_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MinHashError {
    #[error("MinHash parameter {0} must be at least 1")]
    Zero(&'static str),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NearDuplicate {
    pub group_a: u16,
    pub id_a: u64,
    pub group_b: u16,
    pub id_b: u64,
    pub jaccard: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NearDuplicates {
    /// Sorted by (group_a, id_a, group_b, id_b), with (group_a, id_a) < (group_b, id_b).
    pub pairs: Vec<NearDuplicate>,
    /// Distinct cross-group candidate pairs whose Jaccard was computed.
    pub candidates: usize,
    /// (band, bucket) cells skipped for exceeding `max_bucket_pairs`.
    pub skipped_buckets: usize,
}

/// The texts of every group, borrowed, with their band keys: 8 bytes per band plus 26 per
/// text (see `stored_bytes`).
///
/// The shingle sets that verification needs are not kept: at ~8 bytes per distinct shingle
/// they were about 7× the text itself and most of leak-check's peak memory, yet only the few
/// texts that land in a candidate pair are ever verified. Those are shingled again from the
/// borrowed text, with the same hash, so every Jaccard value is bit-identical to keeping them.
#[derive(Debug, Clone)]
pub struct NearDuplicateIndex<'t> {
    params: MinHashParams,
    hasher: Hasher,
    groups: Vec<u16>,
    ids: Vec<u64>,
    texts: Vec<&'t str>,
    /// Text i's band keys are band_keys[i * bands..(i + 1) * bands].
    band_keys: Vec<u64>,
    empty_texts: u64,
}

impl<'t> NearDuplicateIndex<'t> {
    pub fn new(params: MinHashParams) -> Result<Self, MinHashError> {
        for (name, value) in [
            ("bands", params.bands),
            ("rows", params.rows),
            ("shingle_chars", params.shingle_chars),
            ("max_bucket_pairs", params.max_bucket_pairs),
        ] {
            if value == 0 {
                return Err(MinHashError::Zero(name));
            }
        }
        Ok(Self {
            params,
            hasher: Hasher::new(params.bands, params.rows, params.seed),
            groups: Vec::new(),
            ids: Vec::new(),
            texts: Vec::new(),
            band_keys: Vec::new(),
            empty_texts: 0,
        })
    }

    pub fn params(&self) -> &MinHashParams {
        &self.params
    }

    /// Adds one text. A text that is empty after normalization has nothing to compare and is
    /// only counted (see `empty_texts`).
    pub fn add(&mut self, group: u16, id: u64, text: &'t str) {
        let band_keys = self.sketch(text);
        self.push(group, id, text, band_keys);
    }

    /// Adds many texts of one group, shingling and hashing them in parallel; the result is the
    /// same as adding them one by one in order.
    pub fn add_batch(&mut self, group: u16, texts: &[(u64, &'t str)]) {
        // In chunks, so the sketches waiting to be pushed never double the index's memory.
        const CHUNK: usize = 8192;
        for chunk in texts.chunks(CHUNK) {
            let sketched: Vec<Option<Vec<u64>>> = chunk
                .par_iter()
                .map(|(_, text)| self.sketch(text))
                .collect();
            for ((id, text), band_keys) in chunk.iter().zip(sketched) {
                self.push(group, *id, text, band_keys);
            }
        }
    }

    /// Texts indexed, not counting empty ones.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn empty_texts(&self) -> u64 {
        self.empty_texts
    }

    /// Bytes the index holds for its texts (by length, not capacity): a reference to the
    /// text, group, id and `bands` band keys per text.
    pub fn stored_bytes(&self) -> usize {
        use std::mem::size_of;
        self.texts.len() * size_of::<&str>()
            + self.groups.len() * size_of::<u16>()
            + self.ids.len() * size_of::<u64>()
            + self.band_keys.len() * size_of::<u64>()
    }

    /// The band keys of a text, or None when it has no shingles.
    fn sketch(&self, text: &str) -> Option<Vec<u64>> {
        let shingles = self.shingles(text);
        (!shingles.is_empty()).then(|| self.hasher.band_keys(&shingles))
    }

    fn shingles(&self, text: &str) -> Vec<u64> {
        shingle_hashes(&normalize_text(text), self.params.shingle_chars)
    }

    fn push(&mut self, group: u16, id: u64, text: &'t str, band_keys: Option<Vec<u64>>) {
        let Some(band_keys) = band_keys else {
            self.empty_texts += 1;
            return;
        };
        self.groups.push(group);
        self.ids.push(id);
        self.texts.push(text);
        self.band_keys.extend_from_slice(&band_keys);
    }

    /// The shingle sets of the texts in `candidates`, shingled again from the borrowed text:
    /// (text, shingles) sorted by text.
    fn candidate_shingles(&self, candidates: &[(usize, usize)]) -> Vec<(usize, Vec<u64>)> {
        let mut texts: Vec<usize> = candidates.iter().flat_map(|&(x, y)| [x, y]).collect();
        texts.par_sort_unstable();
        texts.dedup();
        texts
            .into_par_iter()
            .map(|text| (text, self.shingles(self.texts[text])))
            .collect()
    }

    /// Pairs of texts from different groups whose shingle sets have Jaccard ≥ `threshold`
    /// (exact duplicates included), among those sharing a band bucket. Pairs within one group
    /// are never reported. Same input, same output, regardless of thread count.
    pub fn cross_group_pairs(&self, threshold: f64) -> NearDuplicates {
        let per_band: Vec<(Vec<(usize, usize)>, usize)> = (0..self.params.bands)
            .into_par_iter()
            .map(|band| self.band_candidates(band))
            .collect();
        let skipped_buckets = per_band.iter().map(|(_, skipped)| skipped).sum();
        let mut candidates: Vec<(usize, usize)> =
            per_band.into_iter().flat_map(|(pairs, _)| pairs).collect();
        candidates.par_sort_unstable();
        candidates.dedup();

        let shingled = self.candidate_shingles(&candidates);
        let shingles_of = |text: usize| -> &[u64] {
            let at = shingled
                .binary_search_by_key(&text, |(t, _)| *t)
                .expect("every candidate text was shingled");
            &shingled[at].1
        };
        let mut pairs: Vec<NearDuplicate> = candidates
            .par_iter()
            .filter_map(|&(x, y)| {
                let (a, b) = (shingles_of(x), shingles_of(y));
                // Jaccard ≤ min/max of the set sizes: skip the merge when that already fails.
                if (a.len().min(b.len()) as f64) < threshold * a.len().max(b.len()) as f64 {
                    return None;
                }
                let similarity = jaccard(a, b);
                (similarity >= threshold).then(|| self.oriented(x, y, similarity))
            })
            .collect();
        // Stable, after candidates sorted by index: repeated (group, id) keys keep one order.
        pairs.sort_by_key(|p| (p.group_a, p.id_a, p.group_b, p.id_b));
        NearDuplicates {
            pairs,
            candidates: candidates.len(),
            skipped_buckets,
        }
    }

    /// Cross-group pairs (lower index first) sharing a bucket in `band`, and the number of
    /// buckets skipped as too large.
    fn band_candidates(&self, band: usize) -> (Vec<(usize, usize)>, usize) {
        let bands = self.params.bands;
        let mut keyed: Vec<(u64, usize)> = (0..self.len())
            .map(|text| (self.band_keys[text * bands + band], text))
            .collect();
        keyed.sort_unstable();
        let mut candidates = Vec::new();
        let mut skipped = 0;
        for bucket in keyed.chunk_by(|x, y| x.0 == y.0) {
            if bucket.len() < 2 {
                continue;
            }
            let cross = self.cross_group_pair_count(bucket);
            if cross > self.params.max_bucket_pairs {
                skipped += 1;
                continue;
            }
            for (i, &(_, x)) in bucket.iter().enumerate() {
                for &(_, y) in &bucket[i + 1..] {
                    if self.groups[x] != self.groups[y] {
                        candidates.push((x, y));
                    }
                }
            }
        }
        (candidates, skipped)
    }

    /// (n² − Σ n_g²) / 2 for a bucket of n texts with n_g in group g.
    fn cross_group_pair_count(&self, bucket: &[(u64, usize)]) -> usize {
        let mut per_group: HashMap<u16, usize> = HashMap::new();
        for &(_, text) in bucket {
            *per_group.entry(self.groups[text]).or_insert(0) += 1;
        }
        let n = bucket.len();
        let same: usize = per_group.values().map(|c| c * c).sum();
        (n * n - same) / 2
    }

    fn oriented(&self, x: usize, y: usize, jaccard: f64) -> NearDuplicate {
        let (first, second) = if (self.groups[x], self.ids[x]) <= (self.groups[y], self.ids[y]) {
            (x, y)
        } else {
            (y, x)
        };
        NearDuplicate {
            group_a: self.groups[first],
            id_a: self.ids[first],
            group_b: self.groups[second],
            id_b: self.ids[second],
            jaccard,
        }
    }
}

#[cfg(test)]
mod tests;
