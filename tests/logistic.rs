//! A small, fast model for simulations of the gate: L2-regularised logistic regression fitted by
//! Newton's method on a table read from CSV. runfn's own MLP takes seconds to train; a simulation
//! of many nights needs hundreds of fits, and what it tests is the gate, not the model.

use std::collections::BTreeMap;
use std::path::Path;

/// One column of a table: numbers (empty fields are `None`) or text.
#[derive(Debug, Clone)]
pub enum Values {
    Numbers(Vec<Option<f64>>),
    Text(Vec<String>),
}

/// A table read from CSV: a binary label and the other columns, typed by their values.
#[derive(Debug, Clone)]
pub struct Table {
    pub labels: Vec<bool>,
    /// In file order, the label's column left out.
    pub columns: Vec<(String, Values)>,
}

impl Table {
    /// Reads `paths` (one table split over files with the same header) with `label` (0/1) as the
    /// label. A column whose non-empty fields all parse as numbers is numeric; any other is text.
    pub fn read(paths: &[&Path], label: &str) -> Table {
        let mut header: Option<csv::StringRecord> = None;
        let mut records = Vec::new();
        for path in paths {
            let mut reader =
                csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let this = reader.headers().expect("a header").clone();
            if let Some(first) = &header {
                assert_eq!(first, &this, "{}: another header", path.display());
            }
            header = Some(this);
            for record in reader.records() {
                records.push(record.unwrap_or_else(|e| panic!("{}: {e}", path.display())));
            }
        }
        let header = header.expect("at least one file");
        let at = header
            .iter()
            .position(|h| h == label)
            .unwrap_or_else(|| panic!("no label column {label}"));
        let labels = records
            .iter()
            .map(|r| match &r[at] {
                "1" => true,
                "0" => false,
                other => panic!("label {label} is {other:?}, not 0 or 1"),
            })
            .collect();
        let columns = header
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != at)
            .map(|(i, name)| {
                let fields: Vec<&str> = records.iter().map(|r| &r[i]).collect();
                let numbers: Option<Vec<Option<f64>>> = fields
                    .iter()
                    .map(|f| match f.trim() {
                        "" => Some(None),
                        t => t.parse::<f64>().ok().filter(|v| v.is_finite()).map(Some),
                    })
                    .collect();
                let values = match numbers {
                    Some(numbers) => Values::Numbers(numbers),
                    None => Values::Text(fields.iter().map(|f| f.to_string()).collect()),
                };
                (name.to_string(), values)
            })
            .collect();
        Table { labels, columns }
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn column(&self, name: &str) -> &Values {
        self.columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no column {name}"))
    }

    /// A column's values as text (a slice's values, as the per-row scores file holds them).
    pub fn text(&self, name: &str, rows: &[usize]) -> Vec<String> {
        match self.column(name) {
            Values::Text(values) => rows.iter().map(|&r| values[r].clone()).collect(),
            Values::Numbers(values) => rows
                .iter()
                .map(|&r| values[r].map_or(String::new(), |v| v.to_string()))
                .collect(),
        }
    }
}

/// Which columns a model sees, and which numeric ones also get a "was empty" indicator.
#[derive(Debug, Clone, PartialEq)]
pub struct Design {
    pub columns: Vec<String>,
    pub indicators: Vec<String>,
}

impl Design {
    /// Every column of `table` but those named in `leave_out`.
    pub fn all_but(table: &Table, leave_out: &[&str]) -> Design {
        Design {
            columns: table
                .columns
                .iter()
                .map(|(n, _)| n.clone())
                .filter(|n| !leave_out.contains(&n.as_str()))
                .collect(),
            indicators: Vec::new(),
        }
    }

    pub fn without(&self, column: &str) -> Design {
        Design {
            columns: self
                .columns
                .iter()
                .filter(|c| *c != column)
                .cloned()
                .collect(),
            indicators: self
                .indicators
                .iter()
                .filter(|c| *c != column)
                .cloned()
                .collect(),
        }
    }
}

/// How one column becomes features, learned from the training rows.
#[derive(Debug, Clone)]
enum Encoding {
    /// Empty fields take the training mean; with `indicator`, a 0/1 feature says it was empty.
    Number {
        column: usize,
        mean: f64,
        indicator: bool,
    },
    /// One feature per category seen in training; an unseen one sets none.
    OneHot {
        column: usize,
        categories: BTreeMap<String, usize>,
    },
}

/// A fitted model: the encoding, each feature's standardisation, and the weights.
#[derive(Debug, Clone)]
pub struct Model {
    encodings: Vec<Encoding>,
    centre: Vec<f64>,
    scale: Vec<f64>,
    /// Intercept first.
    weights: Vec<f64>,
}

/// Ridge penalty on the standardised weights (not the intercept).
const L2: f64 = 1.0;
const NEWTON_STEPS: usize = 25;

impl Model {
    /// Fits on `rows` of `table` (repeats allowed, as in a bootstrap sample).
    pub fn fit(table: &Table, design: &Design, rows: &[usize]) -> Model {
        let encodings = encodings(table, design, rows);
        let raw = raw_features(table, &encodings, rows);
        let width = raw.first().map_or(0, Vec::len);
        let n = rows.len() as f64;
        let mut centre = vec![0.0; width];
        let mut scale = vec![0.0; width];
        for row in &raw {
            for (c, x) in centre.iter_mut().zip(row) {
                *c += x / n;
            }
        }
        for row in &raw {
            for ((s, x), c) in scale.iter_mut().zip(row).zip(&centre) {
                *s += (x - c).powi(2) / n;
            }
        }
        for s in &mut scale {
            *s = if *s > 1e-12 { s.sqrt() } else { 1.0 };
        }
        let x: Vec<Vec<f64>> = raw
            .iter()
            .map(|row| standardised(row, &centre, &scale))
            .collect();
        let y: Vec<f64> = rows
            .iter()
            .map(|&r| f64::from(u8::from(table.labels[r])))
            .collect();
        let weights = newton(&x, &y);
        Model {
            encodings,
            centre,
            scale,
            weights,
        }
    }

    /// The probability of the label for each of `rows`.
    pub fn predict(&self, table: &Table, rows: &[usize]) -> Vec<f64> {
        raw_features(table, &self.encodings, rows)
            .iter()
            .map(|row| {
                let x = standardised(row, &self.centre, &self.scale);
                sigmoid(linear(&self.weights, &x))
            })
            .collect()
    }
}

fn encodings(table: &Table, design: &Design, rows: &[usize]) -> Vec<Encoding> {
    design
        .columns
        .iter()
        .map(|name| {
            let column = table
                .columns
                .iter()
                .position(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("no column {name}"));
            match &table.columns[column].1 {
                Values::Numbers(values) => {
                    let present: Vec<f64> = rows.iter().filter_map(|&r| values[r]).collect();
                    let mean = if present.is_empty() {
                        0.0
                    } else {
                        present.iter().sum::<f64>() / present.len() as f64
                    };
                    Encoding::Number {
                        column,
                        mean,
                        indicator: design.indicators.contains(name),
                    }
                }
                Values::Text(values) => {
                    let mut categories = BTreeMap::new();
                    for &r in rows {
                        let next = categories.len();
                        categories.entry(values[r].clone()).or_insert(next);
                    }
                    Encoding::OneHot { column, categories }
                }
            }
        })
        .collect()
}

fn raw_features(table: &Table, encodings: &[Encoding], rows: &[usize]) -> Vec<Vec<f64>> {
    rows.iter()
        .map(|&r| {
            let mut features = Vec::new();
            for encoding in encodings {
                match encoding {
                    Encoding::Number {
                        column,
                        mean,
                        indicator,
                    } => {
                        let Values::Numbers(values) = &table.columns[*column].1 else {
                            unreachable!("encoded as a number")
                        };
                        features.push(values[r].unwrap_or(*mean));
                        if *indicator {
                            features.push(f64::from(u8::from(values[r].is_none())));
                        }
                    }
                    Encoding::OneHot { column, categories } => {
                        let Values::Text(values) = &table.columns[*column].1 else {
                            unreachable!("encoded as text")
                        };
                        let start = features.len();
                        features.resize(start + categories.len(), 0.0);
                        if let Some(&i) = categories.get(&values[r]) {
                            features[start + i] = 1.0;
                        }
                    }
                }
            }
            features
        })
        .collect()
}

fn standardised(row: &[f64], centre: &[f64], scale: &[f64]) -> Vec<f64> {
    row.iter()
        .zip(centre)
        .zip(scale)
        .map(|((x, c), s)| (x - c) / s)
        .collect()
}

fn linear(weights: &[f64], x: &[f64]) -> f64 {
    weights[0] + weights[1..].iter().zip(x).map(|(w, x)| w * x).sum::<f64>()
}

fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// Minimises the mean log loss plus L2/2n·|w|² (the intercept unpenalised) by Newton's method:
/// the problem is strictly convex, so a few full steps converge.
fn newton(x: &[Vec<f64>], y: &[f64]) -> Vec<f64> {
    let d = x.first().map_or(0, Vec::len) + 1;
    let mut w = vec![0.0; d];
    for _ in 0..NEWTON_STEPS {
        let mut gradient = vec![0.0; d];
        let mut hessian = vec![0.0; d * d];
        let mut z = vec![1.0; d];
        for (row, &target) in x.iter().zip(y) {
            z[1..].copy_from_slice(row);
            let p = sigmoid(linear(&w, row));
            let curvature = p * (1.0 - p);
            for (i, (g, &zi)) in gradient.iter_mut().zip(&z).enumerate() {
                *g += (p - target) * zi;
                let weight = zi * curvature;
                let lower = &mut hessian[i * d..=i * d + i];
                for (h, zj) in lower.iter_mut().zip(&z) {
                    *h += weight * zj;
                }
            }
        }
        for i in 1..d {
            gradient[i] += L2 * w[i];
            hessian[i * d + i] += L2;
        }
        let step = cholesky_solve(&mut hessian, &gradient, d);
        let mut largest = 0.0f64;
        for (wi, si) in w.iter_mut().zip(&step) {
            *wi -= si;
            largest = largest.max(si.abs());
        }
        if largest < 1e-6 {
            break;
        }
    }
    w
}

/// Solves `a · x = b` for a symmetric positive-definite `a` (its lower triangle, row-major),
/// overwriting `a` with its Cholesky factor.
fn cholesky_solve(a: &mut [f64], b: &[f64], d: usize) -> Vec<f64> {
    for j in 0..d {
        let mut diagonal = a[j * d + j];
        for k in 0..j {
            diagonal -= a[j * d + k] * a[j * d + k];
        }
        let root = diagonal.max(1e-12).sqrt();
        a[j * d + j] = root;
        for i in j + 1..d {
            let mut value = a[i * d + j];
            for k in 0..j {
                value -= a[i * d + k] * a[j * d + k];
            }
            a[i * d + j] = value / root;
        }
    }
    let mut z = vec![0.0; d];
    for i in 0..d {
        let mut value = b[i];
        for k in 0..i {
            value -= a[i * d + k] * z[k];
        }
        z[i] = value / a[i * d + i];
    }
    let mut x = vec![0.0; d];
    for i in (0..d).rev() {
        let mut value = z[i];
        for k in i + 1..d {
            value -= a[k * d + i] * x[k];
        }
        x[i] = value / a[i * d + i];
    }
    x
}

/// ROC AUC with ties counted half (the Mann-Whitney statistic), or `None` with one class.
pub fn auc(scores: &[f64], labels: &[bool]) -> Option<f64> {
    let positives = labels.iter().filter(|&&l| l).count();
    let negatives = labels.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&i, &j| scores[i].total_cmp(&scores[j]));
    let mut rank_sum = 0.0;
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && scores[order[end]] == scores[order[start]] {
            end += 1;
        }
        let midrank = (start + end + 1) as f64 / 2.0;
        rank_sum += midrank * order[start..end].iter().filter(|&&i| labels[i]).count() as f64;
        start = end;
    }
    let (m, n) = (positives as f64, negatives as f64);
    Some((rank_sum - m * (m + 1.0) / 2.0) / (m * n))
}

/// SplitMix64: a seeded stream, so each simulated night draws the same rows on every run.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }

    /// `count` of `items` without repeats.
    pub fn sample(&mut self, items: &[usize], count: usize) -> Vec<usize> {
        let mut copy = items.to_vec();
        self.shuffle(&mut copy);
        copy.truncate(count);
        copy
    }

    /// As many draws from `items` as it holds, with repeats.
    pub fn bootstrap(&mut self, items: &[usize]) -> Vec<usize> {
        (0..items.len())
            .map(|_| items[self.below(items.len())])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_counts_ties_half() {
        assert_eq!(
            auc(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true]),
            Some(0.75)
        );
        assert_eq!(auc(&[0.5, 0.5], &[false, true]), Some(0.5));
        assert_eq!(auc(&[0.5, 0.7], &[true, true]), None);
    }
}
