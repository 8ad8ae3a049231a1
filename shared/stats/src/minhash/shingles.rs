//! Text to a set of shingle hashes, and the exact Jaccard similarity of two such sets.

use crate::mix;

/// Lowercase, every run of whitespace collapsed to one space, trimmed: so case and layout
/// changes alone never make two texts differ.
pub fn normalize_text(text: &str) -> String {
    let lower = text.to_lowercase();
    let mut normalized = String::with_capacity(lower.len());
    for word in lower.split_whitespace() {
        if !normalized.is_empty() {
            normalized.push(' ');
        }
        normalized.push_str(word);
    }
    normalized
}

/// The sorted, deduplicated hashes of every `width`-character window of `normalized` (a text
/// shorter than that is one shingle; an empty text has none).
///
/// Characters, not bytes, so non-ASCII text shingles the same way. The hash is FxHash-style
/// (rotate, xor, multiply) over the code points, finished with the splitmix64 finalizer: about
/// a nanosecond per character where blake3 would cost far more per tiny input, and the same on
/// every platform. It is not collision-resistant, which is fine for similarity: a collision
/// among ~10^8 shingles is about 10^-3 likely and at worst nudges one Jaccard value.
pub fn shingle_hashes(normalized: &str, width: usize) -> Vec<u64> {
    let chars: Vec<char> = normalized.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let mut hashes: Vec<u64> = if chars.len() <= width {
        vec![hash_chars(&chars)]
    } else {
        chars.windows(width.max(1)).map(hash_chars).collect()
    };
    hashes.sort_unstable();
    hashes.dedup();
    hashes
}

fn hash_chars(chars: &[char]) -> u64 {
    const FX: u64 = 0x517c_c1b7_2722_0a95;
    let state = chars.iter().fold(chars.len() as u64, |h, &c| {
        (h.rotate_left(5) ^ u64::from(c)).wrapping_mul(FX)
    });
    mix::finalize(state)
}

/// |A ∩ B| / |A ∪ B| of two sorted, deduplicated sets; 0 when both are empty.
pub fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - common;
    if union == 0 {
        0.0
    } else {
        common as f64 / union as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn normalizing_folds_case_and_whitespace() {
        assert_eq!(
            normalize_text("  Hello\t\tWORLD \n again "),
            "hello world again"
        );
        assert_eq!(normalize_text(" \n\t "), "");
        assert_eq!(normalize_text("ÉCOLE  Straße"), "école straße");
    }

    #[test]
    fn shingles_are_character_windows() {
        assert_eq!(shingle_hashes("abcdef", 5).len(), 2);
        assert_eq!(shingle_hashes("ab", 5).len(), 1);
        assert_eq!(shingle_hashes("abcde", 5).len(), 1);
        assert!(shingle_hashes("", 5).is_empty());
        // "aaaaaaa" has three windows, all "aaaaa".
        assert_eq!(shingle_hashes("aaaaaaa", 5).len(), 1);
        // Multi-byte characters count as one each.
        assert_eq!(shingle_hashes("éééééé", 5).len(), 1);
        assert_eq!(shingle_hashes("ab", 5), shingle_hashes("ab", 5));
        assert_ne!(shingle_hashes("ab", 5), shingle_hashes("ba", 5));
    }

    #[test]
    fn jaccard_counts_shared_elements() {
        assert_eq!(jaccard(&[1, 2, 3], &[2, 3, 4]), 0.5);
        assert_eq!(jaccard(&[1, 2], &[1, 2]), 1.0);
        assert_eq!(jaccard(&[1], &[2]), 0.0);
        assert_eq!(jaccard(&[], &[]), 0.0);
    }

    proptest! {
        #[test]
        fn jaccard_matches_set_arithmetic(
            a in proptest::collection::btree_set(0u64..50, 0..30),
            b in proptest::collection::btree_set(0u64..50, 0..30),
        ) {
            let (va, vb): (Vec<u64>, Vec<u64>) = (a.iter().copied().collect(), b.iter().copied().collect());
            let union = a.union(&b).count();
            let expected = if union == 0 { 0.0 } else { a.intersection(&b).count() as f64 / union as f64 };
            prop_assert_eq!(jaccard(&va, &vb), expected);
        }

        #[test]
        fn shingle_hashes_match_distinct_windows(text in "[a-c ]{0,40}") {
            let chars: Vec<char> = text.chars().collect();
            let windows: BTreeSet<String> = if chars.len() <= 5 {
                std::iter::once(text.clone()).filter(|t| !t.is_empty()).collect()
            } else {
                chars.windows(5).map(|w| w.iter().collect()).collect()
            };
            prop_assert_eq!(shingle_hashes(&text, 5).len(), windows.len());
        }
    }
}
