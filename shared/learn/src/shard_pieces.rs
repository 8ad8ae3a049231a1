//! The units the input pipeline reads and shuffles: a shard of more rows than a piece holds is
//! read as consecutive pieces of about equal size, each one on its own in the epoch's order.
//!
//! Why: the first batch of a run needs rows from every lane of the first unit read, so that
//! unit is decoded whole before step 1. A shard of a million rows took a sixth of a second
//! there, which on a run of a few thousand steps was most of its data wait; a piece of a
//! hundred thousand rows takes a few hundredths. Shards hold their split's rows shuffled, so a
//! contiguous piece is as good a sample of the split as the whole shard.

use std::ops::Range;

/// A contiguous row range of one shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// Index of the shard in the shard set.
    pub shard: usize,
    pub rows: Range<u64>,
}

impl Piece {
    pub fn len(&self) -> u64 {
        self.rows.end - self.rows.start
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Rows a piece holds at most with global batch `batch`: 2^17 (128 batches of 1,024), and at
/// least 8 global batches, so a large batch still finds several batches in a piece.
pub fn piece_rows(batch: usize) -> u64 {
    (1u64 << 17).max(8 * batch as u64)
}

/// The shards of `rows` rows each, cut into pieces of at most `most` rows: a shard that fits is
/// one piece; a larger one is cut into the fewest pieces that fit, of equal size within a row.
/// Pieces come in shard order, each shard's in row order.
pub fn pieces(rows: &[u64], most: u64) -> Vec<Piece> {
    let most = most.max(1);
    let mut out = Vec::new();
    for (shard, &n) in rows.iter().enumerate() {
        let count = n.div_ceil(most).max(1);
        let at = |i: u64| (n as u128 * i as u128 / count as u128) as u64;
        out.extend((0..count).map(|i| Piece {
            shard,
            rows: at(i)..at(i + 1),
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_that_fits_is_one_piece_and_a_larger_one_is_cut_evenly() {
        let cut = pieces(&[10, 0, 25, 8], 8);
        let want = [
            (0, 0..5),
            (0, 5..10),
            (1, 0..0),
            (2, 0..6),
            (2, 6..12),
            (2, 12..18),
        ];
        let want: Vec<Piece> = want
            .into_iter()
            .map(|(shard, rows)| Piece { shard, rows })
            .chain([
                Piece {
                    shard: 2,
                    rows: 18..25,
                },
                Piece {
                    shard: 3,
                    rows: 0..8,
                },
            ])
            .collect();
        assert_eq!(cut, want);
    }

    #[test]
    fn pieces_cover_every_shard_in_order_and_fit() {
        let rows = [1, 131_072, 131_073, 1_000_000, 262_144, 7];
        let most = piece_rows(1024);
        let cut = pieces(&rows, most);
        for (shard, &n) in rows.iter().enumerate() {
            let mine: Vec<&Piece> = cut.iter().filter(|p| p.shard == shard).collect();
            assert_eq!(mine.first().unwrap().rows.start, 0);
            assert_eq!(mine.last().unwrap().rows.end, n);
            assert!(mine.windows(2).all(|w| w[0].rows.end == w[1].rows.start));
            assert!(mine.iter().all(|p| p.len() <= most));
            let (small, large) = (
                mine.iter().map(|p| p.len()).min().unwrap(),
                mine.iter().map(|p| p.len()).max().unwrap(),
            );
            assert!(large - small <= 1, "shard {shard}: {small}..{large}");
            assert_eq!(mine.len() as u64, n.div_ceil(most).max(1));
        }
        assert_eq!(piece_rows(1024), 131_072);
        assert_eq!(piece_rows(65_536), 524_288);
    }
}
