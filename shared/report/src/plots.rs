//! The page's plots, drawn by plotters into SVG strings that the page carries inline: no
//! script draws anything, so the page shows the same in any browser, printed or offline.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

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
    let keys: Vec<Key> = series
        .iter()
        .enumerate()
        .map(|(i, s)| Key::Line {
            text: s.label.clone(),
            color: color(i),
        })
        .collect();
    above_legend((720, 320), &keys, |root| {
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
            chart.draw_series(LineSeries::new(s.points.iter().copied(), style))?;
            if s.points.len() <= 30 {
                chart.draw_series(
                    s.points
                        .iter()
                        .map(|p| Circle::new(*p, 3, color(i).filled())),
                )?;
            }
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
    let mut keys = Vec::new();
    if rows.iter().any(|r| r.band.is_some()) {
        keys.push(Key::Band);
    }
    if rows.iter().any(|r| r.baseline.is_some()) {
        keys.push(Key::Baseline);
    }
    keys.push(Key::Candidate);
    above_legend(category_size(rows.len()), &keys, |root| {
        let mut chart = category_chart(root, title, metric, x0..x1, &labels)?;
        let at = |i: usize| SegmentValue::CenterOf(i as i32);
        chart.draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
            let (lo, hi) = r.band?;
            let (lo, hi) = (lo.min(hi), hi.max(lo).max(lo + (x1 - x0) * 0.004));
            Some(Rectangle::new(
                [
                    (lo, SegmentValue::Exact(i as i32)),
                    (hi, SegmentValue::Exact(i as i32 + 1)),
                ],
                BAND.mix(0.7).filled(),
            ))
        }))?;
        chart.draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
            Some(Cross::new(
                (r.baseline?, at(i)),
                6,
                color(1).stroke_width(2),
            ))
        }))?;
        chart.draw_series(
            rows.iter().enumerate().filter_map(|(i, r)| {
                Some(Circle::new((r.candidate?, at(i)), 5, color(0).filled()))
            }),
        )?;
        Ok(())
    })
}

/// The noise floor's band in the slices plot.
const BAND: RGBColor = RGBColor(200, 200, 200);

/// The Okabe-Ito colors (colorblind-safe) the page gives its classes: green passed or promoted,
/// vermillion blocked, orange underpowered, grey undefined or failed, sky blue not gated or a
/// first model, blue registered, reddish purple anything else.
pub mod okabe_ito {
    use plotters::style::RGBColor;
    pub const GREEN: RGBColor = RGBColor(0, 158, 115);
    pub const VERMILLION: RGBColor = RGBColor(213, 94, 0);
    pub const ORANGE: RGBColor = RGBColor(230, 159, 0);
    pub const GREY: RGBColor = RGBColor(120, 120, 120);
    pub const SKY_BLUE: RGBColor = RGBColor(86, 180, 233);
    pub const BLUE: RGBColor = RGBColor(0, 114, 178);
    pub const REDDISH_PURPLE: RGBColor = RGBColor(204, 121, 167);
}

/// What a row of an interval chart stands for, as the chart draws it: its color, whether its dot
/// is ringed, its word in the legend and the legend's order. The page says what stands for what
/// (a gate check's status, a night's decision: `gate::Status::class`, `outcome::Decision::class`),
/// so the charts know no domain type.
#[derive(Debug, Clone, PartialEq)]
pub struct Class {
    pub word: String,
    pub color: RGBColor,
    pub ringed: bool,
    /// Where its key goes in the legend (smaller first).
    pub order: usize,
}

/// One row of an interval chart: a place (overall or a slice) of the gate's paired test, or a
/// night of the history.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalRow {
    /// The row's label: `tier=smb (93 rows, 8 pos)`, a night's date.
    pub label: String,
    /// candidate − baseline; `None` where there is none (an undefined metric, a first model).
    pub delta: Option<f64>,
    /// Δ's two-sided interval.
    pub interval: Option<(f64, f64)>,
    /// The bound Δ had to meet there.
    pub limit: Option<f64>,
    pub class: Class,
    /// Written in the row where there is no Δ to draw (`undefined: one class only`).
    pub note: Option<String>,
}

/// One entry of a legend drawn under its chart (see `above_legend`).
#[derive(Debug, Clone, PartialEq)]
enum Key {
    /// A dot in its color, named: a Δ plot's status or a night's decision; ringed like the
    /// blocked ones it stands for.
    Dot {
        text: String,
        color: RGBColor,
        ringed: bool,
    },
    /// A Δ plot's interval, named with its confidence.
    Interval(String),
    /// A line plot's series: its line in its color.
    Line {
        text: String,
        color: RGBColor,
    },
    Limit,
    Zero,
    /// The slices plot's noise-floor band, baseline cross and candidate dot.
    Band,
    Baseline,
    Candidate,
}

impl Key {
    fn text(&self) -> &str {
        match self {
            Key::Dot { text, .. } => text,
            Key::Interval(text) => text,
            Key::Line { text, .. } => text,
            Key::Limit => "limit",
            Key::Zero => "zero",
            Key::Band => "noise floor (spread over seeds)",
            Key::Baseline => "baseline",
            Key::Candidate => "candidate",
        }
    }
}

/// Width in pixels of `text` in the plots' 13-point labels (an estimate: the SVG backend has no
/// font metrics), so legends and label areas can be laid out without measuring.
fn text_width(text: &str) -> i32 {
    (text.chars().count() as f64 * 5.6).ceil() as i32
}

/// One row of an interval chart, whatever it stands for (a slice of the gate, a night).
#[derive(Debug, Clone, PartialEq)]
struct Mark {
    label: String,
    delta: Option<f64>,
    interval: Option<(f64, f64)>,
    limit: Option<f64>,
    color: RGBColor,
    ringed: bool,
    /// Written in the row where there is no Δ to draw.
    note: Option<String>,
}

/// Δ per row (the gate's places, or the nights of the history): the interval as a bar with
/// end caps and Δ as a dot, both in the row's class's color (blocked ones ringed), the limit as
/// a black vertical line per row and zero dashed; the first row on top. A row without Δ says
/// why in its row. The legend names every class drawn, in its order, in a strip of its own
/// under the chart, so it never covers a point.
pub fn interval_chart(
    title: &str,
    x_desc: &str,
    interval_label: &str,
    rows: &[IntervalRow],
) -> String {
    let mut classes: Vec<&Class> = Vec::new();
    for row in rows {
        if !classes.iter().any(|c| c.word == row.class.word) {
            classes.push(&row.class);
        }
    }
    classes.sort_by_key(|c| c.order);
    let keys = classes
        .into_iter()
        .map(|c| Key::Dot {
            text: c.word.clone(),
            color: c.color,
            ringed: c.ringed,
        })
        .collect();
    let marks: Vec<Mark> = rows
        .iter()
        .map(|r| Mark {
            label: r.label.clone(),
            delta: r.delta,
            interval: r.interval,
            limit: r.limit,
            color: r.class.color,
            ringed: r.class.ringed,
            note: r.note.clone(),
        })
        .collect();
    intervals(title, x_desc, interval_label, &marks, keys)
}

/// The chart of `interval_chart`: one row per mark, first on top, with `keys` (then the
/// interval, the limit and zero when drawn) in a legend strip under it.
fn intervals(
    title: &str,
    x_desc: &str,
    interval_label: &str,
    rows: &[Mark],
    mut keys: Vec<Key>,
) -> String {
    let values = rows.iter().flat_map(|r| {
        [
            r.delta,
            r.interval.map(|i| i.0),
            r.interval.map(|i| i.1),
            r.limit,
        ]
        .into_iter()
        .flatten()
    });
    let (x0, x1) = padded(values.chain([0.0]), 0.08);
    let n = rows.len();
    // Row i of `rows` is drawn at y = n - 1 - i, so the first is on top.
    let y = |i: usize| (n - 1 - i) as i32;
    let labels: Vec<String> = rows.iter().rev().map(|r| r.label.clone()).collect();
    if rows.iter().any(|r| r.interval.is_some()) {
        keys.push(Key::Interval(interval_label.to_string()));
    }
    if rows.iter().any(|r| r.limit.is_some()) {
        keys.push(Key::Limit);
    }
    keys.push(Key::Zero);
    above_legend(category_size(n), &keys, |root| {
        let mut chart = category_chart(root, title, x_desc, x0..x1, &labels)?;
        let (center, edge) = (SegmentValue::CenterOf, SegmentValue::Exact);
        chart.draw_series(std::iter::once(DashedPathElement::new(
            vec![(0.0, edge(0)), (0.0, edge(n as i32))],
            4,
            3,
            RGBColor(90, 90, 90).stroke_width(1),
        )))?;
        chart.draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
            Some(PathElement::new(
                vec![(r.limit?, edge(y(i))), (r.limit?, edge(y(i) + 1))],
                BLACK.stroke_width(2),
            ))
        }))?;
        for (i, r) in rows.iter().enumerate() {
            let style = r.color.stroke_width(2);
            if let Some((lo, hi)) = r.interval {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(lo, center(y(i))), (hi, center(y(i)))],
                    style,
                )))?;
                chart.draw_series([lo, hi].map(|end| {
                    EmptyElement::at((end, center(y(i))))
                        + PathElement::new(vec![(0, -5), (0, 5)], style)
                }))?;
            }
            match r.delta {
                Some(delta) => {
                    let at = || (delta, center(y(i)));
                    if r.ringed {
                        chart.draw_series(std::iter::once(Circle::new(
                            at(),
                            7,
                            BLACK.stroke_width(1),
                        )))?;
                    }
                    chart.draw_series(std::iter::once(Circle::new(at(), 5, r.color.filled())))?;
                }
                None => {
                    let note = r.note.as_deref().unwrap_or("no Δ");
                    chart.draw_series(std::iter::once(Text::new(
                        note.to_string(),
                        (x0 + (x1 - x0) * 0.01, center(y(i))),
                        ("sans-serif", 13)
                            .into_font()
                            .color(&r.color)
                            .pos(Pos::new(HPos::Left, VPos::Center)),
                    )))?;
                }
            }
        }
        Ok(())
    })
}

/// Draws a chart of `size` with `paint`, and under it a strip with the legend's `keys`, left to
/// right and wrapping: a legend inside the chart would cover the points that fall under it.
fn above_legend(
    size: (u32, u32),
    keys: &[Key],
    paint: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult,
) -> String {
    let placed = legend_layout(keys, size.0 as i32 - 24);
    let lines = placed.last().map_or(0, |p| p.1 + 1) as u32;
    draw((size.0, size.1 + 12 + 22 * lines), |root| {
        let (chart, legend) = root.split_vertically(size.1);
        paint(&chart)?;
        for (key, (x, line)) in keys.iter().zip(&placed) {
            draw_key(&legend, key, *x + 12, 16 + 22 * *line as i32)?;
        }
        Ok(())
    })
}

/// Each key's x offset and line: left to right, wrapping at `width`.
fn legend_layout(keys: &[Key], width: i32) -> Vec<(i32, usize)> {
    let mut placed = Vec::with_capacity(keys.len());
    let (mut x, mut line) = (0, 0);
    for key in keys {
        let w = 24 + text_width(key.text()) + 12;
        if x > 0 && x + w > width {
            (x, line) = (0, line + 1);
        }
        placed.push((x, line));
        x += w;
    }
    placed
}

fn draw_key(area: &DrawingArea<SVGBackend<'_>, Shift>, key: &Key, x: i32, y: i32) -> DrawResult {
    let grey = RGBColor(90, 90, 90);
    match key {
        Key::Dot { color, ringed, .. } => {
            area.draw(&Circle::new((x + 9, y), 5, color.filled()))?;
            if *ringed {
                area.draw(&Circle::new((x + 9, y), 7, BLACK.stroke_width(1)))?;
            }
        }
        Key::Interval(_) => {
            let style = grey.stroke_width(2);
            area.draw(&PathElement::new(vec![(x, y), (x + 18, y)], style))?;
            for end in [x, x + 18] {
                area.draw(&PathElement::new(vec![(end, y - 5), (end, y + 5)], style))?;
            }
        }
        Key::Line { color, .. } => {
            area.draw(&PathElement::new(
                vec![(x, y), (x + 18, y)],
                color.stroke_width(2),
            ))?;
        }
        Key::Limit => {
            area.draw(&PathElement::new(
                vec![(x + 9, y - 8), (x + 9, y + 8)],
                BLACK.stroke_width(2),
            ))?;
        }
        Key::Zero => {
            area.draw(&DashedPathElement::new(
                vec![(x + 9, y - 8), (x + 9, y + 8)],
                4,
                3,
                grey.stroke_width(1),
            ))?;
        }
        Key::Band => {
            area.draw(&Rectangle::new(
                [(x, y - 5), (x + 18, y + 5)],
                BAND.filled(),
            ))?;
        }
        Key::Baseline => area.draw(&Cross::new((x + 9, y), 5, color(1).stroke_width(2)))?,
        Key::Candidate => area.draw(&Circle::new((x + 9, y), 5, color(0).filled()))?,
    }
    area.draw(&Text::new(
        key.text().to_string(),
        (x + 24, y),
        ("sans-serif", 13)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center)),
    ))?;
    Ok(())
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
        .y_label_area_size(label_area(labels))
        // An integer range includes its end, and segmenting adds a dummy row after it: 0..n-1
        // gives exactly the n rows, without an empty one on top.
        .build_cartesian_2d(x, (0..n - 1).into_segmented())?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_labels(labels.len().max(1))
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 13))
        .draw()?;
    Ok(chart)
}

/// Room for the longest of `labels` left of the axis: at least the 150 pixels short labels
/// always had, at most half the chart.
fn label_area(labels: &[String]) -> u32 {
    let longest = labels.iter().map(|l| text_width(l)).max().unwrap_or(0);
    (longest + 24).clamp(150, 360) as u32
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
    use crate::gate::Status;
    use crate::outcome::Decision;

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
        // The chart is 320 high, and the legend a strip of its own under it: a legend inside
        // the chart would cover the points under it.
        assert!(svg.contains("viewBox=\"0 0 720 354\""), "{svg}");
        let label = svg.find("seed &lt;7&gt;").expect("the series is named");
        let tag = &svg[svg[..label].rfind("<text").unwrap()..label];
        let y: f64 = tag
            .split("y=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .and_then(|y| y.parse().ok())
            .unwrap_or_else(|| panic!("no y in {tag}"));
        assert!(y > 320.0, "the legend lies under the chart: {tag}");
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

    /// The value of attribute `name` in one SVG tag's text.
    fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
        let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(&tag[start..start + tag[start..].find('"')?])
    }

    fn number(tag: &str, name: &str) -> f64 {
        attr(tag, name).unwrap().parse().unwrap()
    }

    /// Every `<kind ...>` tag of `svg`.
    fn tags<'a>(svg: &'a str, kind: &str) -> Vec<&'a str> {
        svg.split('<')
            .filter(|t| t.starts_with(&format!("{kind} ")))
            .collect()
    }

    /// The text a `<text ...>` tag holds (plotters puts it on a line of its own).
    fn text_of(tag: &str) -> &str {
        tag.split_once('>').map_or("", |(_, text)| text.trim())
    }

    fn hex(color: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", color.0, color.1, color.2)
    }

    fn delta_rows() -> Vec<IntervalRow> {
        let row = |label: &str, delta, interval, status: Status| IntervalRow {
            label: label.into(),
            delta,
            interval,
            limit: Some(-0.01),
            class: status.class(),
            note: None,
        };
        vec![
            row(
                "overall (500 rows, 60 pos)",
                Some(0.002),
                Some((-0.001, 0.005)),
                Status::Passed,
            ),
            row(
                "tier=<smb> (93 rows, 8 pos)",
                Some(-0.01),
                Some((-0.08, 0.06)),
                Status::Underpowered,
            ),
            IntervalRow {
                note: Some("undefined: one class only".into()),
                ..row("tier=tiny (12 rows, 0 pos)", None, None, Status::Undefined)
            },
            row(
                "region=north",
                Some(-0.03),
                Some((-0.05, -0.01)),
                Status::Blocked,
            ),
        ]
    }

    /// Each interval is a horizontal bar in its status's color, spanning its data to scale, with
    /// Δ's dot on it where Δ lies; the limit is a black line per row, and the legend, below the
    /// chart, names every status drawn.
    #[test]
    fn the_delta_plot_draws_each_interval_to_scale_with_its_dot_and_a_legend_below() {
        let rows = delta_rows();
        let svg = interval_chart("gate", "Δ auc", "95% interval", &rows);
        assert!(
            svg.contains("tier=&lt;smb&gt; (93 rows, 8 pos)"),
            "labels escaped"
        );
        assert!(svg.contains("undefined: one class only"));
        let polylines = tags(&svg, "polyline");
        let circles = tags(&svg, "circle");
        // (pixel x of lo, of hi, of the dot, pixel y) per row with an interval.
        let drawn: Vec<(f64, f64, f64, f64)> = rows
            .iter()
            .filter(|r| r.interval.is_some())
            .map(|r| {
                let color = hex(r.class.color);
                let bar = polylines
                    .iter()
                    .find(|t| {
                        let points: Vec<&str> =
                            attr(t, "points").unwrap().split_whitespace().collect();
                        attr(t, "stroke") == Some(color.as_str())
                            && points.len() == 2
                            && points[0].split(',').nth(1) == points[1].split(',').nth(1)
                            && points[0] != points[1]
                    })
                    .unwrap_or_else(|| panic!("no interval bar for {}", r.label));
                let xy = |p: &str| -> (f64, f64) {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                };
                let points: Vec<(f64, f64)> = attr(bar, "points")
                    .unwrap()
                    .split_whitespace()
                    .map(xy)
                    .collect();
                let y = points[0].1;
                let dot = circles
                    .iter()
                    .find(|t| attr(t, "fill") == Some(color.as_str()) && number(t, "cy") == y)
                    .unwrap_or_else(|| panic!("no dot on the bar of {}", r.label));
                (points[0].0, points[1].0, number(dot, "cx"), y)
            })
            .collect();
        assert_eq!(drawn.len(), 3);
        let with: Vec<&IntervalRow> = rows.iter().filter(|r| r.interval.is_some()).collect();
        let pixels_per_unit = (drawn[1].1 - drawn[1].0) / 0.14;
        for (r, (lo, hi, dot, _)) in with.iter().zip(&drawn) {
            let (a, b) = r.interval.unwrap();
            assert!(
                ((hi - lo) - (b - a) * pixels_per_unit).abs() <= 2.0,
                "{}: bar {lo}..{hi} not to scale",
                r.label
            );
            assert!(
                (dot - lo - (r.delta.unwrap() - a) * pixels_per_unit).abs() <= 2.0,
                "{}: dot at {dot} not at Δ on {lo}..{hi}",
                r.label
            );
        }
        assert!(
            drawn[0].3 < drawn[1].3 && drawn[1].3 < drawn[2].3,
            "overall on top, then the slices in order"
        );
        let limits = polylines
            .iter()
            .filter(|t| {
                attr(t, "stroke") == Some("#000000") && attr(t, "stroke-width") == Some("2")
            })
            .count();
        assert_eq!(limits, 4 + 1, "a limit per row, and the legend's");
        assert!(
            circles.iter().any(|t| attr(t, "stroke") == Some("#000000")),
            "the blocked dot is ringed"
        );

        // The legend: every status drawn, below the lowest point.
        let lowest = drawn.iter().map(|d| d.3).fold(0.0, f64::max);
        let texts = tags(&svg, "text");
        for word in [
            "passed",
            "underpowered",
            "undefined",
            "blocked",
            "95% interval",
            "limit",
            "zero",
        ] {
            let key = texts
                .iter()
                .find(|t| text_of(t) == word)
                .unwrap_or_else(|| panic!("no legend key {word}"));
            assert!(
                number(key, "y") > lowest + 10.0,
                "the key {word} is in the chart"
            );
        }
        assert!(
            !texts.iter().any(|t| text_of(t) == "not gated"),
            "only the statuses drawn are keys"
        );
    }

    /// A night per row, oldest on top, each Δ's dot in its decision's color on its interval;
    /// a night without Δ says why in its row; every legend key lies under the lowest row.
    #[test]
    fn the_nights_plot_colors_each_night_by_decision_with_its_legend_below() {
        let night =
            |label: &str, delta: Option<f64>, decision: Decision, note: Option<&str>| IntervalRow {
                label: label.into(),
                delta,
                interval: delta.map(|d| (d - 0.01, d + 0.01)),
                limit: delta.map(|_| -0.002),
                class: decision.class(),
                note: note.map(str::to_string),
            };
        let rows = [
            night(
                "12-01",
                None,
                Decision::FirstModel,
                Some("first model: no baseline"),
            ),
            night("12-02", Some(0.004), Decision::Promoted, None),
            night("12-03", Some(-0.02), Decision::Blocked, None),
            night("12-04", None, Decision::Failed, Some("failed at validate")),
        ];
        let svg = interval_chart("history", "Δ auc", "95% interval", &rows);
        assert!(svg.contains("first model: no baseline") && svg.contains("failed at validate"));
        let circles = tags(&svg, "circle");
        let dot = |d: Decision| {
            let color = hex(d.class().color);
            circles
                .iter()
                .filter(|t| attr(t, "fill") == Some(color.as_str()))
                .map(|t| number(t, "cy"))
                .collect::<Vec<f64>>()
        };
        let (promoted, blocked) = (dot(Decision::Promoted), dot(Decision::Blocked));
        assert_eq!(
            (promoted.len(), blocked.len()),
            (2, 2),
            "a dot each, and a key each"
        );
        assert!(promoted[0] < blocked[0], "the older night above the newer");
        assert!(
            circles.iter().any(|t| attr(t, "stroke") == Some("#000000")),
            "the blocked night is ringed"
        );
        let lowest = promoted[0].max(blocked[0]);
        let texts = tags(&svg, "text");
        for word in [
            "promoted",
            "first model",
            "blocked",
            "failed",
            "95% interval",
            "limit",
        ] {
            let key = texts
                .iter()
                .find(|t| text_of(t) == word)
                .unwrap_or_else(|| panic!("no legend key {word}"));
            assert!(
                number(key, "y") > lowest + 10.0,
                "the key {word} is in the chart"
            );
        }
        assert!(
            !texts.iter().any(|t| text_of(t) == "incomplete"),
            "only the decisions drawn are keys"
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
