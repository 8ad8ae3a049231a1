//! Split expressions from `manifest.data.splits`, and the split each row belongs to.
//!
//! Forms (dates as `YYYY-MM-DD`, months as `YYYY-MM`):
//! - `<column> < 2026-08-01` (also `<=`, `>`, `>=`; a date, timestamp or number on the right);
//! - a bare period of `manifest.data.time`: `2026-08` (that month), `2026-08-01` (that day),
//!   `2026-08-01..2026-08-15` or `2026-07..2026-08` (both ends included);
//! - entity-hash fractions for data without time: `hash(customer_id) < 0.8`,
//!   `hash(customer_id) >= 0.9`, `0.8 <= hash(customer_id) < 0.9`;
//! - a column's own values: `split == test`, `region != east`, `region in (north, "south west")`
//!   (strings bare or quoted, numbers, dates, `true`/`false`; a null matches none of these);
//!   quotes are read before operators, so `region != "a==b"` works, and a column's name with a
//!   space goes in quotes or backticks: `` `home region` == north ``;
//! - rolling windows over `manifest.data.time`, counted back from the snapshot's latest time:
//!   `last 1 month`, `1 month before test`, `before val` (see [`crate::rolling`]).

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::compute::kernels::cast_utils::Parser;
use arrow::datatypes::{DataType, Date32Type, Int64Type, TimestampMicrosecondType};

use crate::error::DataError;
use crate::rolling::{Rolling, check_time_column, format_point};
use crate::rule_tokens::{Op, Token, tokenize};
use crate::short_hash::{ShortHashes, prefix_of};
use crate::types::ColumnType;
use crate::values::numeric_values;

const MICROS_PER_DAY: f64 = 86_400_000_000.0;

#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    pub name: String,
    pub rule: String,
    condition: Condition,
    /// For a rolling window, what it was resolved against.
    pub window: Option<Window>,
}

/// A rolling window resolved against one snapshot: its time column, the latest time value it
/// counts back from, and the column's type (how its bounds are written).
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub column: String,
    pub anchor: f64,
    pub column_type: ColumnType,
}

/// A rolling split as it was resolved, for the record (`shards.splits_resolved`): the rule,
/// the fixed rule it became, and its bounds written as the column's values.
pub use runfn_schema::record::ResolvedSplit;

#[derive(Debug, Clone, PartialEq)]
enum Condition {
    /// `lower <= value < upper` (each side optional, inclusive as given) over the column's values,
    /// temporal values in microseconds since the epoch.
    Range {
        column: String,
        lower: Option<(f64, bool)>,
        upper: Option<(f64, bool)>,
        /// Whether a bound was written as a plain number (not a date or timestamp): on a date
        /// column it would be compared with microseconds since 1970.
        numbers: bool,
    },
    /// `lower <= hash(column) < upper`.
    Hash {
        column: String,
        lower: f64,
        upper: f64,
    },
    /// `column == v`, `column in (v, ...)`, or with `negate` `column != v`. Literals are read as
    /// written until the column's type is known, then resolved once.
    Member {
        column: String,
        literals: Vec<Literal>,
        values: Members,
        negate: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
struct Literal {
    text: String,
    quoted: bool,
}

/// The values a `Member` rule matches, in the column's own terms.
#[derive(Debug, Clone, PartialEq)]
enum Members {
    Unresolved,
    /// String and boolean columns, compared as text.
    Text(Vec<String>),
    /// Numeric and temporal columns (temporal in microseconds), compared as numbers.
    Numbers(Vec<f64>),
}

/// The splits of a manifest, checked against the snapshot's columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Splits {
    pub splits: Vec<Split>,
}

/// Where rows fall: one split index per row, or `None` for a row in no split.
pub type Assignment = Vec<Option<u8>>;

/// A row that two splits both claim.
#[derive(Debug, Clone, PartialEq)]
pub struct Overlap {
    pub row: usize,
    pub first: String,
    pub second: String,
}

impl Splits {
    /// Parses `(name, rule)` pairs; `time` is `manifest.data.time`, `column_type` looks up columns.
    /// Rolling windows are refused here: they need the snapshot's latest time ([`Splits::parse_at`]).
    pub fn parse(
        rules: &[(String, String)],
        time: Option<&str>,
        column_type: impl Fn(&str) -> Option<ColumnType>,
    ) -> Result<Splits, DataError> {
        Splits::parse_at(rules, time, column_type, None)
    }

    /// Like [`Splits::parse`], with rolling windows counted back from `anchor`, the latest value
    /// of the time column (see [`crate::rolling::latest_time`]).
    pub fn parse_at(
        rules: &[(String, String)],
        time: Option<&str>,
        column_type: impl Fn(&str) -> Option<ColumnType>,
        anchor: Option<f64>,
    ) -> Result<Splits, DataError> {
        if rules.len() > u8::MAX as usize {
            return Err(DataError::Other("too many splits (at most 255)".into()));
        }
        let mut splits: Vec<Split> = Vec::new();
        let mut rolling: Vec<(usize, Rolling)> = Vec::new();
        for (name, rule) in rules {
            let field = format!("manifest.data.splits.{name}");
            check_name(name)
                .map_err(|message| DataError::Other(format!("split `{name}`: {message}")))?;
            // Two rules of one name would write one folder and one index entry: the rows of the
            // first would land nowhere, uncounted.
            if let Some(other) = splits.iter().find(|s| s.name.eq_ignore_ascii_case(name)) {
                let message = if other.name == *name {
                    format!(
                        "split `{name}` is given twice (`{}` and `{rule}`); each split needs its own name",
                        other.rule
                    )
                } else {
                    format!(
                        "splits `{}` and `{name}` differ only in case, so their folders collide on many file systems",
                        other.name
                    )
                };
                return Err(DataError::Other(message));
            }
            if let Some(window) = Rolling::parse(rule) {
                let window = window
                    .map_err(|message| DataError::Other(format!("{field}: `{rule}`: {message}")))?;
                rolling.push((splits.len(), window));
                // A placeholder until the windows are placed, below.
                splits.push(Split {
                    name: name.clone(),
                    rule: rule.clone(),
                    condition: Condition::Range {
                        column: String::new(),
                        lower: None,
                        upper: None,
                        numbers: false,
                    },
                    window: None,
                });
                continue;
            }
            let mut condition = parse_rule(rule, time)
                .map_err(|message| DataError::Other(format!("{field}: `{rule}`: {message}")))?;
            let column = condition.column();
            let column_type = column_type(column).ok_or_else(|| {
                DataError::Other(format!(
                    "{field}: `{rule}` uses the column `{column}`, which the snapshot does not have"
                ))
            })?;
            if matches!(condition, Condition::Range { .. })
                && !(column_type.is_temporal() || column_type.is_numeric())
            {
                return Err(DataError::Other(format!(
                    "{field}: `{rule}` compares `{column}`, a {} column; it must hold dates, times or numbers",
                    column_type.name()
                )));
            }
            if let Condition::Range { numbers, .. } = &condition
                && column_type.is_temporal() == *numbers
            {
                let (holds, written) = if *numbers {
                    (
                        "dates or times",
                        "a number; write a date such as 2024-01-01",
                    )
                } else {
                    ("numbers", "a date or time")
                };
                return Err(DataError::Other(format!(
                    "{field}: `{rule}`: `{column}` is a {} column holding {holds}, but the rule compares it with {written}",
                    column_type.name()
                )));
            }
            condition
                .resolve(column_type)
                .map_err(|message| DataError::Other(format!("{field}: `{rule}`: {message}")))?;
            splits.push(Split {
                name: name.clone(),
                rule: rule.clone(),
                condition,
                window: None,
            });
        }
        if !rolling.is_empty() {
            place_windows(&mut splits, rolling, time, &column_type, anchor)?;
        }
        Ok(Splits { splits })
    }

    /// Why these splits cannot be used when split `i` holds `rows[i]` rows: a rolling window
    /// that selects nothing. A fixed range may be empty on purpose; a rolling window that selects
    /// nothing means the manifest and the data disagree (a window narrower than the gaps in the
    /// data, a time value far in the future as the anchor).
    pub fn empty_window(&self, rows: &[u64]) -> Option<String> {
        let split = self
            .splits
            .iter()
            .enumerate()
            .find(|(i, split)| split.window.is_some() && rows.get(*i).copied().unwrap_or(0) == 0)?
            .1;
        let bounds = self
            .resolved()
            .into_iter()
            .find(|(name, _)| *name == split.name)
            .map_or(String::new(), |(_, r)| format!(" ({})", r.resolved));
        Some(format!(
            "manifest.data.splits.{}: `{}` selects no rows{bounds}",
            split.name, split.rule
        ))
    }

    /// The rolling splits as resolved (rule, fixed rule, bounds), in manifest order.
    pub fn resolved(&self) -> Vec<(String, ResolvedSplit)> {
        self.splits
            .iter()
            .filter_map(|split| {
                let window = split.window.as_ref()?;
                let Condition::Range {
                    column,
                    lower,
                    upper,
                    ..
                } = &split.condition
                else {
                    return None;
                };
                let point = |v: f64| format_point(v, window.column_type);
                let mut parts = Vec::new();
                if let Some((value, inclusive)) = lower {
                    parts.push(format!(
                        "{column} {} {}",
                        if *inclusive { ">=" } else { ">" },
                        point(*value)
                    ));
                }
                let until = match upper {
                    Some((value, inclusive)) => {
                        parts.push(format!(
                            "{column} {} {}",
                            if *inclusive { "<=" } else { "<" },
                            point(*value)
                        ));
                        point(*value)
                    }
                    None => {
                        parts.push(format!("{column} <= {}", point(window.anchor)));
                        point(window.anchor)
                    }
                };
                Some((
                    split.name.clone(),
                    ResolvedSplit {
                        rule: split.rule.clone(),
                        resolved: parts.join(" and "),
                        column: column.clone(),
                        after: lower.map(|(value, _)| point(value)),
                        until,
                    },
                ))
            })
            .collect()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.splits.iter().map(|s| s.name.as_str())
    }

    /// The split of each row of `batch`. A row in two splits is an error.
    pub fn assign(&self, batch: &RecordBatch) -> Result<Assignment, Overlap> {
        let mut assignment: Assignment = vec![None; batch.num_rows()];
        // `hash(col) < 0.8` and `hash(col) >= 0.8` read the same fractions: hash each value once.
        let mut fractions = EntityFractions::default();
        for (index, split) in self.splits.iter().enumerate() {
            let members = split.condition.evaluate(batch, &mut fractions);
            for (row, member) in members.into_iter().enumerate() {
                if !member {
                    continue;
                }
                if let Some(previous) = assignment[row] {
                    return Err(Overlap {
                        row,
                        first: self.splits[previous as usize].name.clone(),
                        second: split.name.clone(),
                    });
                }
                assignment[row] = Some(index as u8);
            }
        }
        Ok(assignment)
    }

    /// Columns the rules read.
    pub fn columns(&self) -> Vec<&str> {
        self.splits.iter().map(|s| s.condition.column()).collect()
    }

    /// True when `rules` are all time ranges over `time` (rolling windows included), without
    /// reading the snapshot: the windows' bounds do not matter here, so they are placed against
    /// an arbitrary anchor.
    pub fn ordered_in_time(
        rules: &[(String, String)],
        time: &str,
        column_type: impl Fn(&str) -> Option<ColumnType>,
    ) -> bool {
        Splits::parse_at(rules, Some(time), column_type, Some(0.0))
            .is_ok_and(|s| s.is_time_split(time))
    }

    /// True when every rule is a time range over `time`, so splits have a time order.
    pub fn is_time_split(&self, time: &str) -> bool {
        self.splits
            .iter()
            .all(|s| matches!(&s.condition, Condition::Range { column, .. } if column == time))
    }
}

/// Turns each rolling window into a range of the time column: `last` windows count back from
/// `anchor`; `before` windows end where the split they name starts, so windows are placed in
/// the order they depend on each other (any order in the manifest).
fn place_windows(
    splits: &mut [Split],
    mut pending: Vec<(usize, Rolling)>,
    time: Option<&str>,
    column_type: &impl Fn(&str) -> Option<ColumnType>,
    anchor: Option<f64>,
) -> Result<(), DataError> {
    let field = |split: &Split| format!("manifest.data.splits.{}: `{}`", split.name, split.rule);
    let first = &splits[pending[0].0];
    let Some(time) = time else {
        return Err(DataError::Other(format!(
            "{}: a rolling window needs manifest.data.time to name the time column",
            field(first)
        )));
    };
    let time_type = column_type(time).ok_or_else(|| {
        DataError::Other(format!(
            "{}: the time column `{time}` (manifest.data.time) is not a column of the snapshot",
            field(first)
        ))
    })?;
    check_time_column(time, time_type)
        .map_err(|message| DataError::Other(format!("{}: {message}", field(first))))?;
    let Some(anchor) = anchor else {
        return Err(DataError::Other(format!(
            "{}: the time column `{time}` holds no value to count back from",
            field(first)
        )));
    };
    if let Some(message) = crate::rolling::future_anchor(time, time_type, anchor) {
        return Err(DataError::Other(format!("{}: {message}", field(first))));
    }
    let window = Window {
        column: time.to_string(),
        anchor,
        column_type: time_type,
    };
    while !pending.is_empty() {
        let before = pending.len();
        let mut waiting = Vec::new();
        for (index, rule) in pending {
            // Windows are half-open on the older side, `(start, end]`; one that ends where a
            // split with an inclusive start begins ends just before it, `[start, end)`, so it
            // still holds N whole units (`1 week before test`, test from 2024-03-01: the seven
            // days from 2024-02-23, not six).
            let (lower, upper, lower_inclusive) = match &rule {
                Rolling::Last(span) => (span.before(anchor), None, false),
                Rolling::Before { span, split } => {
                    let Some(other) = splits.iter().find(|s| s.name == *split) else {
                        return Err(DataError::Other(format!(
                            "{}: there is no split `{split}` (splits: {})",
                            field(&splits[index]),
                            splits
                                .iter()
                                .map(|s| s.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )));
                    };
                    let placed = other.window.is_some() || Rolling::parse(&other.rule).is_none();
                    if !placed {
                        waiting.push((index, rule));
                        continue;
                    }
                    let start = match &other.condition {
                        Condition::Range {
                            column,
                            lower: Some(start),
                            ..
                        } if column == time => *start,
                        _ => {
                            return Err(DataError::Other(format!(
                                "{}: `{split}` has no start in time to be placed before (it must be a window or a range of `{time}` with a lower bound)",
                                field(&splits[index])
                            )));
                        }
                    };
                    // The complement of the other split's start, so the two share no row.
                    let end = (start.0, !start.1);
                    match span {
                        Some(span) => (span.before(start.0), Some(end), start.1),
                        None => (None, Some(end), false),
                    }
                }
            };
            let lower = match (&rule, lower) {
                (Rolling::Before { span: None, .. }, _) => None,
                (_, Some(value)) => Some((value, lower_inclusive)),
                (_, None) => {
                    return Err(DataError::Other(format!(
                        "{}: the window reaches before the calendar starts",
                        field(&splits[index])
                    )));
                }
            };
            let split = &mut splits[index];
            split.condition = Condition::Range {
                column: time.to_string(),
                lower,
                upper,
                numbers: false,
            };
            split.window = Some(window.clone());
        }
        if waiting.len() == before {
            let names: Vec<&str> = waiting
                .iter()
                .map(|(i, _)| splits[*i].name.as_str())
                .collect();
            return Err(DataError::Other(format!(
                "manifest.data.splits: the windows of {} are placed before each other in a circle",
                names.join(", ")
            )));
        }
        pending = waiting;
    }
    Ok(())
}

/// A split's name becomes a folder under the shards' output: no separators, no `.`/`..`, nothing
/// hidden.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    if name.starts_with('.') {
        return Err("a name may not start with `.`".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(format!(
            "{c:?} is not allowed in a name (letters, digits, `_`, `-`, `.`), since the name becomes a folder"
        ));
    }
    Ok(())
}

impl Condition {
    fn column(&self) -> &str {
        match self {
            Condition::Range { column, .. }
            | Condition::Hash { column, .. }
            | Condition::Member { column, .. } => column,
        }
    }

    /// Reads a `Member` rule's literals as values of `column_type`; a literal that cannot be one
    /// is a type mismatch.
    fn resolve(&mut self, column_type: ColumnType) -> Result<(), String> {
        let Condition::Member {
            column,
            literals,
            values,
            ..
        } = self
        else {
            return Ok(());
        };
        let mismatch = |literal: &Literal, expected: &str| {
            format!(
                "`{column}` is a {} column, but `{}` is not {expected}",
                column_type.name(),
                literal.text
            )
        };
        *values = match column_type {
            ColumnType::String => Members::Text(literals.iter().map(|l| l.text.clone()).collect()),
            ColumnType::Bool => Members::Text(
                literals
                    .iter()
                    .map(|l| match l.text.to_ascii_lowercase().as_str() {
                        "true" if !l.quoted => Ok("true".to_string()),
                        "false" if !l.quoted => Ok("false".to_string()),
                        _ => Err(mismatch(l, "true or false")),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            ColumnType::Int64 | ColumnType::Float64 => Members::Numbers(
                literals
                    .iter()
                    .map(|l| {
                        l.text
                            .parse::<f64>()
                            .ok()
                            .filter(|v| v.is_finite() && !l.quoted)
                            .ok_or_else(|| mismatch(l, "a number"))
                    })
                    .collect::<Result<_, _>>()?,
            ),
            ColumnType::Date | ColumnType::Timestamp => Members::Numbers(
                literals
                    .iter()
                    .map(|l| {
                        parse_point(&l.text)
                            .filter(|_| l.text.len() >= 10)
                            .ok_or_else(|| mismatch(l, "a date or timestamp"))
                    })
                    .collect::<Result<_, _>>()?,
            ),
        };
        Ok(())
    }

    fn evaluate(&self, batch: &RecordBatch, fractions: &mut EntityFractions) -> Vec<bool> {
        match self {
            Condition::Member {
                column,
                values,
                negate,
                ..
            } => {
                let Some(array) = batch.column_by_name(column) else {
                    return vec![false; batch.num_rows()];
                };
                let matches = |hit: bool| hit != *negate;
                match values {
                    Members::Numbers(wanted) => numeric_values(array)
                        .into_iter()
                        .map(|v| v.is_some_and(|v| matches(wanted.contains(&v))))
                        .collect(),
                    Members::Text(wanted) => match cast(array, &DataType::Utf8) {
                        Ok(text) => {
                            let text = text.as_string::<i32>();
                            (0..text.len())
                                .map(|i| {
                                    text.is_valid(i)
                                        && matches(wanted.iter().any(|w| w == text.value(i)))
                                })
                                .collect()
                        }
                        Err(_) => vec![false; batch.num_rows()],
                    },
                    Members::Unresolved => vec![false; batch.num_rows()],
                }
            }
            Condition::Range {
                column,
                lower,
                upper,
                ..
            } => {
                let Some(values) = batch.column_by_name(column).map(numeric_values) else {
                    return vec![false; batch.num_rows()];
                };
                values
                    .into_iter()
                    .map(|value| {
                        value.is_some_and(|v| {
                            lower
                                .is_none_or(|(l, inclusive)| if inclusive { v >= l } else { v > l })
                                && upper.is_none_or(
                                    |(u, inclusive)| if inclusive { v <= u } else { v < u },
                                )
                        })
                    })
                    .collect()
            }
            Condition::Hash {
                column,
                lower,
                upper,
            } => match batch.column_by_name(column) {
                Some(array) => fractions
                    .of(column, array)
                    .iter()
                    .map(|f| f.is_some_and(|f| f >= *lower && f < *upper))
                    .collect(),
                None => vec![false; batch.num_rows()],
            },
        }
    }
}

/// The position of an entity in [0, 1): the first 8 bytes of blake3 of its text form. The same
/// entity always lands in the same split, on every machine.
pub fn entity_fraction(text: &str) -> f64 {
    fraction_of(prefix_of(text.as_bytes()))
}

fn fraction_of(prefix: u64) -> f64 {
    (prefix >> 11) as f64 / (1u64 << 53) as f64
}

/// One batch's entity fractions by column, each column hashed once however many rules read it.
#[derive(Default)]
struct EntityFractions {
    columns: Vec<(String, Vec<Option<f64>>)>,
}

impl EntityFractions {
    fn of(&mut self, column: &str, array: &ArrayRef) -> &[Option<f64>] {
        let at = match self.columns.iter().position(|(name, _)| name == column) {
            Some(at) => at,
            None => {
                self.columns
                    .push((column.to_string(), entity_fractions(array)));
                self.columns.len() - 1
            }
        };
        &self.columns[at].1
    }
}

/// [`entity_fraction`] of every value, the ids hashed eight at a time (see
/// [`crate::short_hash`]).
fn entity_fractions(array: &ArrayRef) -> Vec<Option<f64>> {
    let mut hashes = ShortHashes::with_capacity(array.len() - array.null_count());
    let valid: Vec<bool> = if let Some(integers) = array.as_primitive_opt::<Int64Type>() {
        // The text form an integer casts to, written on the stack instead of into a new array.
        let mut text = itoa::Buffer::new();
        integers
            .iter()
            .map(|value| value.inspect(|&v| hashes.push(text.format(v).as_bytes())))
            .map(|value| value.is_some())
            .collect()
    } else {
        let Ok(text) = cast(array, &DataType::Utf8) else {
            return vec![None; array.len()];
        };
        text.as_string::<i32>()
            .iter()
            .map(|value| value.inspect(|v| hashes.push(v.as_bytes())).is_some())
            .collect()
    };
    let mut prefixes = hashes.finish().into_iter();
    valid
        .into_iter()
        .map(|valid| valid.then(|| prefixes.next().map(fraction_of)).flatten())
        .collect()
}

/// One rule, tokenised first (see [`crate::rule_tokens`]), then read as a comparison, a list, a
/// hash fraction or a period.
fn parse_rule(rule: &str, time: Option<&str>) -> Result<Condition, String> {
    let tokens = tokenize(rule)?;
    if let Some(at) = tokens
        .windows(2)
        .position(|w| matches!(&w[0], Token::Word(word) if word == "hash") && w[1] == Token::Open)
    {
        return parse_hash(&tokens, at);
    }
    match tokens.as_slice() {
        [column, Token::Op(op), rest @ ..] => comparison(column_name(column)?, *op, rest),
        [column, Token::Word(word), Token::Open, rest @ ..] if word == "in" => {
            in_list(column_name(column)?, rest)
        }
        [Token::Op(_), ..] => Err("`` is not a column name".into()),
        _ => bare_period(rule, &tokens, time),
    }
}

/// The column a rule names left of its operator: a bare word, or any quoted text.
fn column_name(token: &Token) -> Result<String, String> {
    match token {
        Token::Word(word) => Ok(word.clone()),
        Token::Quoted { text, .. } if !text.trim().is_empty() => Ok(text.clone()),
        other => Err(format!("`{}` is not a column name", other.written())),
    }
}

/// A value: a bare word or text in single or double quotes.
fn literal(token: &Token) -> Result<Literal, String> {
    match token {
        Token::Word(word) => Ok(Literal {
            text: word.clone(),
            quoted: false,
        }),
        Token::Quoted { text, quote } if *quote != '`' => Ok(Literal {
            text: text.clone(),
            quoted: true,
        }),
        other => Err(format!("`{}` is not a value (quote it)", other.written())),
    }
}

/// `column OP value`: == and != compare with one value, the others bound a range.
fn comparison(column: String, op: Op, rest: &[Token]) -> Result<Condition, String> {
    let written = || {
        rest.iter()
            .map(Token::written)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let value = match rest {
        [one] => literal(one)?,
        [] => return Err(format!("an empty value after `{}`", op.written())),
        _ if matches!(op, Op::Eq | Op::Ne) => {
            return Err("compare with one value, or write `column in (a, b)`".into());
        }
        _ => {
            return Err(format!(
                "`{}` is not a date, timestamp or number",
                written()
            ));
        }
    };
    let bound = |inclusive: bool| {
        parse_point(&value.text)
            .map(|point| Some((point, inclusive)))
            .ok_or_else(|| format!("`{}` is not a date, timestamp or number", value.text))
    };
    let (lower, upper) = match op {
        Op::Eq | Op::Ne => {
            return Ok(Condition::Member {
                column,
                literals: vec![value],
                values: Members::Unresolved,
                negate: op == Op::Ne,
            });
        }
        Op::Lt => (None, bound(false)?),
        Op::Le => (None, bound(true)?),
        Op::Gt => (bound(false)?, None),
        Op::Ge => (bound(true)?, None),
    };
    Ok(Condition::Range {
        column,
        lower,
        upper,
        numbers: parse_point_is_number(&value.text),
    })
}

/// `column in (a, b, ...)`: `rest` is what follows the `(`.
fn in_list(column: String, rest: &[Token]) -> Result<Condition, String> {
    let Some((Token::Close, inner)) = rest.split_last() else {
        return Err("write `column in (a, b)`".into());
    };
    if inner.is_empty() {
        return Err("the list of values is empty".into());
    }
    let text = || {
        inner
            .iter()
            .map(Token::written)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut literals = Vec::new();
    let mut items = inner.iter().peekable();
    while let Some(token) = items.next() {
        if *token == Token::Comma {
            return Err(format!("an empty value in `{}`", text()));
        }
        literals.push(literal(token)?);
        match items.next() {
            None => {}
            Some(Token::Comma) if items.peek().is_none() => {
                return Err(format!("a trailing `,` in `{}`", text()));
            }
            Some(Token::Comma) => {}
            Some(other) => return Err(format!("expected `,` before `{}`", other.written())),
        }
    }
    Ok(Condition::Member {
        column,
        literals,
        values: Members::Unresolved,
        negate: false,
    })
}

/// `YYYY[-MM[-DD]]` or `START..END` on the time column.
fn bare_period(rule: &str, tokens: &[Token], time: Option<&str>) -> Result<Condition, String> {
    let time = time.ok_or("a bare period needs manifest.data.time to name the time column")?;
    let (start, end) = match tokens {
        [Token::Word(day)] => period(day)?,
        [Token::Word(start), Token::DotDot, Token::Word(end)] => (period(start)?.0, period(end)?.1),
        _ => {
            return Err(format!(
                "`{}` is not a period (YYYY, YYYY-MM or YYYY-MM-DD)",
                rule.trim()
            ));
        }
    };
    if end <= start {
        return Err("the period ends before it starts".into());
    }
    Ok(Condition::Range {
        column: time.to_string(),
        lower: Some((start, true)),
        upper: Some((end, false)),
        numbers: false,
    })
}

/// `[start, end)` in microseconds of a day `YYYY-MM-DD`, a month `YYYY-MM` or a year `YYYY`.
fn period(text: &str) -> Result<(f64, f64), String> {
    let day = |s: &str| {
        Date32Type::parse(s)
            .filter(|_| s.len() == 10)
            .map(|d| d as f64 * MICROS_PER_DAY)
    };
    let bad = || format!("`{text}` is not a period (YYYY, YYYY-MM or YYYY-MM-DD)");
    match text.len() {
        10 => {
            let start = day(text).ok_or_else(bad)?;
            Ok((start, start + MICROS_PER_DAY))
        }
        7 => {
            let (year, month) = text.split_once('-').ok_or_else(bad)?;
            let (year, month): (i32, u32) = (
                year.parse().map_err(|_| bad())?,
                month.parse().map_err(|_| bad())?,
            );
            let start = day(&format!("{year:04}-{month:02}-01")).ok_or_else(bad)?;
            let (next_year, next_month) = if month == 12 {
                (year + 1, 1)
            } else {
                (year, month + 1)
            };
            Ok((
                start,
                day(&format!("{next_year:04}-{next_month:02}-01")).ok_or_else(bad)?,
            ))
        }
        4 => {
            let year: i32 = text.parse().map_err(|_| bad())?;
            Ok((
                day(&format!("{year:04}-01-01")).ok_or_else(bad)?,
                day(&format!("{:04}-01-01", year + 1)).ok_or_else(bad)?,
            ))
        }
        _ => Err(bad()),
    }
}

/// A date (midnight), timestamp or number.
/// Whether `text` is read by [`parse_point`] as a plain number rather than a date or timestamp.
fn parse_point_is_number(text: &str) -> bool {
    let text = text.trim_matches(|c| c == '"' || c == '\'');
    let date = text.len() == 10 && Date32Type::parse(text).is_some();
    let timestamp = text.len() > 10 && TimestampMicrosecondType::parse(text).is_some();
    !(date || timestamp)
}

fn parse_point(text: &str) -> Option<f64> {
    let text = text.trim_matches(|c| c == '"' || c == '\'');
    if text.len() == 10
        && let Some(days) = Date32Type::parse(text)
    {
        return Some(days as f64 * MICROS_PER_DAY);
    }
    if text.len() > 10
        && let Some(micros) = TimestampMicrosecondType::parse(text)
    {
        return Some(micros as f64);
    }
    text.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// `hash(col) < b`, `hash(col) >= a` or `a <= hash(col) < b`; `at` is where `hash` is.
fn parse_hash(tokens: &[Token], at: usize) -> Result<Condition, String> {
    let (column, after) = match &tokens[at + 2..] {
        [Token::Close, ..] => return Err("hash() needs a column".into()),
        [column, Token::Close, after @ ..] => (column_name(column)?, after),
        _ => return Err("unclosed hash(".into()),
    };
    let fraction = |token: &Token| -> Result<f64, String> {
        let text = token.written();
        let value: f64 = match token {
            Token::Word(word) => word.parse().ok(),
            _ => None,
        }
        .ok_or_else(|| format!("`{text}` is not a fraction"))?;
        if (0.0..=1.0).contains(&value) {
            Ok(value)
        } else {
            Err(format!("{value} is not between 0 and 1"))
        }
    };
    let mut lower = 0.0;
    let mut upper = 1.0 + f64::EPSILON;
    let before = &tokens[..at];
    match before {
        [] => {}
        [value, Token::Op(Op::Le)] => lower = fraction(value)?,
        _ => return Err("write `a <= hash(col) < b`".into()),
    }
    match after {
        [] => {}
        [Token::Op(Op::Lt), value] => upper = fraction(value)?,
        [Token::Op(Op::Le), ..] => {
            return Err("use `hash(col) < x`: fractions are half-open".into());
        }
        [Token::Op(Op::Ge), value] if before.is_empty() => lower = fraction(value)?,
        [Token::Op(Op::Ge), _] => return Err("write `a <= hash(col) < b`".into()),
        _ => return Err("expected `< x` or `>= x` after hash(col)".into()),
    }
    if lower >= upper {
        return Err("the fraction range is empty".into());
    }
    Ok(Condition::Hash {
        column,
        lower,
        upper,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Date32Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    fn days(date: &str) -> i32 {
        Date32Type::parse(date).unwrap()
    }

    /// An integer column is hashed from its digits written on the stack: the fractions must be
    /// those of the text arrow's cast gives, or a hash split would move rows between versions.
    #[test]
    fn integer_fractions_are_those_of_their_cast_text() {
        let values: Vec<Option<i64>> = [i64::MIN, -1_000_001, -1, 0, 7, 42, 100_000, i64::MAX]
            .into_iter()
            .map(Some)
            .chain([None])
            .collect();
        let integers: ArrayRef = Arc::new(arrow::array::Int64Array::from(values));
        let text = cast(&integers, &DataType::Utf8).unwrap();
        assert_eq!(entity_fractions(&integers), entity_fractions(&text));
        assert_eq!(entity_fractions(&integers)[4], Some(entity_fraction("7")));
    }

    fn batch(dates: &[&str], ids: &[&str]) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("signup_date", DataType::Date32, true),
            Field::new("id", DataType::Utf8, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Date32Array::from(
                    dates.iter().map(|d| days(d)).collect::<Vec<_>>(),
                )),
                Arc::new(StringArray::from(ids.to_vec())),
            ],
        )
        .unwrap()
    }

    fn types(name: &str) -> Option<ColumnType> {
        match name {
            "signup_date" => Some(ColumnType::Date),
            "id" => Some(ColumnType::String),
            _ => None,
        }
    }

    fn splits(rules: &[(&str, &str)]) -> Result<Splits, DataError> {
        let rules: Vec<(String, String)> = rules
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        Splits::parse(&rules, Some("signup_date"), types)
    }

    /// A number compared with a date column would be compared with microseconds since 1970:
    /// `signup_date < 20240101` is a date in 1970, so every row would land on one side.
    #[test]
    fn a_number_against_a_date_column_is_refused_and_a_date_against_a_number_too() {
        let error = splits(&[
            ("train", "signup_date < 20240101"),
            ("test", "signup_date >= 20240101"),
        ])
        .err()
        .unwrap()
        .to_string();
        assert!(
            error.contains("`signup_date` is a date column holding dates or times, but the rule compares it with a number; write a date such as 2024-01-01"),
            "{error}"
        );
        let numeric = |name: &str| match name {
            "age" => Some(ColumnType::Int64),
            _ => types(name),
        };
        let rules = vec![
            ("train".to_string(), "age < 2024-01-01".to_string()),
            ("test".to_string(), "age >= 40".to_string()),
        ];
        let error = Splits::parse(&rules, Some("signup_date"), numeric)
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("holding numbers, but the rule compares it with a date"),
            "{error}"
        );
        let fine = vec![
            ("train".to_string(), "age < 40".to_string()),
            ("test".to_string(), "signup_date >= 2024-01-01".to_string()),
        ];
        assert!(Splits::parse(&fine, Some("signup_date"), numeric).is_ok());
    }

    #[test]
    fn time_splits_from_the_manifest_example() {
        let s = splits(&[
            ("train", "signup_date < 2026-08-01"),
            ("val", "2026-08"),
            ("test", "2026-09-01..2026-09-15"),
        ])
        .unwrap();
        let b = batch(
            &[
                "2026-07-31",
                "2026-08-01",
                "2026-08-31",
                "2026-09-01",
                "2026-09-15",
                "2026-09-16",
            ],
            &["a"; 6],
        );
        assert_eq!(
            s.assign(&b).unwrap(),
            vec![Some(0), Some(1), Some(1), Some(2), Some(2), None]
        );
        assert!(s.is_time_split("signup_date"));
    }

    #[test]
    fn months_years_and_comparisons() {
        let s = splits(&[
            ("a", "2025"),
            ("b", "2026-01..2026-02"),
            ("c", "signup_date >= 2026-03-01"),
        ])
        .unwrap();
        let b = batch(
            &["2025-12-31", "2026-01-01", "2026-02-28", "2026-03-01"],
            &["a"; 4],
        );
        assert_eq!(
            s.assign(&b).unwrap(),
            vec![Some(0), Some(1), Some(1), Some(2)]
        );
    }

    #[test]
    fn entity_hash_fractions_partition_by_entity() {
        let s = splits(&[
            ("train", "hash(id) < 0.8"),
            ("val", "0.8 <= hash(id) < 0.9"),
            ("test", "hash(id) >= 0.9"),
        ])
        .unwrap();
        let ids: Vec<String> = (0..10_000).map(|i| format!("C{i:07}")).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let b = batch(&vec!["2026-01-01"; refs.len()], &refs);
        let assignment = s.assign(&b).unwrap();
        assert!(assignment.iter().all(Option::is_some));
        let train = assignment.iter().filter(|a| **a == Some(0)).count() as f64 / 10_000.0;
        assert!((train - 0.8).abs() < 0.02, "{train}");
        assert!(!s.is_time_split("signup_date"));
    }

    #[test]
    fn overlapping_rules_name_the_row_and_splits() {
        let s = splits(&[("train", "signup_date < 2026-08-15"), ("val", "2026-08")]).unwrap();
        let overlap = s
            .assign(&batch(&["2026-07-01", "2026-08-02"], &["a", "b"]))
            .unwrap_err();
        assert_eq!(
            overlap,
            Overlap {
                row: 1,
                first: "train".into(),
                second: "val".into()
            }
        );
    }

    #[test]
    fn duplicate_and_unsafe_names_are_refused() {
        let err = splits(&[("train", "2025"), ("test", "2026-08"), ("train", "2026-01")])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "split `train` is given twice (`2025` and `2026-01`); each split needs its own name"
        );
        let err = splits(&[("train", "2025"), ("Train", "2026")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("differ only in case"), "{err}");
        for name in ["", "../x", "a/b", ".hidden", "a b"] {
            assert!(splits(&[(name, "2025")]).is_err(), "{name:?}");
        }
        assert!(splits(&[("train_v2.1-a", "2025")]).is_ok());
    }

    #[test]
    fn bad_rules_are_explained() {
        let err = splits(&[("train", "created_at < 2026-08-01")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("uses the column `created_at`, which the snapshot does not have"),
            "{err}"
        );
        let err = splits(&[("train", "id < 2026-08-01")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("a string column"), "{err}");
        let err = splits(&[("val", "2026-13")]).unwrap_err().to_string();
        assert!(err.contains("is not a period"), "{err}");
        let err = splits(&[("val", "hash(id) < 1.5")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not between 0 and 1"), "{err}");
        let no_time = Splits::parse(&[("val".into(), "2026-08".into())], None, types)
            .unwrap_err()
            .to_string();
        assert!(no_time.contains("needs manifest.data.time"), "{no_time}");
    }

    fn labelled() -> RecordBatch {
        use arrow::array::{BooleanArray, Int64Array};
        let schema = Schema::new(vec![
            Field::new("split", DataType::Utf8, true),
            Field::new("region", DataType::Utf8, true),
            Field::new("year", DataType::Int64, true),
            Field::new("flag", DataType::Boolean, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(StringArray::from(vec![
                    Some("train"),
                    Some("test"),
                    Some("train"),
                    None,
                    Some("val"),
                ])),
                Arc::new(StringArray::from(vec![
                    Some("north"),
                    Some("east"),
                    Some("south west"),
                    Some("east"),
                    None,
                ])),
                Arc::new(Int64Array::from(vec![2024, 2025, 2026, 2025, 2024])),
                Arc::new(BooleanArray::from(vec![true, false, true, true, false])),
            ],
        )
        .unwrap()
    }

    fn labelled_types(name: &str) -> Option<ColumnType> {
        match name {
            "split" | "region" => Some(ColumnType::String),
            "year" => Some(ColumnType::Int64),
            "flag" => Some(ColumnType::Bool),
            _ => None,
        }
    }

    fn on_columns(rules: &[(&str, &str)]) -> Result<Splits, DataError> {
        let rules: Vec<(String, String)> = rules
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        Splits::parse(&rules, None, labelled_types)
    }

    #[test]
    fn rules_on_a_column_of_labels() {
        let s = on_columns(&[("train", "split == train"), ("test", "split == 'test'")]).unwrap();
        assert_eq!(
            s.assign(&labelled()).unwrap(),
            vec![Some(0), Some(1), Some(0), None, None]
        );
        assert!(!s.is_time_split("split"));
        assert_eq!(s.columns(), ["split", "split"]);
    }

    #[test]
    fn in_lists_and_not_equal_with_quotes_numbers_and_booleans() {
        let s = on_columns(&[
            ("train", "region in (north, \"south west\")"),
            ("test", "region == east"),
        ])
        .unwrap();
        assert_eq!(
            s.assign(&labelled()).unwrap(),
            vec![Some(0), Some(1), Some(0), Some(1), None]
        );
        // A null region is in neither `== east` nor `!= east`.
        let s = on_columns(&[("rest", "region != east")]).unwrap();
        assert_eq!(
            s.assign(&labelled()).unwrap(),
            vec![Some(0), None, Some(0), None, None]
        );
        let s = on_columns(&[("old", "year in (2024,2025)"), ("new", "year == 2026")]).unwrap();
        assert_eq!(
            s.assign(&labelled()).unwrap(),
            vec![Some(0), Some(0), Some(1), Some(0), Some(0)]
        );
        let s = on_columns(&[("flagged", "flag == true"), ("plain", "flag != true")]).unwrap();
        assert_eq!(
            s.assign(&labelled()).unwrap(),
            vec![Some(0), Some(1), Some(0), Some(0), Some(1)]
        );
        let s = splits(&[("test", "signup_date == 2026-08-02")]).unwrap();
        assert_eq!(
            s.assign(&batch(&["2026-08-01", "2026-08-02"], &["a", "b"]))
                .unwrap(),
            vec![None, Some(0)]
        );
    }

    #[test]
    fn operators_in_quoted_values_and_names_with_spaces() {
        let rule = parse_rule(r#"region != "a==b""#, None).unwrap();
        assert_eq!(
            rule,
            Condition::Member {
                column: "region".into(),
                literals: vec![Literal {
                    text: "a==b".into(),
                    quoted: true
                }],
                values: Members::Unresolved,
                negate: true
            }
        );
        let Condition::Member { literals, .. } =
            parse_rule(r#"region in ("a==b", x, 'in (y)')"#, None).unwrap()
        else {
            panic!("a list");
        };
        let texts: Vec<&str> = literals.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["a==b", "x", "in (y)"]);
        let Condition::Range { column, upper, .. } =
            parse_rule("`trip distance` < 5.5", None).unwrap()
        else {
            panic!("a range");
        };
        assert_eq!(
            (column.as_str(), upper),
            ("trip distance", Some((5.5, false)))
        );
        let Condition::Member { column, .. } =
            parse_rule(r#""home region" == north"#, None).unwrap()
        else {
            panic!("a member");
        };
        assert_eq!(column, "home region");
        let Condition::Hash { column, lower, .. } =
            parse_rule("0.5 <= hash(`customer id`) < 0.9", None).unwrap()
        else {
            panic!("a hash");
        };
        assert_eq!((column.as_str(), lower), ("customer id", 0.5));
    }

    #[test]
    fn column_rules_name_an_unknown_column_or_a_type_mismatch() {
        let err = on_columns(&[("train", "fold == 1")])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "manifest.data.splits.train: `fold == 1` uses the column `fold`, which the snapshot does not have"
        );
        let err = on_columns(&[("test", "year == east")])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "manifest.data.splits.test: `year == east`: `year` is a int64 column, but `east` is not a number"
        );
        let err = on_columns(&[("test", "year in (2024, '2025')")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`2025` is not a number"), "{err}");
        let err = on_columns(&[("test", "flag == yes")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`flag` is a bool column"), "{err}");
        let err = splits(&[("test", "signup_date == august")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a date or timestamp"), "{err}");
        for (rule, message) in [
            ("region in (north, )", "a trailing `,`"),
            ("region in ()", "the list of values is empty"),
            ("region in (north", "write `column in (a, b)`"),
            ("region == north, east", "compare with one value"),
            ("region == 'north", "unclosed"),
            ("== north", "is not a column name"),
            ("region = north", "not an operator"),
        ] {
            let err = on_columns(&[("x", rule)]).unwrap_err().to_string();
            assert!(err.contains(message), "{rule}: {err}");
        }
    }
}
