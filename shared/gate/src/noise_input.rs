//! A `noise_floor` section as the gate takes it: its spreads must be numbers a spread can be. A
//! standard deviation of 1e308 made the paired test's interval null and its p-value 0.5, so a
//! large regression passed; a negative one was used as if positive.

use runfn_core::InputError;
use runfn_schema::record::NoiseFloor;

/// Refuses a section (`field`: where it came from, `noise_floor` or the baseline's) whose mean,
/// spread or floor is not finite, whose spread or floor is negative, or whose spread exceeds the
/// range of its own values (no sample's deviation can), overall or on a slice.
pub fn check_noise_floor(section: &NoiseFloor, field: &str) -> Result<(), InputError> {
    check_spread(
        field,
        Spread {
            mean: section.mean,
            std: section.std,
            min: section.min,
            max: section.max,
            range: section.range,
            floor: section.floor,
        },
    )?;
    for (column, values) in section.slices.iter().flatten() {
        for (value, slice) in values {
            check_spread(
                &format!("{field}.slices.{column}.{value}"),
                Spread {
                    mean: slice.mean,
                    std: slice.std,
                    min: slice.min,
                    max: slice.max,
                    range: slice.range,
                    floor: slice.floor,
                },
            )?;
        }
    }
    Ok(())
}

struct Spread {
    mean: f64,
    std: f64,
    min: f64,
    max: f64,
    range: f64,
    floor: f64,
}

fn check_spread(field: &str, spread: Spread) -> Result<(), InputError> {
    let named = [
        ("mean", spread.mean),
        ("std", spread.std),
        ("min", spread.min),
        ("max", spread.max),
        ("range", spread.range),
        ("floor", spread.floor),
    ];
    for (name, value) in named {
        if !value.is_finite() {
            return Err(InputError::field(
                format!("{field}.{name}"),
                format!(
                    "is {}: a spread over seeds is a finite number",
                    shown(value)
                ),
            ));
        }
    }
    for (name, value) in [
        ("std", spread.std),
        ("range", spread.range),
        ("floor", spread.floor),
    ] {
        if value < 0.0 {
            return Err(InputError::field(
                format!("{field}.{name}"),
                format!("is {}: a spread is never negative", shown(value)),
            ));
        }
    }
    // The sample deviation of values within [min, max] is at most (max - min) / sqrt(2).
    let span = spread.max - spread.min;
    if span < 0.0 || spread.std > span + 1e-12 {
        return Err(InputError::field(
            format!("{field}.std"),
            format!(
                "is {}, but the values span only {} (min {}, max {}): no spread of those values is that large",
                shown(spread.std),
                shown(span),
                shown(spread.min),
                shown(spread.max)
            ),
        ));
    }
    Ok(())
}

/// A number as a person reads it: 1e300, not three hundred digits.
fn shown(value: f64) -> String {
    if value.is_finite() && value != 0.0 && !(1e-4..1e6).contains(&value.abs()) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(std: f64) -> NoiseFloor {
        NoiseFloor {
            metric: "evaluate.overall.auc".into(),
            n: 3,
            mean: 0.8,
            std,
            min: 0.79,
            max: 0.81,
            range: 0.02,
            floor: 2.0 * std,
            method: "std".into(),
            values: vec![0.79, 0.8, 0.81],
            slices: None,
        }
    }

    #[test]
    fn absurd_spreads_are_refused_by_field() {
        assert!(check_noise_floor(&section(0.01), "noise_floor").is_ok());
        let err = check_noise_floor(&section(1e308), "noise_floor").unwrap_err();
        assert!(
            err.to_string().starts_with("noise_floor.floor: is inf"),
            "{err}"
        );
        let err = check_noise_floor(&section(1e300), "noise_floor").unwrap_err();
        assert!(
            err.to_string().starts_with("noise_floor.std: is 1e300"),
            "{err}"
        );
        let err = check_noise_floor(&section(-1.0), "noise_floor").unwrap_err();
        assert!(
            err.to_string().starts_with("noise_floor.std: is -1"),
            "{err}"
        );
        let err = check_noise_floor(&section(f64::NAN), "noise_floor").unwrap_err();
        assert!(
            err.to_string().starts_with("noise_floor.std: is NaN"),
            "{err}"
        );
    }
}
