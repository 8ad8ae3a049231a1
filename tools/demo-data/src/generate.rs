//! The base snapshot: one row per customer, features drawn from two hidden traits (engagement and
//! frustration) and a churn label from a logistic model of the observed features plus noise.
//!
//! Rows come from one ChaCha8 stream in order, so the first N rows of a larger snapshot are the
//! N-row snapshot, and the traps (their own streams) never shift the base rows.

use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Poisson, StandardNormal};

use crate::date::Date;
use crate::text;

pub const REGIONS: [&str; 5] = ["north", "south", "east", "west", "central"];
const REGION_SHARES: [f64; 5] = [0.26, 0.21, 0.23, 0.18, 0.12];
/// Central doubles; the others give up the difference in proportion.
const DRIFT_REGION_SHARES: [f64; 5] = [0.2316, 0.1871, 0.2049, 0.1604, 0.24];
const REGION_LOGIT: [f64; 5] = [-0.2, 0.2, -0.1, 0.0, 0.45];

pub const TIERS: [&str; 4] = ["free", "basic", "pro", "enterprise"];
const TIER_SHARES: [f64; 4] = [0.45, 0.30, 0.18, 0.07];
const TIER_LOGIT: [f64; 4] = [0.8, 0.0, -0.7, -1.5];
const TIER_LOGINS: [f64; 4] = [0.0, 0.15, 0.30, 0.45];
const TIER_TICKETS: [f64; 4] = [-0.30, 0.0, 0.15, 0.35];
/// ln of the median monthly spend: about 4, 19, 59 and 420.
const TIER_SPEND_MU: [f64; 4] = [1.386, 2.944, 4.078, 6.040];
/// Share of customers with history before this signup (an upgrade, a returning account).
const TIER_PRIOR: [f64; 4] = [0.25, 0.40, 0.55, 0.70];

pub const FIRST_SIGNUP: Date = Date::ymd(2025, 3, 1);
pub const LAST_SIGNUP: Date = Date::ymd(2026, 9, 30);
/// The product launch: no history starts before it.
const LAUNCH: Date = Date::ymd(2024, 11, 1);
/// Signups per day grow linearly to this multiple of the first day's.
const GROWTH: f64 = 1.8;
pub const LABEL_AFTER_DAYS: i32 = 90;
/// How the label's log-odds fall with ln(1 + tenure_days).
pub const TENURE_LOGIT: f64 = 0.85;
/// How the label's log-odds fall with ln(1 + logins_30d), centred on a typical account.
pub const LOGINS_LOGIT: f64 = 1.35;
pub const LOGINS_CENTRE: f64 = 2.4;

const INTERCEPT: f64 = -2.5;
const DRIFT_INTERCEPT_SHIFT: f64 = 0.38;
const DRIFT_SPEND: f64 = 1.35;
/// Churn causes the observed features cannot see.
const HIDDEN_NOISE: f64 = 0.6;

/// The most rows: customer ids have seven digits.
pub const MAX_ROWS: usize = 10_000_000;

/// A monthly spend in cents, or the unparseable text a `--bad-rows` row carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Spend {
    Cents(u64),
    Bad(String),
}

impl Spend {
    /// The spend as written: two decimals, or the bad text.
    pub fn text(&self) -> String {
        match self {
            Spend::Cents(cents) => format!("{}.{:02}", cents / 100, cents % 100),
            Spend::Bad(text) => text.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub customer_id: u32,
    pub signup_date: Date,
    pub region: usize,
    pub tier: usize,
    pub tenure_days: u32,
    pub monthly_spend: Spend,
    pub support_tickets: u32,
    pub logins_30d: u32,
    /// No usage record yet, so `logins_30d` is written as null (`--trap-missing-new-accounts`).
    pub logins_missing: bool,
    pub tickets_this_month: u32,
    pub tickets_as_of: Date,
    pub support_note: String,
    pub churned: bool,
    /// The log-odds `churned` was drawn from, so a trap that changes a driver can redraw the
    /// label the way the base model would have.
    pub churn_logit: f64,
    /// Written only with `--trap-label-proxy`.
    pub account_closed: bool,
}

impl Row {
    pub fn customer_id_text(&self) -> String {
        format!("C{:07}", self.customer_id)
    }

    pub fn label_date(&self) -> Date {
        self.signup_date.add_days(LABEL_AFTER_DAYS)
    }

    pub fn tenure_bucket(&self) -> &'static str {
        match self.tenure_days {
            0..30 => "<30d",
            30..90 => "30-90d",
            90..=365 => "90-365d",
            _ => ">365d",
        }
    }
}

/// What the base snapshot looks like.
#[derive(Debug, Clone, Copy)]
pub struct Base {
    pub rows: usize,
    pub seed: u64,
    pub drift: bool,
}

/// The base rows, before any trap.
pub fn rows(base: &Base) -> Vec<Row> {
    let mut rng = stream(base.seed, Stream::Rows);
    let ids = CustomerIds::new(base.seed);
    (0..base.rows)
        .map(|index| row(&mut rng, ids.id(index as u64), base.drift))
        .collect()
}

fn row(rng: &mut ChaCha8Rng, customer_id: u32, drift: bool) -> Row {
    let signup_date = signup_date(rng);
    let label_date = signup_date.add_days(LABEL_AFTER_DAYS);
    let region = weighted(
        rng,
        if drift {
            &DRIFT_REGION_SHARES
        } else {
            &REGION_SHARES
        },
    );
    let tier = weighted(rng, &TIER_SHARES);
    let engagement: f64 = rng.sample(StandardNormal);
    let frustration: f64 = rng.sample(StandardNormal);

    let logins_30d = poisson(rng, (2.2 + 0.55 * engagement + TIER_LOGINS[tier]).exp());
    let went_quiet = rng.random_bool(sigmoid(-2.0 - 1.1 * engagement));
    let active_days = if went_quiet {
        rng.random_range(0..LABEL_AFTER_DAYS as u32)
    } else {
        LABEL_AFTER_DAYS as u32
    };
    let prior_days = if rng.random_bool(TIER_PRIOR[tier]) {
        let available = f64::from(signup_date.days_since(LAUNCH));
        (rng.random::<f64>().powf(1.5) * available) as u32
    } else {
        0
    };
    let tenure_days = active_days + prior_days;

    let spend_noise: f64 = rng.sample(StandardNormal);
    let log_spend_offset = 0.2 * engagement + 0.45 * spend_noise;
    let spend = (TIER_SPEND_MU[tier] + log_spend_offset).exp();

    let support_tickets = poisson(rng, (0.15 + 0.55 * frustration + TIER_TICKETS[tier]).exp());
    let tickets_this_month = (0..support_tickets)
        .filter(|_| rng.random_bool(0.35))
        .count() as u32;
    let tickets_as_of = label_date.add_days(-rng.random_range(0..=6));

    let hidden: f64 = rng.sample(StandardNormal);
    let logit = INTERCEPT
        + if drift { DRIFT_INTERCEPT_SHIFT } else { 0.0 }
        + TIER_LOGIT[tier]
        + REGION_LOGIT[region]
        - LOGINS_LOGIT * (f64::from(logins_30d).ln_1p() - LOGINS_CENTRE)
        + 0.6 * (f64::from(support_tickets) - 1.3)
        + 0.45 * f64::from(tickets_this_month)
        - 0.9 * log_spend_offset
        - TENURE_LOGIT * (f64::from(tenure_days).ln_1p() - 4.8)
        + HIDDEN_NOISE * hidden;
    let churned = rng.random_bool(sigmoid(logit));

    let unhappy = 0.9 * frustration - 0.4 * engagement;
    let support_note = text::note(rng, 8, 40, unhappy);

    let spend = if drift { spend * DRIFT_SPEND } else { spend };
    Row {
        customer_id,
        signup_date,
        region,
        tier,
        tenure_days,
        monthly_spend: Spend::Cents(((spend * 100.0).round() as u64).max(1)),
        support_tickets,
        logins_30d,
        logins_missing: false,
        tickets_this_month,
        tickets_as_of,
        support_note,
        churned,
        churn_logit: logit,
        account_closed: churned,
    }
}

/// A signup day from a density that grows linearly from 1 to GROWTH over the period
/// (inverse-CDF sampling).
fn signup_date(rng: &mut ChaCha8Rng) -> Date {
    let span = LAST_SIGNUP.days_since(FIRST_SIGNUP) + 1;
    let g = GROWTH - 1.0;
    let u: f64 = rng.random();
    let t = ((1.0 + 2.0 * g * u * (1.0 + g / 2.0)).sqrt() - 1.0) / g;
    let day = ((t * f64::from(span)) as i32).clamp(0, span - 1);
    FIRST_SIGNUP.add_days(day)
}

fn weighted(rng: &mut ChaCha8Rng, shares: &[f64]) -> usize {
    let total: f64 = shares.iter().sum();
    let mut u = rng.random::<f64>() * total;
    for (index, share) in shares.iter().enumerate() {
        if u < *share {
            return index;
        }
        u -= share;
    }
    shares.len() - 1
}

pub fn poisson<R: Rng + ?Sized>(rng: &mut R, lambda: f64) -> u32 {
    let distribution = Poisson::new(lambda).expect("Poisson rates here are positive and finite");
    let draw: f64 = distribution.sample(rng);
    draw as u32
}

/// The independent random streams of one seed: base rows, customer ids and one per trap.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    Rows,
    CustomerIds,
    EntityOverlap,
    ExactDuplicates,
    DuplicateNotes,
    FutureFeature,
    LabelProxy,
    BadRows,
    MissingNewAccounts,
}

pub fn stream(seed: u64, stream: Stream) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream as u64);
    rng
}

pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Unique seven-digit ids in an order that looks random: i -> (a i + b) mod 10^7 with a coprime to
/// 10^7 is a bijection on 0..10^7.
#[derive(Debug, Clone, Copy)]
struct CustomerIds {
    a: u64,
    b: u64,
}

impl CustomerIds {
    const MODULUS: u64 = MAX_ROWS as u64;

    fn new(seed: u64) -> CustomerIds {
        let mut rng = stream(seed, Stream::CustomerIds);
        let mut a = rng.random_range(1_000_001..Self::MODULUS) | 1;
        if a % 5 == 0 {
            a += 2;
        }
        CustomerIds {
            a,
            b: rng.random_range(0..Self::MODULUS),
        }
    }

    fn id(self, index: u64) -> u32 {
        ((self.a * index + self.b) % Self::MODULUS) as u32
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::OnceLock;

    /// 50,000 base rows, generated once for all tests.
    pub fn sample() -> &'static [Row] {
        static SAMPLE: OnceLock<Vec<Row>> = OnceLock::new();
        SAMPLE.get_or_init(|| {
            rows(&Base {
                rows: 50_000,
                seed: 7,
                drift: false,
            })
        })
    }

    pub fn label_rate(rows: &[Row]) -> f64 {
        rows.iter().filter(|r| r.churned).count() as f64 / rows.len() as f64
    }

    /// Rank AUC of `score` for the label, ties counted half (Mann-Whitney U).
    pub fn auc(scores: &[f64], labels: &[bool]) -> f64 {
        let mut order: Vec<usize> = (0..scores.len()).collect();
        order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
        let mut rank_sum = 0.0;
        let mut start = 0;
        while start < order.len() {
            let mut end = start;
            while end < order.len() && scores[order[end]] == scores[order[start]] {
                end += 1;
            }
            let mid_rank = (start + end + 1) as f64 / 2.0;
            rank_sum += mid_rank * order[start..end].iter().filter(|&&i| labels[i]).count() as f64;
            start = end;
        }
        let positives = labels.iter().filter(|&&l| l).count() as f64;
        let negatives = labels.len() as f64 - positives;
        (rank_sum - positives * (positives + 1.0) / 2.0) / (positives * negatives)
    }

    /// AUC of a feature in its better direction, for a categorical one by its churn rate per level.
    fn univariate_auc(rows: &[Row], feature: impl Fn(&Row) -> f64) -> f64 {
        let scores: Vec<f64> = rows.iter().map(feature).collect();
        let labels: Vec<bool> = rows.iter().map(|r| r.churned).collect();
        let auc = auc(&scores, &labels);
        auc.max(1.0 - auc)
    }

    fn level_rate_auc(rows: &[Row], level: impl Fn(&Row) -> usize) -> f64 {
        let mut counts = [[0.0f64; 2]; 8];
        for row in rows {
            counts[level(row)][usize::from(row.churned)] += 1.0;
        }
        univariate_auc(rows, |r| {
            let [stay, churn] = counts[level(r)];
            churn / (stay + churn)
        })
    }

    fn spend(row: &Row) -> f64 {
        match row.monthly_spend {
            Spend::Cents(cents) => cents as f64 / 100.0,
            Spend::Bad(_) => f64::NAN,
        }
    }

    pub fn univariate_aucs(rows: &[Row]) -> Vec<(&'static str, f64)> {
        vec![
            ("tier", level_rate_auc(rows, |r| r.tier)),
            ("region", level_rate_auc(rows, |r| r.region)),
            (
                "tenure_days",
                univariate_auc(rows, |r| f64::from(r.tenure_days)),
            ),
            ("monthly_spend", univariate_auc(rows, spend)),
            (
                "support_tickets",
                univariate_auc(rows, |r| f64::from(r.support_tickets)),
            ),
            (
                "logins_30d",
                univariate_auc(rows, |r| f64::from(r.logins_30d)),
            ),
            (
                "tickets_this_month",
                univariate_auc(rows, |r| f64::from(r.tickets_this_month)),
            ),
            (
                "signup_date",
                univariate_auc(rows, |r| f64::from(r.signup_date.days_since(FIRST_SIGNUP))),
            ),
        ]
    }

    /// The features a plain logistic regression would see: one-hot tier and region, log counts.
    fn design(row: &Row) -> Vec<f64> {
        let mut x = vec![1.0];
        x.extend((1..TIERS.len()).map(|t| f64::from(u8::from(row.tier == t))));
        x.extend((1..REGIONS.len()).map(|r| f64::from(u8::from(row.region == r))));
        x.push(f64::from(row.logins_30d).ln_1p());
        x.push(f64::from(row.support_tickets));
        x.push(f64::from(row.tickets_this_month));
        x.push(spend(row).ln());
        x.push(f64::from(row.tenure_days).ln_1p());
        x
    }

    /// Logistic regression by Newton's method (IRLS), fit on `train`, scored on `test`.
    pub fn logistic_auc(train: &[Row], test: &[Row]) -> f64 {
        let xs: Vec<Vec<f64>> = train.iter().map(design).collect();
        let k = xs[0].len();
        let mut w = vec![0.0; k];
        for _ in 0..12 {
            let mut gradient = vec![0.0; k];
            let mut hessian = vec![vec![0.0; k]; k];
            for (x, row) in xs.iter().zip(train) {
                let p = sigmoid(x.iter().zip(&w).map(|(a, b)| a * b).sum());
                let y = f64::from(u8::from(row.churned));
                for i in 0..k {
                    gradient[i] += (y - p) * x[i];
                    for j in 0..k {
                        hessian[i][j] += p * (1.0 - p) * x[i] * x[j];
                    }
                }
            }
            let step = solve(hessian, gradient);
            w.iter_mut().zip(step).for_each(|(wi, si)| *wi += si);
        }
        let scores: Vec<f64> = test
            .iter()
            .map(|r| design(r).iter().zip(&w).map(|(a, b)| a * b).sum())
            .collect();
        let labels: Vec<bool> = test.iter().map(|r| r.churned).collect();
        auc(&scores, &labels)
    }

    /// Solves a x = b by Gaussian elimination with partial pivoting.
    fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
        let n = b.len();
        for col in 0..n {
            let pivot = (col..n)
                .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
                .unwrap_or(col);
            a.swap(col, pivot);
            b.swap(col, pivot);
            let pivot_row = a[col].clone();
            for row in col + 1..n {
                let factor = a[row][col] / pivot_row[col];
                for (value, above) in a[row].iter_mut().zip(&pivot_row).skip(col) {
                    *value -= factor * above;
                }
                b[row] -= factor * b[col];
            }
        }
        let mut x = vec![0.0; n];
        for row in (0..n).rev() {
            let tail: f64 = (row + 1..n).map(|c| a[row][c] * x[c]).sum();
            x[row] = (b[row] - tail) / a[row][row];
        }
        x
    }

    #[test]
    fn auc_helper_matches_hand_counts() {
        assert_eq!(auc(&[0.1, 0.2, 0.3, 0.4], &[false, false, true, true]), 1.0);
        assert_eq!(auc(&[0.4, 0.3, 0.2, 0.1], &[false, false, true, true]), 0.0);
        assert_eq!(auc(&[0.5, 0.5, 0.5, 0.5], &[false, true, false, true]), 0.5);
        // Pairs (pos, neg): (0.3, 0.1) win, (0.3, 0.35) loss, (0.2, 0.1) win, (0.2, 0.35) loss.
        assert_eq!(
            auc(&[0.1, 0.35, 0.3, 0.2], &[false, false, true, true]),
            0.5
        );
    }

    #[test]
    fn label_rate_is_about_twenty_percent() {
        let rate = label_rate(sample());
        assert!((0.17..=0.23).contains(&rate), "label rate {rate}");
    }

    #[test]
    fn no_single_feature_gives_the_label_away() {
        for (name, auc) in univariate_aucs(sample()) {
            assert!(auc <= 0.75, "{name}: univariate AUC {auc:.3}");
        }
        let strongest = univariate_aucs(sample())
            .iter()
            .map(|(_, auc)| *auc)
            .fold(0.0, f64::max);
        assert!(
            strongest >= 0.62,
            "no feature carries signal: {strongest:.3}"
        );
    }

    #[test]
    fn a_logistic_model_learns_the_label() {
        let (train, test) = sample().split_at(35_000);
        let auc = logistic_auc(train, test);
        assert!((0.80..=0.88).contains(&auc), "logistic AUC {auc:.3}");
    }

    #[test]
    fn columns_have_their_documented_ranges() {
        let rows = sample();
        let ids: HashSet<u32> = rows.iter().map(|r| r.customer_id).collect();
        assert_eq!(ids.len(), rows.len(), "customer ids are unique");
        let mut tiers = [0usize; 4];
        let mut regions = [0usize; 5];
        for row in rows {
            let id = row.customer_id_text();
            assert!(id.len() == 8 && id.starts_with('C'), "{id}");
            assert!((FIRST_SIGNUP..=LAST_SIGNUP).contains(&row.signup_date));
            assert!(row.tickets_as_of <= row.label_date());
            assert!(row.tickets_as_of >= row.label_date().add_days(-6));
            assert!(row.tickets_this_month <= row.support_tickets);
            assert!(row.tenure_days <= 800, "{}", row.tenure_days);
            assert!(matches!(row.monthly_spend, Spend::Cents(c) if c > 0));
            tiers[row.tier] += 1;
            regions[row.region] += 1;
        }
        let share = |count: usize| count as f64 / rows.len() as f64;
        for (tier, expected) in TIER_SHARES.iter().enumerate() {
            assert!((share(tiers[tier]) - expected).abs() < 0.01, "{tiers:?}");
        }
        assert!(regions.windows(2).any(|w| w[0] != w[1]));
        let buckets: HashSet<&str> = rows.iter().map(Row::tenure_bucket).collect();
        assert_eq!(buckets.len(), 4, "{buckets:?}");
    }

    #[test]
    fn notes_do_not_repeat_by_chance() {
        let notes: HashSet<String> = sample()
            .iter()
            .map(|r| crate::text::tests::normalized(&r.support_note))
            .collect();
        assert_eq!(notes.len(), sample().len());
    }

    #[test]
    fn signups_grow_over_time() {
        let rows = sample();
        let first_quarter = rows
            .iter()
            .filter(|r| r.signup_date < Date::ymd(2025, 6, 1))
            .count();
        let last_quarter = rows
            .iter()
            .filter(|r| r.signup_date >= Date::ymd(2026, 7, 1))
            .count();
        let ratio = last_quarter as f64 / first_quarter as f64;
        assert!((1.3..2.2).contains(&ratio), "growth ratio {ratio:.2}");
    }

    #[test]
    fn higher_tiers_spend_more() {
        let mean_spend = |tier: usize| {
            let spends: Vec<f64> = sample()
                .iter()
                .filter(|r| r.tier == tier)
                .map(spend)
                .collect();
            spends.iter().sum::<f64>() / spends.len() as f64
        };
        assert!(mean_spend(0) < mean_spend(1));
        assert!(mean_spend(1) < mean_spend(2));
        assert!(mean_spend(2) < mean_spend(3));
    }

    #[test]
    fn drift_moves_spend_regions_and_label_rate() {
        let drifted = rows(&Base {
            rows: 20_000,
            seed: 7,
            drift: true,
        });
        let base = &sample()[..20_000];
        let mean = |rows: &[Row]| rows.iter().map(spend).sum::<f64>() / rows.len() as f64;
        let ratio = mean(&drifted) / mean(base);
        assert!((1.25..1.45).contains(&ratio), "spend ratio {ratio:.3}");
        let central = |rows: &[Row]| rows.iter().filter(|r| r.region == 4).count() as f64;
        let central_ratio = central(&drifted) / central(base);
        assert!(
            (1.7..2.3).contains(&central_ratio),
            "central {central_ratio:.2}"
        );
        let shift = label_rate(&drifted) - label_rate(base);
        assert!(
            (0.03..=0.07).contains(&shift),
            "label rate shift {shift:.3}"
        );
    }

    #[test]
    fn a_smaller_snapshot_is_a_prefix_of_a_larger_one() {
        let small = rows(&Base {
            rows: 100,
            seed: 7,
            drift: false,
        });
        assert_eq!(small.as_slice(), &sample()[..100]);
    }

    #[test]
    fn customer_ids_are_a_bijection() {
        let ids = CustomerIds::new(99);
        let seen: HashSet<u32> = (0..200_000).map(|i| ids.id(i)).collect();
        assert_eq!(seen.len(), 200_000);
        assert!(seen.iter().all(|&id| id < 10_000_000));
    }
}
