//! Planted problems, each one a kind of mistake a checker should find, with exact counts.
//!
//! Every trap draws from its own random stream and claims its rows (the changed row and, where
//! one is copied, its source) so that no row carries two traps: each planted property stays
//! checkable on its own, and the rows no trap claimed are the base rows unchanged.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use runfn_core::InputError;
use serde_json::{Value, json};

use crate::date::Date;
use crate::generate::{
    LOGINS_CENTRE, LOGINS_LOGIT, Row, Spend, Stream, TENURE_LOGIT, poisson, sigmoid, stream,
};
use crate::text;

/// Rows signed up before this day are the sources that later rows copy or reuse.
pub const EARLY_BEFORE: Date = Date::ymd(2026, 7, 1);
/// Rows signed up from this day on (August and September 2026) are the ones that copy or reuse.
/// The month between keeps a copy and its source in different splits whether the last training
/// month is June or July (the demo manifest trains on signups before 2026-08-01).
pub const LATE_FROM: Date = Date::ymd(2026, 8, 1);
/// Share of rows whose `account_closed` disagrees with `churned`.
const PROXY_FLIP_RATE: f64 = 0.002;
/// Near-duplicate sources have at least this many words, so one swapped word changes little.
const NEAR_SOURCE_MIN_WORDS: usize = 28;
/// `--trap-missing-new-accounts` rows get a tenure below this: the `<30d` bucket.
const NEW_ACCOUNT_DAYS: u32 = 30;
/// Share of those new accounts not activated yet, so the usage feed has no `logins_30d` for them.
const NOT_ACTIVATED_SHARE: f64 = 0.5;
/// How much likelier to churn, in log-odds, a new account that was never activated is than a
/// typical one: the signal that only the missingness carries.
const NOT_ACTIVATED_LOGIT: f64 = 2.0;

/// Which traps to plant, as given on the command line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Traps {
    pub future_feature: usize,
    pub label_proxy: bool,
    pub entity_overlap: usize,
    pub duplicate_notes: usize,
    pub exact_duplicates: usize,
    pub bad_rows: usize,
    pub missing_new_accounts: usize,
}

/// What was planted, row by row counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Planted {
    pub future_feature: usize,
    pub label_proxy: bool,
    pub label_proxy_flipped: usize,
    pub entity_overlap: usize,
    pub duplicate_notes_exact: usize,
    pub duplicate_notes_near: usize,
    pub exact_duplicates: usize,
    pub bad_rows: usize,
    pub missing_new_accounts: usize,
    /// Of those, the rows whose `logins_30d` is null.
    pub missing_logins: usize,
}

impl Planted {
    pub fn to_json(&self, drift: bool) -> Value {
        json!({
            "future_feature": self.future_feature,
            "label_proxy": self.label_proxy,
            "label_proxy_flipped": self.label_proxy_flipped,
            "entity_overlap": self.entity_overlap,
            "duplicate_notes_exact": self.duplicate_notes_exact,
            "duplicate_notes_near": self.duplicate_notes_near,
            "exact_duplicates": self.exact_duplicates,
            "bad_rows": self.bad_rows,
            "missing_new_accounts": self.missing_new_accounts,
            "missing_logins": self.missing_logins,
            "drift": drift,
        })
    }
}

/// Plants `traps` into `rows`. Fails, naming the flag, when there are not enough rows of the kind
/// a trap needs.
pub fn plant(rows: &mut [Row], traps: &Traps, seed: u64) -> Result<Planted, InputError> {
    let mut claimed = Claims::new(rows.len());
    let mut planted = Planted::default();

    if traps.entity_overlap > 0 {
        let mut rng = stream(seed, Stream::EntityOverlap);
        let flag = "--trap-entity-overlap";
        let n = traps.entity_overlap;
        let targets = claimed.take(rows, &mut rng, n, Pool::Late, flag)?;
        let sources = claimed.take(rows, &mut rng, n, Pool::Early, flag)?;
        for (&target, &source) in targets.iter().zip(&sources) {
            rows[target].customer_id = rows[source].customer_id;
        }
        planted.entity_overlap = n;
    }

    if traps.exact_duplicates > 0 {
        let mut rng = stream(seed, Stream::ExactDuplicates);
        let flag = "--trap-exact-duplicates";
        let n = traps.exact_duplicates;
        let targets = claimed.take(rows, &mut rng, n, Pool::Late, flag)?;
        let sources = claimed.take(rows, &mut rng, n, Pool::Early, flag)?;
        for (&target, &source) in targets.iter().zip(&sources) {
            let from = rows[source].clone();
            let to = &mut rows[target];
            to.region = from.region;
            to.tier = from.tier;
            to.tenure_days = from.tenure_days;
            to.monthly_spend = from.monthly_spend;
            to.support_tickets = from.support_tickets;
            to.logins_30d = from.logins_30d;
            to.tickets_this_month = from.tickets_this_month;
            to.support_note = from.support_note;
        }
        planted.exact_duplicates = n;
    }

    if traps.duplicate_notes > 0 {
        let mut rng = stream(seed, Stream::DuplicateNotes);
        let flag = "--trap-duplicate-notes";
        let n = traps.duplicate_notes;
        let targets = claimed.take(rows, &mut rng, 2 * n, Pool::Late, flag)?;
        let sources = claimed.take(rows, &mut rng, 2 * n, Pool::Early, flag)?;
        let (exact_targets, near_targets) = targets.split_at(n);
        let (exact_sources, near_sources) = sources.split_at(n);
        for (&target, &source) in exact_targets.iter().zip(exact_sources) {
            rows[target].support_note = text::restyled(&mut rng, &rows[source].support_note);
        }
        for (&target, &source) in near_targets.iter().zip(near_sources) {
            if rows[source].support_note.split_whitespace().count() < NEAR_SOURCE_MIN_WORDS {
                rows[source].support_note = text::note(&mut rng, 30, 40, 0.0);
            }
            rows[target].support_note =
                text::one_word_swapped(&mut rng, &rows[source].support_note);
        }
        planted.duplicate_notes_exact = n;
        planted.duplicate_notes_near = n;
    }

    if traps.future_feature > 0 {
        let mut rng = stream(seed, Stream::FutureFeature);
        let targets = claimed.take(
            rows,
            &mut rng,
            traps.future_feature,
            Pool::Any,
            "--trap-future-feature",
        )?;
        for &target in &targets {
            let row = &mut rows[target];
            row.tickets_as_of = row.label_date().add_days(rng.random_range(1..=30));
            if row.churned {
                // The tickets a churner files while leaving, counted after the label was set.
                row.tickets_this_month += 2 + poisson(&mut rng, 2.0);
            }
        }
        planted.future_feature = targets.len();
    }

    if traps.missing_new_accounts > 0 {
        // Before the label proxy, which copies the labels this trap redraws.
        let mut rng = stream(seed, Stream::MissingNewAccounts);
        let targets = claimed.take(
            rows,
            &mut rng,
            traps.missing_new_accounts,
            Pool::Any,
            "--trap-missing-new-accounts",
        )?;
        for &target in &targets {
            let row = &mut rows[target];
            let tenure = rng.random_range(0..NEW_ACCOUNT_DAYS);
            // The base label model, with this tenure in place of the old one.
            let mut logit = row.churn_logit
                - TENURE_LOGIT * (f64::from(tenure).ln_1p() - f64::from(row.tenure_days).ln_1p());
            row.tenure_days = tenure;
            if rng.random_bool(NOT_ACTIVATED_SHARE) {
                // Logins the account never made do not drive its churn; not being activated does.
                row.logins_missing = true;
                logit += LOGINS_LOGIT * (f64::from(row.logins_30d).ln_1p() - LOGINS_CENTRE)
                    + NOT_ACTIVATED_LOGIT;
                planted.missing_logins += 1;
            }
            row.churn_logit = logit;
            row.churned = rng.random_bool(sigmoid(logit));
        }
        planted.missing_new_accounts = targets.len();
    }

    if traps.label_proxy {
        let mut rng = stream(seed, Stream::LabelProxy);
        for row in rows.iter_mut() {
            let flipped = rng.random_bool(PROXY_FLIP_RATE);
            row.account_closed = row.churned != flipped;
            planted.label_proxy_flipped += usize::from(flipped);
        }
        planted.label_proxy = true;
    }

    if traps.bad_rows > 0 {
        let mut rng = stream(seed, Stream::BadRows);
        let targets = claimed.take(rows, &mut rng, traps.bad_rows, Pool::Any, "--bad-rows")?;
        for (index, &target) in targets.iter().enumerate() {
            let row = &mut rows[target];
            row.monthly_spend = Spend::Bad(if index % 2 == 0 {
                "n/a".to_string()
            } else {
                row.monthly_spend.text().replace('.', ",")
            });
        }
        planted.bad_rows = targets.len();
    }
    Ok(planted)
}

/// The rows a trap may pick from.
#[derive(Debug, Clone, Copy)]
enum Pool {
    Any,
    /// Signed up before EARLY_BEFORE.
    Early,
    /// Signed up on or after LATE_FROM.
    Late,
}

impl Pool {
    fn contains(self, row: &Row) -> bool {
        match self {
            Pool::Any => true,
            Pool::Early => row.signup_date < EARLY_BEFORE,
            Pool::Late => row.signup_date >= LATE_FROM,
        }
    }

    fn describe(self) -> String {
        match self {
            Pool::Any => "rows".to_string(),
            Pool::Early => format!("rows with signup_date < {EARLY_BEFORE}"),
            Pool::Late => format!("rows with signup_date >= {LATE_FROM}"),
        }
    }
}

/// Rows already used by a trap.
#[derive(Debug)]
struct Claims {
    claimed: Vec<bool>,
}

impl Claims {
    fn new(rows: usize) -> Claims {
        Claims {
            claimed: vec![false; rows],
        }
    }

    /// `n` unclaimed rows of `pool`, in random order, now claimed.
    fn take(
        &mut self,
        rows: &[Row],
        rng: &mut ChaCha8Rng,
        n: usize,
        pool: Pool,
        flag: &str,
    ) -> Result<Vec<usize>, InputError> {
        let mut candidates: Vec<usize> = (0..rows.len())
            .filter(|&i| !self.claimed[i] && pool.contains(&rows[i]))
            .collect();
        if candidates.len() < n {
            return Err(InputError::field(
                flag,
                format!(
                    "needs {n} {} that no other trap uses, but only {} are left; raise --rows \
                     or plant fewer",
                    pool.describe(),
                    candidates.len()
                ),
            ));
        }
        for i in 0..n {
            let j = rng.random_range(i..candidates.len());
            candidates.swap(i, j);
        }
        candidates.truncate(n);
        for &i in &candidates {
            self.claimed[i] = true;
        }
        Ok(candidates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::tests::{auc, sample};
    use crate::text::tests::{jaccard_5grams, normalized};
    use std::collections::{HashMap, HashSet};

    const ALL: Traps = Traps {
        future_feature: 150,
        label_proxy: true,
        entity_overlap: 120,
        duplicate_notes: 90,
        exact_duplicates: 110,
        bad_rows: 70,
        missing_new_accounts: 400,
    };

    fn planted_sample() -> (Vec<Row>, Planted) {
        let mut rows = sample()[..20_000].to_vec();
        let planted = plant(&mut rows, &ALL, 7).unwrap();
        (rows, planted)
    }

    #[test]
    fn reports_exact_counts() {
        let (_, planted) = planted_sample();
        assert_eq!(
            planted,
            Planted {
                future_feature: 150,
                label_proxy: true,
                label_proxy_flipped: planted.label_proxy_flipped,
                entity_overlap: 120,
                duplicate_notes_exact: 90,
                duplicate_notes_near: 90,
                exact_duplicates: 110,
                bad_rows: 70,
                missing_new_accounts: 400,
                missing_logins: planted.missing_logins,
            }
        );
        assert!((10..=80).contains(&planted.label_proxy_flipped));
        assert!((160..=240).contains(&planted.missing_logins));
    }

    #[test]
    fn future_feature_rows_were_counted_after_the_label() {
        let (rows, _) = planted_sample();
        let late: Vec<&Row> = rows
            .iter()
            .filter(|r| r.tickets_as_of > r.label_date())
            .collect();
        assert_eq!(late.len(), 150);
        for row in &late {
            let days = row.tickets_as_of.days_since(row.label_date());
            assert!((1..=30).contains(&days));
        }
        let mean = |churned: bool| {
            let picked: Vec<f64> = late
                .iter()
                .filter(|r| r.churned == churned)
                .map(|r| f64::from(r.tickets_this_month))
                .collect();
            picked.iter().sum::<f64>() / picked.len() as f64
        };
        assert!(mean(true) > mean(false) + 2.0);
    }

    #[test]
    fn label_proxy_alone_predicts_the_label() {
        let (rows, planted) = planted_sample();
        let scores: Vec<f64> = rows
            .iter()
            .map(|r| f64::from(u8::from(r.account_closed)))
            .collect();
        let labels: Vec<bool> = rows.iter().map(|r| r.churned).collect();
        assert!(auc(&scores, &labels) >= 0.99);
        let disagree = rows
            .iter()
            .filter(|r| r.account_closed != r.churned)
            .count();
        assert_eq!(disagree, planted.label_proxy_flipped);
    }

    #[test]
    fn overlapping_customers_span_two_time_splits() {
        let (rows, _) = planted_sample();
        let mut by_id: HashMap<u32, Vec<&Row>> = HashMap::new();
        for row in &rows {
            by_id.entry(row.customer_id).or_default().push(row);
        }
        let repeated: Vec<&Vec<&Row>> = by_id.values().filter(|v| v.len() > 1).collect();
        assert_eq!(repeated.len(), 120);
        for pair in repeated {
            assert_eq!(pair.len(), 2);
            let (first, second) = (
                pair[0].signup_date.min(pair[1].signup_date),
                pair[0].signup_date.max(pair[1].signup_date),
            );
            assert!(first < EARLY_BEFORE);
            assert!(second >= LATE_FROM);
        }
    }

    #[test]
    fn duplicate_notes_cross_from_early_to_late_rows() {
        let (rows, _) = planted_sample();
        let early: Vec<&Row> = rows
            .iter()
            .filter(|r| r.signup_date < EARLY_BEFORE)
            .collect();
        let early_exact: HashSet<&str> = early.iter().map(|r| r.support_note.as_str()).collect();
        let early_normalized: HashSet<String> =
            early.iter().map(|r| normalized(&r.support_note)).collect();
        let late: Vec<&Row> = rows.iter().filter(|r| r.signup_date >= LATE_FROM).collect();
        // Exact-duplicate rows copy the note byte for byte; restyled notes differ in bytes only.
        let restyled = late
            .iter()
            .filter(|r| early_normalized.contains(&normalized(&r.support_note)))
            .filter(|r| !early_exact.contains(r.support_note.as_str()))
            .count();
        assert_eq!(restyled, 90);
        let base_notes: HashSet<&str> = sample()[..20_000]
            .iter()
            .map(|r| r.support_note.as_str())
            .collect();
        let near: Vec<&Row> = late
            .iter()
            .filter(|r| !base_notes.contains(r.support_note.as_str()))
            .filter(|r| !early_normalized.contains(&normalized(&r.support_note)))
            .copied()
            .collect();
        assert_eq!(near.len(), 90, "near-duplicate notes");
        for row in near {
            let words: Vec<&str> = row.support_note.split(' ').collect();
            let source = early
                .iter()
                .find(|e| {
                    let theirs: Vec<&str> = e.support_note.split(' ').collect();
                    theirs.len() == words.len()
                        && theirs.iter().zip(&words).filter(|(a, b)| a != b).count() == 1
                })
                .unwrap_or_else(|| panic!("no early note one word away: {}", row.support_note));
            assert!(source.support_note.split(' ').count() >= NEAR_SOURCE_MIN_WORDS);
            let j = jaccard_5grams(&source.support_note, &row.support_note);
            assert!(j >= 0.8, "Jaccard {j}: {}", row.support_note);
        }
    }

    #[test]
    fn exact_duplicates_copy_every_feature_but_keep_id_dates_and_label() {
        let (rows, _) = planted_sample();
        let features = |r: &Row| {
            (
                r.region,
                r.tier,
                r.tenure_days,
                r.monthly_spend.clone(),
                r.support_tickets,
                r.logins_30d,
                r.tickets_this_month,
                r.support_note.clone(),
            )
        };
        let early: HashSet<_> = rows
            .iter()
            .filter(|r| r.signup_date < EARLY_BEFORE)
            .map(features)
            .collect();
        let copies: Vec<&Row> = rows
            .iter()
            .filter(|r| r.signup_date >= LATE_FROM && early.contains(&features(r)))
            .collect();
        assert_eq!(copies.len(), 110);
        let ids: HashSet<u32> = rows
            .iter()
            .filter(|r| r.signup_date < EARLY_BEFORE)
            .map(|r| r.customer_id)
            .collect();
        assert!(copies.iter().all(|r| !ids.contains(&r.customer_id)));
    }

    #[test]
    fn bad_rows_hold_unparseable_spend() {
        let (rows, _) = planted_sample();
        let bad: Vec<String> = rows
            .iter()
            .map(|r| r.monthly_spend.text())
            .filter(|t| t.parse::<f64>().is_err())
            .collect();
        assert_eq!(bad.len(), 70);
        assert!(bad.iter().any(|t| t == "n/a"));
        assert!(bad.iter().any(|t| t.contains(',')));
    }

    #[test]
    fn only_trap_rows_change() {
        let (rows, _) = planted_sample();
        let changed = (0..rows.len())
            .filter(|&i| {
                // The label proxy fills account_closed on every row; other columns count here.
                let mut row = rows[i].clone();
                row.account_closed = row.churned;
                row != sample()[i]
            })
            .count();
        // One changed row per planted row, plus near-duplicate sources given a longer note.
        let planted = 120 + 110 + 2 * 90 + 150 + 70 + 400;
        assert!(
            (planted..=planted + 90).contains(&changed),
            "{changed} rows changed"
        );
    }

    #[test]
    fn logins_are_missing_only_for_new_accounts_and_the_missing_ones_churn_more() {
        let base = &sample()[..20_000];
        let mut rows = base.to_vec();
        let traps = Traps {
            missing_new_accounts: 2000,
            ..Traps::default()
        };
        let planted = plant(&mut rows, &traps, 7).unwrap();
        assert_eq!(planted.missing_new_accounts, 2000);
        assert!(
            (900..=1100).contains(&planted.missing_logins),
            "{planted:?}"
        );
        let changed: Vec<&Row> = (0..rows.len())
            .filter(|&i| rows[i] != base[i])
            .map(|i| &rows[i])
            .collect();
        assert!(
            changed.len() > 1950 && changed.len() <= 2000,
            "{}",
            changed.len()
        );
        assert!(changed.iter().all(|r| r.tenure_bucket() == "<30d"));
        let missing: Vec<&Row> = rows.iter().filter(|r| r.logins_missing).collect();
        assert_eq!(missing.len(), planted.missing_logins);
        assert!(missing.iter().all(|r| r.tenure_bucket() == "<30d"));
        let rate =
            |rows: &[&Row]| rows.iter().filter(|r| r.churned).count() as f64 / rows.len() as f64;
        let activated: Vec<&Row> = changed
            .iter()
            .filter(|r| !r.logins_missing)
            .copied()
            .collect();
        let (missing_rate, activated_rate) = (rate(&missing), rate(&activated));
        assert!(
            missing_rate > activated_rate + 0.2,
            "missing {missing_rate:.3} vs activated new accounts {activated_rate:.3}"
        );
    }

    #[test]
    fn too_many_trap_rows_name_the_flag() {
        let mut rows = sample()[..1000].to_vec();
        let traps = Traps {
            exact_duplicates: 900,
            ..Traps::default()
        };
        let err = plant(&mut rows, &traps, 7).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--trap-exact-duplicates: needs 900"),
            "{err}"
        );
    }
}
