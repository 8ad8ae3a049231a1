use std::collections::BTreeSet;
use std::time::Instant;

use super::*;
use crate::mix::SplitMix64;

fn vocabulary(rng: &mut SplitMix64, size: usize) -> Vec<String> {
    (0..size)
        .map(|_| {
            let len = 3 + (rng.next_u64() % 6) as usize;
            (0..len)
                .map(|_| char::from(b'a' + (rng.next_u64() % 26) as u8))
                .collect()
        })
        .collect()
}

fn document(rng: &mut SplitMix64, vocabulary: &[String]) -> Vec<String> {
    (0..30)
        .map(|_| vocabulary[rng.next_u64() as usize % vocabulary.len()].clone())
        .collect()
}

/// The document with `edits` words replaced at random positions.
fn edited(rng: &mut SplitMix64, words: &[String], vocabulary: &[String], edits: usize) -> String {
    let mut words = words.to_vec();
    for _ in 0..edits {
        let at = rng.next_u64() as usize % words.len();
        words[at] = vocabulary[rng.next_u64() as usize % vocabulary.len()].clone();
    }
    words.join(" ")
}

/// Jaccard over the 5-character strings themselves, with no hashing: the reference.
fn reference_jaccard(a: &str, b: &str) -> f64 {
    let windows = |text: &str| -> BTreeSet<String> {
        let chars: Vec<char> = normalize_text(text).chars().collect();
        if chars.len() <= 5 {
            return std::iter::once(chars.iter().collect()).collect();
        }
        chars.windows(5).map(|w| w.iter().collect()).collect()
    };
    let (a, b) = (windows(a), windows(b));
    a.intersection(&b).count() as f64 / a.union(&b).count() as f64
}

fn as_refs(rows: &[(u64, String)]) -> Vec<(u64, &str)> {
    rows.iter().map(|(id, text)| (*id, text.as_str())).collect()
}

fn index() -> NearDuplicateIndex<'static> {
    NearDuplicateIndex::new(MinHashParams::default()).expect("valid defaults")
}

/// Group 0 holds 2000 random texts; group 1 holds edited copies of the first 600 (0 to 3 words
/// replaced, id 10_000 + i) and 1000 unrelated texts.
struct Planted {
    train: Vec<String>,
    test: Vec<(u64, String)>,
}

fn planted() -> Planted {
    let mut rng = SplitMix64::new(11);
    let vocabulary = vocabulary(&mut rng, 5000);
    let train_words: Vec<Vec<String>> =
        (0..2000).map(|_| document(&mut rng, &vocabulary)).collect();
    let mut test: Vec<(u64, String)> = (0..600)
        .map(|i| {
            let text = edited(&mut rng, &train_words[i], &vocabulary, i % 4);
            (10_000 + i as u64, text)
        })
        .collect();
    test.extend((0..1000).map(|i| (20_000 + i, document(&mut rng, &vocabulary).join(" "))));
    Planted {
        train: train_words.iter().map(|w| w.join(" ")).collect(),
        test,
    }
}

fn indexed(planted: &Planted) -> NearDuplicateIndex<'_> {
    let mut index = index();
    for (id, text) in planted.train.iter().enumerate() {
        index.add(0, id as u64, text);
    }
    index.add_batch(1, &as_refs(&planted.test));
    index
}

#[test]
fn finds_planted_near_duplicates_and_nothing_below_threshold() {
    let planted = planted();
    let found = indexed(&planted).cross_group_pairs(0.8);
    let reported: BTreeSet<(u64, u64)> = found.pairs.iter().map(|p| (p.id_a, p.id_b)).collect();

    let truth: Vec<(u64, u64)> = (0..600u64)
        .filter(|&i| {
            reference_jaccard(&planted.train[i as usize], &planted.test[i as usize].1) >= 0.8
        })
        .map(|i| (i, 10_000 + i))
        .collect();
    assert!(
        truth.len() > 300,
        "the planted set must have pairs above 0.8: {}",
        truth.len()
    );
    let recalled = truth.iter().filter(|pair| reported.contains(pair)).count();
    assert!(
        recalled as f64 >= 0.95 * truth.len() as f64,
        "recall {recalled}/{}",
        truth.len()
    );

    for pair in &found.pairs {
        assert_eq!((pair.group_a, pair.group_b), (0, 1));
        let test_text = &planted
            .test
            .iter()
            .find(|(id, _)| *id == pair.id_b)
            .expect("test id")
            .1;
        let expected = reference_jaccard(&planted.train[pair.id_a as usize], test_text);
        assert!(expected >= 0.8, "{pair:?} has reference Jaccard {expected}");
        assert!(
            (pair.jaccard - expected).abs() < 1e-12,
            "{pair:?} vs {expected}"
        );
    }
    // Edits of three words land on both sides of 0.8, so the threshold really filters.
    let below = (0..600)
        .filter(|&i| reference_jaccard(&planted.train[i], &planted.test[i].1) < 0.8)
        .count();
    assert!(below > 50, "only {below} planted pairs below 0.8");
}

/// Every cross-group pair at Jaccard ≥ `threshold` by brute force over the shingle sets the
/// index used to store, with their Jaccard values.
fn brute_force_pairs(planted: &Planted, threshold: f64) -> Vec<(u64, u64, f64)> {
    let shingles = |text: &str| shingle_hashes(&normalize_text(text), 5);
    let train: Vec<Vec<u64>> = planted.train.iter().map(|t| shingles(t)).collect();
    let test: Vec<(u64, Vec<u64>)> = planted
        .test
        .iter()
        .map(|(id, t)| (*id, shingles(t)))
        .collect();
    let mut pairs = Vec::new();
    for (a, train) in train.iter().enumerate() {
        for (b, test) in &test {
            let similarity = jaccard(train, test);
            if similarity >= threshold {
                pairs.push((a as u64, *b, similarity));
            }
        }
    }
    pairs
}

#[test]
fn verification_from_stored_text_gives_the_shingle_set_pairs_and_values() {
    let planted = planted();
    let found = indexed(&planted).cross_group_pairs(0.8);
    let reported: Vec<(u64, u64, f64)> = found
        .pairs
        .iter()
        .map(|p| (p.id_a, p.id_b, p.jaccard))
        .collect();
    let expected = brute_force_pairs(&planted, 0.8);
    assert!(expected.len() > 300, "{} pairs", expected.len());
    // Bit-identical Jaccard values: the shingles are recomputed with the same hash.
    assert_eq!(reported, expected);
}

#[test]
fn stored_bytes_are_band_keys_not_shingle_sets() {
    let planted = planted();
    let index = indexed(&planted);
    let texts = planted
        .train
        .iter()
        .chain(planted.test.iter().map(|(_, t)| t));
    let shingle_count: usize = texts
        .map(|text| shingle_hashes(&normalize_text(text), 5).len())
        .sum();
    let per_text = 16 + 2 + 8 + 8 * MinHashParams::default().bands;
    assert_eq!(index.stored_bytes(), index.len() * per_text);
    // The shingle sets alone took 8 bytes a shingle; what is kept now is under a fifth of that.
    assert!(
        index.stored_bytes() * 5 < shingle_count * 8,
        "{} stored vs {} bytes of shingles",
        index.stored_bytes(),
        shingle_count * 8
    );
}

#[test]
fn pairs_within_one_group_are_never_reported() {
    let mut index = index();
    index.add(0, 1, "the quick brown fox jumps over the lazy dog");
    index.add(0, 2, "the quick brown fox jumps over the lazy dog");
    index.add(0, 3, "The quick  brown fox jumps over the lazy dog!");
    let found = index.cross_group_pairs(0.5);
    assert!(found.pairs.is_empty());
    assert_eq!(found.candidates, 0);

    index.add(1, 9, "the quick brown fox jumps over the lazy dog");
    let found = index.cross_group_pairs(0.5);
    let ids: Vec<(u64, u64)> = found.pairs.iter().map(|p| (p.id_a, p.id_b)).collect();
    assert_eq!(ids, [(1, 9), (2, 9), (3, 9)]);
    assert_eq!(found.pairs[0].jaccard, 1.0);
}

#[test]
fn exact_duplicates_after_normalization_and_short_texts_match() {
    let mut index = index();
    index.add(3, 5, "Hello   World");
    index.add(1, 7, "hello world");
    index.add(1, 8, "abc");
    index.add(2, 9, " ABC ");
    index.add(2, 10, "   ");
    index.add(3, 11, "");
    assert_eq!((index.len(), index.empty_texts()), (4, 2));
    let found = index.cross_group_pairs(1.0);
    let keys: Vec<(u16, u64, u16, u64, f64)> = found
        .pairs
        .iter()
        .map(|p| (p.group_a, p.id_a, p.group_b, p.id_b, p.jaccard))
        .collect();
    assert_eq!(keys, [(1, 7, 3, 5, 1.0), (1, 8, 2, 9, 1.0)]);
}

#[test]
fn output_does_not_depend_on_insertion_order_or_batching() {
    let planted = planted();
    let forward = indexed(&planted).cross_group_pairs(0.8);

    let mut reversed = index();
    for (id, text) in planted.test.iter().rev() {
        reversed.add(1, *id, text);
    }
    let train: Vec<(u64, &str)> = planted
        .train
        .iter()
        .enumerate()
        .rev()
        .map(|(id, t)| (id as u64, t.as_str()))
        .collect();
    reversed.add_batch(0, &train);
    assert_eq!(reversed.cross_group_pairs(0.8), forward);
    assert_eq!(indexed(&planted).cross_group_pairs(0.8), forward);
}

#[test]
fn oversized_buckets_are_skipped_and_counted() {
    let boilerplate = "click here to subscribe to our newsletter for more offers";
    let build = |max_bucket_pairs| {
        let params = MinHashParams {
            max_bucket_pairs,
            ..MinHashParams::default()
        };
        let mut index = NearDuplicateIndex::new(params).expect("valid params");
        for id in 0..50 {
            index.add(0, id, boilerplate);
            index.add(1, 100 + id, boilerplate);
        }
        index.add(0, 999, "an unrelated sentence about gradient descent");
        index.add(1, 998, "an unrelated sentence about gradient descent!");
        index
    };
    let capped = build(100).cross_group_pairs(0.9);
    assert_eq!(capped.skipped_buckets, 20, "one skipped bucket per band");
    let ids: Vec<(u64, u64)> = capped.pairs.iter().map(|p| (p.id_a, p.id_b)).collect();
    assert_eq!(ids, [(999, 998)]);

    let full = build(MinHashParams::default().max_bucket_pairs).cross_group_pairs(0.9);
    assert_eq!(full.skipped_buckets, 0);
    assert_eq!(full.pairs.len(), 50 * 50 + 1);
}

#[test]
fn past_the_candidate_budget_the_largest_buckets_are_skipped_first() {
    let build = |max_candidates| {
        let params = MinHashParams {
            max_candidates,
            ..MinHashParams::default()
        };
        let mut index = NearDuplicateIndex::new(params).expect("valid params");
        // 10 x 10 copies (100 pairs a band), 3 x 3 (9 a band), one pair (1 a band).
        for id in 0..10 {
            index.add(
                0,
                id,
                "click here to subscribe to our newsletter for more offers",
            );
            index.add(
                1,
                100 + id,
                "click here to subscribe to our newsletter for more offers",
            );
        }
        for id in 0..3 {
            index.add(
                0,
                200 + id,
                "the quarterly report is attached, see page four",
            );
            index.add(
                1,
                300 + id,
                "the quarterly report is attached, see page four",
            );
        }
        index.add(0, 999, "an unrelated sentence about gradient descent");
        index.add(1, 998, "an unrelated sentence about gradient descent!");
        index
    };
    // 20 bands: 2000 + 180 + up to 20 candidates in all (the last pair may differ in a band).
    let full = build(MinHashParams::default().max_candidates).cross_group_pairs(0.9);
    assert_eq!((full.pairs.len(), full.skipped_buckets), (100 + 9 + 1, 0));
    for budget in [200, 2179] {
        let capped = build(budget).cross_group_pairs(0.9);
        assert_eq!(
            (capped.pairs.len(), capped.skipped_buckets),
            (9 + 1, 20),
            "{budget}"
        );
    }
    let tight = build(179).cross_group_pairs(0.9);
    assert_eq!((tight.pairs.len(), tight.skipped_buckets), (1, 40));
    assert_eq!(build(2200).cross_group_pairs(0.9), full);
}

#[test]
fn verifying_in_short_runs_gives_the_same_pairs() {
    let planted = planted();
    let whole = indexed(&planted).cross_group_pairs(0.8);
    let mut index = NearDuplicateIndex::new(MinHashParams {
        verify_text_bytes: 1,
        ..MinHashParams::default()
    })
    .expect("valid params");
    for (id, text) in planted.train.iter().enumerate() {
        index.add(0, id as u64, text);
    }
    index.add_batch(1, &as_refs(&planted.test));
    assert!(whole.pairs.len() > 300);
    assert_eq!(index.cross_group_pairs(0.8), whole);
    assert_eq!(index.verification_run(&[(0, 1), (0, 2)]), 1);
}

#[test]
fn zero_parameters_are_rejected() {
    for (params, name) in [
        (
            MinHashParams {
                bands: 0,
                ..MinHashParams::default()
            },
            "bands",
        ),
        (
            MinHashParams {
                rows: 0,
                ..MinHashParams::default()
            },
            "rows",
        ),
        (
            MinHashParams {
                shingle_chars: 0,
                ..MinHashParams::default()
            },
            "shingle_chars",
        ),
        (
            MinHashParams {
                max_candidates: 0,
                ..MinHashParams::default()
            },
            "max_candidates",
        ),
        (
            MinHashParams {
                verify_text_bytes: 0,
                ..MinHashParams::default()
            },
            "verify_text_bytes",
        ),
    ] {
        assert_eq!(
            NearDuplicateIndex::new(params).err(),
            Some(MinHashError::Zero(name))
        );
    }
}

/// Throughput at the target scale; run with
/// `cargo test -p runfn-stats --release -- --ignored --nocapture hundred_thousand`.
#[test]
#[ignore = "timing check, meaningful only in release builds"]
fn hundred_thousand_texts_in_seconds() {
    let mut rng = SplitMix64::new(5);
    let vocabulary = vocabulary(&mut rng, 20_000);
    let texts: Vec<Vec<String>> = (0..100_000)
        .map(|_| document(&mut rng, &vocabulary))
        .collect();
    let mut train: Vec<(u64, String)> = Vec::new();
    let mut test: Vec<(u64, String)> = Vec::new();
    for (i, words) in texts.iter().enumerate() {
        if i % 10 == 0 {
            test.push((i as u64, words.join(" ")));
        } else {
            train.push((i as u64, words.join(" ")));
        }
        // Every hundredth training text gets a one-word edit in the test group.
        if i % 100 == 5 {
            test.push((
                1_000_000 + i as u64,
                edited(&mut rng, words, &vocabulary, 1),
            ));
        }
    }
    let start = Instant::now();
    let mut index = index();
    index.add_batch(0, &as_refs(&train));
    index.add_batch(1, &as_refs(&test));
    let indexed = start.elapsed();
    let found = index.cross_group_pairs(0.8);
    let total = start.elapsed();
    println!(
        "{} texts: indexed in {indexed:?}, pairs in {:?}; {} pairs, {} candidates",
        index.len(),
        total - indexed,
        found.pairs.len(),
        found.candidates
    );
    assert!(found.pairs.len() >= 950, "{} pairs", found.pairs.len());
    assert!(total.as_secs_f64() < 10.0, "took {total:?}");
}
