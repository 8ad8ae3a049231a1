//! How much a rate moves from one stretch of data to the next beyond sampling, and a count
//! judged against that movement: twins and unseen categories of a later split are one more
//! stretch, so their chance rate is allowed to move as the earliest split's stretches do.

/// How far the twin rate moves between the earliest split's stretches beyond what sampling
/// explains: the standard deviation of the blocks' rates (each block's rows with a twin in the
/// other blocks) less the binomial variance of a block's size, with the blocks' count as the
/// evidence behind it. None with too few rows for a block to say anything.
#[derive(Debug, Clone, Copy)]
pub struct Movement {
    pub(crate) sd: f64,
    pub(crate) blocks: usize,
}

/// The movement of blocks' rates (each with its rows) around `rate`: blocks of under 20 rows
/// say nothing, and under 4 such blocks give no movement.
pub fn movement_of(blocks: &[(f64, u64)], rate: f64) -> Option<Movement> {
    let rates: Vec<(f64, u64)> = blocks.iter().copied().filter(|(_, n)| *n >= 20).collect();
    if rates.len() < 4 {
        return None;
    }
    let k = rates.len() as f64;
    let mean = rates.iter().map(|r| r.0).sum::<f64>() / k;
    let variance = rates.iter().map(|r| (r.0 - mean).powi(2)).sum::<f64>() / (k - 1.0);
    let typical = rates.iter().map(|r| r.1 as f64).sum::<f64>() / k;
    let sampling = rate * (1.0 - rate) / typical;
    Some(Movement {
        sd: (variance - sampling).max(0.0).sqrt(),
        blocks: rates.len(),
    })
}

/// The one-sided p-value of `observed` twins in `rows` rows when the chance rate itself moves
/// from one stretch of data to the next by `movement.sd` (a later split is one more stretch):
/// the excess over `chance` against the two variances together, Student-t with the blocks'
/// count less one degrees of freedom. 0 (no say) without movement: the binomial test stands.
pub fn overdispersed_p(observed: u64, rows: u64, chance: f64, movement: Option<Movement>) -> f64 {
    let Some(movement) = movement.filter(|m| m.sd > 0.0) else {
        return 0.0;
    };
    if rows == 0 {
        return 1.0;
    }
    let share = observed as f64 / rows as f64;
    let spread = (movement.sd.powi(2) + chance * (1.0 - chance) / rows as f64).sqrt();
    let t = (share - chance) / spread;
    statrs::distribution::StudentsT::new(0.0, 1.0, (movement.blocks - 1) as f64).map_or(
        1.0,
        |dist| {
            use statrs::distribution::ContinuousCDF;
            dist.sf(t)
        },
    )
}
