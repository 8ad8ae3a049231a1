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
use std::sync::atomic::{AtomicUsize, Ordering};

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
    /// Candidate pairs gathered at most (16 bytes each, counted in every band that finds them).
    /// Past it the buckets with the most pairs are skipped first, by a lower bucket cap for all
    /// bands: a column of templated notes can otherwise make billions of pairs out of buckets of
    /// a few hundred texts each, and run the machine out of memory.
    pub max_candidates: usize,
    /// Text bytes shingled at once to verify candidates: the candidates are verified in runs
    /// whose texts add up to about this, each text shingled again in each run it is in (about 8
    /// bytes of shingles a character), so verification never holds every text's shingles.
    pub verify_text_bytes: usize,
}

impl Default for MinHashParams {
    fn default() -> Self {
        Self {
            bands: 20,
            rows: 6,
            shingle_chars: 5,
            seed: 0x6e65_6172_5f64_7570,
            max_bucket_pairs: 250_000,
            max_candidates: 1 << 25,
            verify_text_bytes: 32 << 20,
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
            ("max_candidates", params.max_candidates),
            ("verify_text_bytes", params.verify_text_bytes),
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
        // One pass gathers the candidates while they stay within `max_candidates`; past it, a
        // second pass gathers them with the bucket cap the first pass's bucket sizes give.
        let gathered = AtomicUsize::new(0);
        let cap = self.params.max_bucket_pairs;
        let first: Vec<BandPass> = (0..self.params.bands)
            .into_par_iter()
            .map(|band| self.band_candidates(band, cap, Some(&gathered)))
            .collect();
        let per_band: Vec<BandPass> = if first.iter().all(|pass| pass.candidates.is_some()) {
            first
        } else {
            let cap = self.bucket_cap(first.into_iter().map(|pass| pass.sizes));
            (0..self.params.bands)
                .into_par_iter()
                .map(|band| self.band_candidates(band, cap, None))
                .collect()
        };
        let skipped_buckets = per_band.iter().map(|pass| pass.skipped).sum();
        let mut candidates: Vec<(usize, usize)> = per_band
            .into_iter()
            .flat_map(|pass| pass.candidates.unwrap_or_default())
            .collect();
        candidates.par_sort_unstable();
        candidates.dedup();

        let mut pairs = Vec::new();
        let mut start = 0;
        while start < candidates.len() {
            let end = start + self.verification_run(&candidates[start..]);
            pairs.extend(self.verified(&candidates[start..end], threshold));
            start = end;
        }
        // Stable, after candidates sorted by index: repeated (group, id) keys keep one order.
        pairs.sort_by_key(|p| (p.group_a, p.id_a, p.group_b, p.id_b));
        NearDuplicates {
            pairs,
            candidates: candidates.len(),
            skipped_buckets,
        }
    }

    /// How many of `candidates` (sorted) to verify together: pairs until their texts reach
    /// `verify_text_bytes` (a run of one lower text counted once), at least one.
    fn verification_run(&self, candidates: &[(usize, usize)]) -> usize {
        let mut bytes = 0;
        let mut last = None;
        for (taken, &(x, y)) in candidates.iter().enumerate() {
            if taken > 0 && bytes >= self.params.verify_text_bytes {
                return taken;
            }
            if last != Some(x) {
                bytes += self.texts[x].len();
                last = Some(x);
            }
            bytes += self.texts[y].len();
        }
        candidates.len()
    }

    /// The pairs of `candidates` at Jaccard ≥ `threshold`.
    fn verified(&self, candidates: &[(usize, usize)], threshold: f64) -> Vec<NearDuplicate> {
        let shingled = self.candidate_shingles(candidates);
        let shingles_of = |text: usize| -> &[u64] {
            let at = shingled
                .binary_search_by_key(&text, |(t, _)| *t)
                .expect("every candidate text was shingled");
            &shingled[at].1
        };
        candidates
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
            .collect()
    }

    fn bucket_cap(&self, bands: impl Iterator<Item = HashMap<usize, usize>>) -> usize {
        let mut all: HashMap<usize, usize> = HashMap::new();
        for band in bands {
            for (pairs, buckets) in band {
                *all.entry(pairs).or_insert(0) += buckets;
            }
        }
        bucket_cap(&self.params, all)
    }

    /// Cross-group pairs (lower index first) sharing a bucket in `band`, of buckets with at most
    /// `cap` of them. With `gathered` (the pairs every band has gathered so far), the pairs are
    /// dropped, and only the bucket sizes kept, once that passes `max_candidates`.
    fn band_candidates(&self, band: usize, cap: usize, gathered: Option<&AtomicUsize>) -> BandPass {
        let bands = self.params.bands;
        let mut keyed: Vec<(u64, usize)> = (0..self.len())
            .map(|text| (self.band_keys[text * bands + band], text))
            .collect();
        keyed.sort_unstable();
        let mut pass = BandPass {
            candidates: Some(Vec::new()),
            skipped: 0,
            sizes: HashMap::new(),
        };
        for bucket in keyed.chunk_by(|x, y| x.0 == y.0) {
            if bucket.len() < 2 {
                continue;
            }
            let cross = self.cross_group_pair_count(bucket);
            if cross > cap {
                pass.skipped += 1;
                continue;
            }
            if cross == 0 {
                continue;
            }
            *pass.sizes.entry(cross).or_insert(0) += 1;
            if let Some(gathered) = gathered
                && gathered.fetch_add(cross, Ordering::Relaxed) + cross > self.params.max_candidates
            {
                pass.candidates = None;
            }
            let Some(candidates) = pass.candidates.as_mut() else {
                continue;
            };
            for (i, &(_, x)) in bucket.iter().enumerate() {
                for &(_, y) in &bucket[i + 1..] {
                    if self.groups[x] != self.groups[y] {
                        candidates.push((x, y));
                    }
                }
            }
        }
        pass
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

/// The most cross-group pairs a bucket may have and still be searched, given how many buckets
/// of each size (cross-group pairs, within `max_bucket_pairs`) all bands have:
/// `max_bucket_pairs`, or less, so that the searched buckets give at most `max_candidates`
/// pairs in all (the buckets with the most pairs go first; buckets of one size go together).
pub fn bucket_cap(params: &MinHashParams, sizes: HashMap<usize, usize>) -> usize {
    let mut sizes: Vec<(usize, usize)> = sizes.into_iter().collect();
    sizes.sort_unstable();
    let mut total = 0usize;
    let mut fits = 0;
    for (pairs, buckets) in sizes {
        total = total.saturating_add(pairs.saturating_mul(buckets));
        if total > params.max_candidates {
            return fits;
        }
        fits = pairs;
    }
    params.max_bucket_pairs
}

/// A text's band keys and shingles as the index computes them, for a search that keeps its
/// index elsewhere (on disk, sorted by band key): the same keys give the same buckets, the
/// same shingles the same Jaccard values, bit for bit.
#[derive(Debug, Clone)]
pub struct Sketcher {
    params: MinHashParams,
    hasher: Hasher,
}

impl Sketcher {
    pub fn new(params: MinHashParams) -> Result<Sketcher, MinHashError> {
        let index = NearDuplicateIndex::new(params)?;
        Ok(Sketcher {
            params,
            hasher: index.hasher,
        })
    }

    pub fn params(&self) -> &MinHashParams {
        &self.params
    }

    /// The band keys of a text, or None when it has no shingles (it is then only counted).
    pub fn band_keys(&self, text: &str) -> Option<Vec<u64>> {
        let shingles = self.shingles(text);
        (!shingles.is_empty()).then(|| self.hasher.band_keys(&shingles))
    }

    pub fn shingles(&self, text: &str) -> Vec<u64> {
        shingle_hashes(&normalize_text(text), self.params.shingle_chars)
    }
}

/// One band's search: its candidate pairs (none once the bands together gathered too many),
/// the buckets skipped as too large, and how many buckets of each size (pairs) it searched.
struct BandPass {
    candidates: Option<Vec<(usize, usize)>>,
    skipped: usize,
    sizes: HashMap<usize, usize>,
}

#[cfg(test)]
mod tests;
