//! The page's plots, drawn by plotters into SVG strings that the page carries inline: no
//! script draws anything, so the page shows the same in any browser, printed or offline.

use plotters::coord::Shift;
use plotters::prelude::*;

/// One color per series, seeds in a stable order (colorblind-safe, from the Okabe-Ito set).
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
];

pub fn color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// The most points a series keeps: a 100k-step run logged every 10 steps would otherwise put
/// 10,000 points per seed in the page for no visible gain.
const MAX_POINTS: usize = 1200;

/// A named series of (x, y) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A line plot of `series` against a shared x axis; non-finite points are dropped.
pub fn lines(title: &str, x_desc: &str, y_desc: &str, series: &[Series]) -> String {
    let series: Vec<Series> = series
        .iter()
        .map(|s| Series {
            label: s.label.clone(),
            points: thin(
                s.points
                    .iter()
                    .copied()
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                    .collect(),
            ),
        })
        .collect();
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = padded(all().map(|p| p.0), 0.0);
    let (y0, y1) = padded(all().map(|p| p.1), 0.05);
    draw((720, 320), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(x0..x1, y0..y1)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .y_label_formatter(&|v| compact(*v))
            .x_label_formatter(&|v| compact(*v))
            .light_line_style(WHITE.mix(0.0))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 13))
            .draw()?;
        for (i, s) in series.iter().enumerate() {
            let style = color(i).stroke_width(2);
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), style))?
                .label(s.label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            if s.points.len() <= 30 {
                chart.draw_series(
                    s.points
                        .iter()
                        .map(|p| Circle::new(*p, 3, color(i).filled())),
                )?;
            }
        }
        if !series.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .draw()?;
        }
        Ok(())
    })
}

/// One row of the slices plot.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceRow {
    pub label: String,
    pub candidate: Option<f64>,
    pub baseline: Option<f64>,
    /// The noise floor's band for the row: the spread of the metric over the seeds.
    pub band: Option<(f64, f64)>,
}

/// The gate's slices: per slice a grey band (the noise floor), the candidate (a dot) and the
/// baseline (a cross), so a slice that fell out of its band shows at a glance.
pub fn slices(title: &str, metric: &str, rows: &[SliceRow]) -> String {
    let values = rows.iter().flat_map(|r| {
        [
            r.candidate,
            r.baseline,
            r.band.map(|b| b.0),
            r.band.map(|b| b.1),
        ]
        .into_iter()
        .flatten()
    });
    let (x0, x1) = padded(values, 0.05);
    let labels: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
    draw(category_size(rows.len()), |root| {
        let mut chart = category_chart(root, title, metric, x0..x1, &labels)?;
        let at = |i: usize| SegmentValue::CenterOf(i as i32);
        chart
            .draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
                let (lo, hi) = r.band?;
                let (lo, hi) = (lo.min(hi), hi.max(lo).max(lo + (x1 - x0) * 0.004));
                Some(Rectangle::new(
                    [
                        (lo, SegmentValue::Exact(i as i32)),
                        (hi, SegmentValue::Exact(i as i32 + 1)),
                    ],
                    RGBColor(200, 200, 200).mix(0.7).filled(),
                ))
            }))?
            .label("noise floor (spread over seeds)")
            .legend(|(x, y)| {
                Rectangle::new(
                    [(x, y - 5), (x + 18, y + 5)],
                    RGBColor(200, 200, 200).filled(),
                )
            });
        chart
            .draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
                Some(Cross::new(
                    (r.baseline?, at(i)),
                    6,
                    color(1).stroke_width(2),
                ))
            }))?
            .label("baseline")
            .legend(|(x, y)| Cross::new((x + 9, y), 5, color(1).stroke_width(2)));
        chart
            .draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
                Some(Circle::new((r.candidate?, at(i)), 5, color(0).filled()))
            }))?
            .label("candidate")
            .legend(|(x, y)| Circle::new((x + 9, y), 5, color(0).filled()));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
        Ok(())
    })
}

/// One bar of the drift plot: a column's drift as a multiple of its check's threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    pub value: f64,
    pub failed: bool,
}

/// Horizontal bars with a dashed line at `limit`; failed bars are drawn in the alarm color.
pub fn bars(title: &str, x_desc: &str, bars: &[Bar], limit: f64) -> String {
    let max = bars
        .iter()
        .map(|b| b.value)
        .filter(|v| v.is_finite())
        .fold(limit, f64::max);
    let n = bars.len().max(1) as i32;
    let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    draw(category_size(bars.len()), |root| {
        let mut chart = category_chart(root, title, x_desc, 0.0..max * 1.1, &labels)?;
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            let fill = if b.failed {
                RGBColor(213, 94, 0)
            } else {
                color(0)
            };
            let mut bar = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i as i32)),
                    (
                        b.value.max(0.0).min(max * 1.1),
                        SegmentValue::Exact(i as i32 + 1),
                    ),
                ],
                fill.filled(),
            );
            bar.set_margin(3, 3, 0, 0);
            bar
        }))?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![
                (limit, SegmentValue::Exact(0)),
                (limit, SegmentValue::Exact(n)),
            ],
            BLACK.stroke_width(1),
        )))?;
        Ok(())
    })
}

type DrawResult = Result<(), Box<dyn std::error::Error + 'static>>;

/// A chart with a numeric x axis and one row per label (slices, drift).
type CategoryChart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<
        plotters::coord::types::RangedCoordf64,
        plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordi32>,
    >,
>;

/// The size of a chart of `rows` labelled rows: a fixed frame plus a line per row.
fn category_size(rows: usize) -> (u32, u32) {
    (720, 90 + 24 * rows.max(1) as u32)
}

/// A chart of one row per label against `x`, its mesh drawn with the labels on the y axis.
fn category_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    x_desc: &str,
    x: std::ops::Range<f64>,
    labels: &[String],
) -> Result<CategoryChart<'a, 'b>, Box<dyn std::error::Error + 'static>> {
    let n = labels.len().max(1) as i32;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(150)
        .build_cartesian_2d(x, (0..n).into_segmented())?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_labels(labels.len().max(1))
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .light_line_style(WHITE.mix(0.0))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 13))
        .draw()?;
    Ok(chart)
}

/// Draws into an SVG string of `size` pixels (the page scales it to its column).
fn draw(
    size: (u32, u32),
    paint: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult,
) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let painted = root
            .fill(&WHITE)
            .map_err(Into::into)
            .and_then(|()| paint(&root));
        // plotters fails only on a backend error, and a String backend has none to give; a
        // failure would leave a partial plot, which the page's own check then reports missing.
        if painted.is_ok() {
            let _ = root.present();
        }
    }
    // Scalable: the page sets the width, the height follows from the view box.
    svg.replacen(
        &format!("width=\"{}\" height=\"{}\"", size.0, size.1),
        "width=\"100%\" preserveAspectRatio=\"xMidYMid meet\"",
        1,
    )
}

/// Keeps at most MAX_POINTS points, evenly spaced, always the last one.
fn thin(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS {
        return points;
    }
    let stride = points.len().div_ceil(MAX_POINTS);
    let last = *points.last().expect("non-empty");
    let mut kept: Vec<(f64, f64)> = points.into_iter().step_by(stride).collect();
    if kept.last() != Some(&last) {
        kept.push(last);
    }
    kept
}

/// The range of `values` widened by `pad` of its span (a flat series gets a unit-wide range).
fn padded(values: impl Iterator<Item = f64>, pad: f64) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let span = hi - lo;
    if span <= f64::EPSILON * hi.abs().max(1.0) {
        return (
            lo - 0.5_f64.max(lo.abs() * 0.05),
            hi + 0.5_f64.max(hi.abs() * 0.05),
        );
    }
    (lo - span * pad, hi + span * pad)
}

/// Tick labels short enough for the axis: 850k, 1.2M, 0.0032.
fn compact(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_plot_is_scalable_svg_with_its_series_and_escaped_labels() {
        let svg = lines(
            "loss",
            "step",
            "loss",
            &[Series {
                label: "seed <7>".into(),
                points: vec![(0.0, 1.0), (10.0, 0.5), (20.0, f64::NAN)],
            }],
        );
        assert!(svg.starts_with("<svg width=\"100%\""), "{}", &svg[..80]);
        assert!(svg.contains("viewBox=\"0 0 720 320\""));
        assert!(svg.contains("seed &lt;7&gt;"));
        assert!(svg.contains("<polyline"), "the series is drawn");
    }

    #[test]
    fn slices_and_bars_draw_one_mark_per_row() {
        let rows = [
            SliceRow {
                label: "region=east".into(),
                candidate: Some(0.85),
                baseline: Some(0.84),
                band: Some((0.845, 0.852)),
            },
            SliceRow {
                label: "tier=<30d".into(),
                candidate: Some(0.79),
                baseline: None,
                band: None,
            },
        ];
        let svg = slices("slices", "auc", &rows);
        assert!(svg.contains("region=east") && svg.contains("tier=&lt;30d"));
        assert_eq!(
            svg.matches("<circle").count(),
            2 + 1,
            "two candidates and the legend's"
        );
        let svg = bars(
            "drift",
            "x limit",
            &[
                Bar {
                    label: "spend".into(),
                    value: 2.0,
                    failed: true,
                },
                Bar {
                    label: "age".into(),
                    value: 0.1,
                    failed: false,
                },
            ],
            1.0,
        );
        assert!(
            svg.contains("fill=\"#D55E00\""),
            "the failed bar is in the alarm color"
        );
    }

    #[test]
    fn long_series_are_thinned_to_the_cap_keeping_the_last_point() {
        let points: Vec<(f64, f64)> = (0..10_001).map(|i| (i as f64, 1.0)).collect();
        let kept = thin(points);
        assert!(kept.len() <= MAX_POINTS + 1);
        assert_eq!(kept.last(), Some(&(10_000.0, 1.0)));
        assert_eq!(padded([2.0, 2.0].into_iter(), 0.05), (1.5, 2.5));
    }
}
