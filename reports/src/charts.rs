//! The report's charts, drawn with plotters into SVG strings that `index.html` inlines.
//!
//! Why inline SVG: the page must load nothing (no external file, no `data:` URL needed),
//! and an inline `<svg>` element is plain markup the Content-Security-Policy does not
//! restrict. Four charts (seed 000's list):
//!
//! 1. input tokens per request across the longest session of each mode, with the input
//!    budget (window − reserve) and the window as horizontal lines;
//! 2. the estimated budget categories of an average turn request, stacked per mode;
//! 3. estimate vs provider-reported input: a calibration scatter and a histogram of the
//!    relative estimation error;
//! 4. pass rate and recall per mode with their Wilson 95% intervals.
//!
//! # Escaping
//!
//! plotters' SVG backend escapes `< > & " '` in every text and attribute it writes
//! (`SVGBackend::escape_and_push`), so labels must **not** be escaped again (that would
//! show `&amp;lt;`). Run-derived labels (trial ids in legends) additionally go through
//! [`svg_label`], which drops control characters (not allowed in XML) and bounds the
//! length; and every finished SVG is checked by [`is_inert`] before it is inlined, so a
//! chart that somehow carried markup is replaced by a note instead of being shown.
//!
//! # Size
//!
//! Every series is bounded whatever the run's size: a session's line keeps at most
//! [`LINE_POINTS`] points (bucket maxima, so peaks survive), the scatter at most
//! [`SCATTER_POINTS`] per mode (every k-th request), the histogram has [`HIST_BINS`] bins.

use std::collections::BTreeMap;
use std::fmt::Display;

use ctxbench_harness::Mode;
use plotters::prelude::*;
use polars::prelude::*;

use crate::error::ExportError;
use crate::export::ReportData;
use crate::frames::PURPOSE_TURN;
use crate::summary::SummaryRow;

/// Most points of one session line (bucket maxima beyond that).
pub const LINE_POINTS: usize = 400;

/// Most points per mode in the calibration scatter (every k-th request beyond that).
pub const SCATTER_POINTS: usize = 600;

/// Bins of the relative-error histogram, over ±[`HIST_RANGE`].
pub const HIST_BINS: usize = 40;

/// The histogram covers relative errors in ±this; values beyond land in the edge bins.
pub const HIST_RANGE: f64 = 0.5;

/// Longest run-derived label in a chart, in characters.
pub const LABEL_CHARS: usize = 60;

const W: u32 = 760;
const H: u32 = 360;

/// One rendered chart: the SVG markup plus a caption and a note, both plain text (the
/// HTML writer escapes them).
#[derive(Debug, Clone)]
pub struct Chart {
    /// Short title (a literal of this module).
    pub title: &'static str,
    /// The `<svg …>…</svg>` markup, or `None` when there is nothing to draw.
    pub svg: Option<String>,
    /// What the chart shows and how it was bounded (may contain run data: escape it).
    pub note: String,
}

fn chart_err(e: impl Display) -> ExportError {
    ExportError::Chart(e.to_string())
}

/// Colour of a mode, the same in every chart.
fn mode_color(m: Mode) -> RGBColor {
    match m {
        Mode::Off => RGBColor(117, 117, 117),
        Mode::Warn => RGBColor(230, 124, 0),
        Mode::Compact => RGBColor(26, 115, 232),
    }
}

/// Cleans a run-derived label for a chart: control characters dropped, bidirectional
/// controls spelled out (`<U+202E>`), at most [`LABEL_CHARS`] characters. Markup characters
/// are left for plotters to escape.
pub fn svg_label(s: &str) -> String {
    let s = ctxbench_harness::visible::bidi_visible(s);
    let mut out: String = s
        .chars()
        .filter(|c| !c.is_control())
        .take(LABEL_CHARS)
        .collect();
    if s.chars().filter(|c| !c.is_control()).count() > LABEL_CHARS {
        out.push('…');
    }
    out
}

/// Whether rendered SVG contains only the drawing elements plotters emits: no script,
/// no foreign content, no event handler, no external reference (the `xmlns` namespace
/// name is the one URL allowed).
pub fn is_inert(svg: &str) -> bool {
    let lower = svg.to_ascii_lowercase();
    let urls = lower.matches("http://").count() + lower.matches("https://").count();
    let xmlns = lower
        .matches("xmlns=\"http://www.w3.org/2000/svg\"")
        .count();
    !lower.contains("<script")
        && !lower.contains("<foreignobject")
        && !lower.contains("<image")
        && !lower.contains("<use")
        && !lower.contains("<a ")
        && !has_event_handler(&lower)
        && !lower.contains("href")
        && urls == xmlns
}

/// Whether `lower` has an attribute like ` onload=` (an event handler).
fn has_event_handler(lower: &str) -> bool {
    lower.match_indices(" on").any(|(i, _)| {
        let rest = &lower[i + 3..];
        let name_len = rest.bytes().take_while(u8::is_ascii_lowercase).count();
        name_len > 0 && rest[name_len..].trim_start().starts_with('=')
    })
}

/// Renders every chart of the report.
pub fn render_all(data: &ReportData<'_>) -> Result<Vec<Chart>, ExportError> {
    let modes = modes_present(&data.summary);
    let charts = vec![
        session_chart(data, &modes)?,
        budget_chart(&data.requests, &modes)?,
        calibration_chart(&data.requests, &modes)?,
        error_histogram(&data.requests)?,
        rates_chart(&data.summary)?,
    ];
    Ok(charts
        .into_iter()
        .map(|mut c| {
            if c.svg.as_deref().is_some_and(|s| !is_inert(s)) {
                c.svg = None;
                c.note = "chart withheld: its SVG did not pass the safety check".into();
            }
            c
        })
        .collect())
}

fn modes_present(summary: &[SummaryRow]) -> Vec<Mode> {
    Mode::ALL
        .iter()
        .copied()
        .filter(|m| summary.iter().any(|r| r.is_suite() && r.mode == *m))
        .collect()
}

fn f64s(df: &DataFrame, name: &str) -> Result<Vec<Option<f64>>, ExportError> {
    Ok(df
        .column(name)?
        .as_materialized_series()
        .cast(&DataType::Float64)?
        .f64()?
        .iter()
        .collect())
}

fn strs(df: &DataFrame, name: &str) -> Result<Vec<Option<String>>, ExportError> {
    Ok(df
        .column(name)?
        .as_materialized_series()
        .str()?
        .iter()
        .map(|o| o.map(str::to_string))
        .collect())
}

/// (x, y) points of one series.
type Points = Vec<(f64, f64)>;

/// Keeps at most `n` points: the maximum of each of `n` equal buckets (peaks survive).
fn downsample_max(points: &[(f64, f64)], n: usize) -> Vec<(f64, f64)> {
    if points.len() <= n || n == 0 {
        return points.to_vec();
    }
    let per = points.len().div_ceil(n);
    points
        .chunks(per)
        .filter_map(|c| {
            c.iter()
                .copied()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(_, y)| (c[0].0, y))
        })
        .collect()
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        1.0
    } else {
        v * 1.08
    }
}

/// Chart 1: input tokens of each request of the longest session (most request rows;
/// ties to the smallest trial id) of each mode.
fn session_chart(data: &ReportData<'_>, modes: &[Mode]) -> Result<Chart, ExportError> {
    let title = "Input tokens per request, longest session of each mode";
    let req = &data.requests;
    let mut series: Vec<(Mode, String, Points)> = Vec::new();
    let mut budget: Option<f64> = None;
    let mut window: Option<f64> = None;
    for &m in modes {
        // The longest trial of this mode, by its request rows (ties: the first in order).
        let Some((t, rows)) = data
            .run
            .trials
            .iter()
            .zip(&data.trial_rows)
            .filter(|(t, _)| t.mode == m)
            .reduce(|a, b| if b.1.len() > a.1.len() { b } else { a })
        else {
            continue;
        };
        let trial_id = &t.trial_id;
        let (start, len) = (rows.start, rows.len());
        let slice = req.slice(start as i64, len);
        let provider = f64s(&slice, "provider_input_tokens")?;
        let overflow = f64s(&slice, "overflow_input_tokens")?;
        let est = f64s(&slice, "est_total")?;
        let avail = f64s(&slice, "available_input")?;
        let win = f64s(&slice, "window")?;
        let pts: Vec<(f64, f64)> = (0..slice.height())
            .filter_map(|i| {
                let y = provider[i]
                    .filter(|v| *v > 0.0)
                    .or(overflow[i])
                    .or(est[i])?;
                Some(((i + 1) as f64, y))
            })
            .collect();
        budget = max_opt(budget, avail.iter().flatten().copied().reduce(f64::max));
        window = max_opt(window, win.iter().flatten().copied().reduce(f64::max));
        series.push((m, trial_id.clone(), downsample_max(&pts, LINE_POINTS)));
    }
    if series.iter().all(|s| s.2.is_empty()) {
        return Ok(Chart {
            title,
            svg: None,
            note: "No request rows.".into(),
        });
    }
    let x_max = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let y_max = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.1))
        .chain(budget)
        .chain(window)
        .fold(0.0, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_max.max(2.0), 0.0..nice_max(y_max))
            .map_err(chart_err)?;
        chart
            .configure_mesh()
            .x_desc("request # in the session")
            .y_desc("input tokens")
            .y_label_formatter(&|v| format!("{v:.0}"))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(chart_err)?;
        for (m, id, pts) in &series {
            let c = mode_color(*m);
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(chart_err)?
                .label(format!("{} — {}", m.as_str(), svg_label(id)))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        }
        for (v, label, color) in [
            (budget, "input budget (window − reserve)", RED),
            (window, "context window", BLACK),
        ] {
            if let Some(v) = v.filter(|v| *v > 0.0) {
                chart
                    .draw_series(LineSeries::new(
                        [(0.0, v), (x_max.max(2.0), v)],
                        color.mix(0.6).stroke_width(1),
                    ))
                    .map_err(chart_err)?
                    .label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(chart_err)?;
        root.present().map_err(chart_err)?;
    }
    let note = series
        .iter()
        .map(|(m, id, _)| format!("{}: {}", m.as_str(), id))
        .collect::<Vec<_>>()
        .join("; ");
    Ok(Chart {
        title,
        svg: Some(svg),
        note: format!(
            "Provider-reported input tokens (else the overflow error's count, else the \
             estimate) of each request row of the session with the most rows ({note}). \
             Lines with more than {LINE_POINTS} requests show the maximum of each bucket."
        ),
    })
}

/// Categories of chart 2: (column of `requests.csv`, label).
const BUDGET_PARTS: [(&str, &str); 8] = [
    ("est_instructions", "instructions"),
    ("est_memory", "memory"),
    ("est_recent_tail", "recent tail"),
    ("est_current_request", "current request"),
    ("est_tool_schemas", "tool schemas"),
    ("est_continuation", "continuation"),
    ("est_framing", "framing"),
    ("reserve", "reserve (output / buffer)"),
];

const PALETTE: [RGBColor; 8] = [
    RGBColor(66, 133, 244),
    RGBColor(52, 168, 83),
    RGBColor(251, 188, 4),
    RGBColor(234, 67, 53),
    RGBColor(171, 71, 188),
    RGBColor(0, 172, 193),
    RGBColor(158, 158, 158),
    RGBColor(224, 224, 224),
];

fn mode_axis(modes: &[Mode]) -> impl Fn(&f64) -> String + '_ {
    move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 0.01 && i >= 0.0 {
            modes
                .get(i as usize)
                .map(|m| m.as_str().to_string())
                .unwrap_or_default()
        } else {
            String::new()
        }
    }
}

/// Chart 2: mean estimated tokens per category of a sent turn request, stacked per mode,
/// with the reserve on top.
fn budget_chart(req: &DataFrame, modes: &[Mode]) -> Result<Chart, ExportError> {
    let title = "Budget categories of an average turn request";
    let means = req
        .clone()
        .lazy()
        .filter(col("sent").and(col("purpose").eq(lit(PURPOSE_TURN))))
        .group_by([col("mode")])
        .agg(
            BUDGET_PARTS
                .iter()
                .map(|(c, _)| col(*c).cast(DataType::Float64).mean().alias(*c))
                .collect::<Vec<_>>(),
        )
        .collect()?;
    let mode_col = strs(&means, "mode")?;
    let mut stacks: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for (i, &m) in modes.iter().enumerate() {
        if let Some(row) = mode_col
            .iter()
            .position(|s| s.as_deref() == Some(m.as_str()))
        {
            let mut v = Vec::new();
            for (c, _) in BUDGET_PARTS {
                v.push(f64s(&means, c)?[row].unwrap_or(0.0));
            }
            stacks.insert(i, v);
        }
    }
    if stacks.is_empty() {
        return Ok(Chart {
            title,
            svg: None,
            note: "No sent turn requests.".into(),
        });
    }
    let y_max = stacks
        .values()
        .map(|v| v.iter().sum::<f64>())
        .fold(0.0, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let n = modes.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..(n - 0.5 + 1.2), 0.0..nice_max(y_max))
            .map_err(chart_err)?;
        let fmt = mode_axis(modes);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(modes.len() * 2 + 3)
            .x_label_formatter(&fmt)
            .y_desc("estimated tokens (mean per request)")
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(chart_err)?;
        for (k, (_, label)) in BUDGET_PARTS.iter().enumerate() {
            let color = PALETTE[k];
            let bars: Vec<Rectangle<(f64, f64)>> = stacks
                .iter()
                .map(|(&i, v)| {
                    let base: f64 = v[..k].iter().sum();
                    let x = i as f64;
                    Rectangle::new([(x - 0.3, base), (x + 0.3, base + v[k])], color.filled())
                })
                .collect();
            chart
                .draw_series(bars)
                .map_err(chart_err)?
                .label(*label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(chart_err)?;
        root.present().map_err(chart_err)?;
    }
    Ok(Chart {
        title,
        svg: Some(svg),
        note: "Mean estimated tokens per category over sent turn requests (the engine's \
               declared budget), topped by the reserve (max of requested output and buffer)."
            .into(),
    })
}

/// Sent turn requests with a provider input count: (mode, estimate, provider input).
fn calibration_points(req: &DataFrame) -> Result<Vec<(Mode, f64, f64)>, ExportError> {
    let df = req
        .clone()
        .lazy()
        .filter(
            col("sent")
                .and(col("purpose").eq(lit(PURPOSE_TURN)))
                .and(col("provider_input_tokens").gt(lit(0u64))),
        )
        .select([col("mode"), col("est_total"), col("provider_input_tokens")])
        .collect()?;
    let modes = strs(&df, "mode")?;
    let est = f64s(&df, "est_total")?;
    let prov = f64s(&df, "provider_input_tokens")?;
    Ok((0..df.height())
        .filter_map(|i| {
            let m: Mode = modes[i].as_deref()?.parse().ok()?;
            Some((m, est[i]?, prov[i]?))
        })
        .collect())
}

/// Chart 3a: estimate vs provider-reported input tokens, one colour per mode, with the
/// diagonal of a perfect estimator.
fn calibration_chart(req: &DataFrame, modes: &[Mode]) -> Result<Chart, ExportError> {
    let title = "Estimate vs provider-reported input tokens";
    let all = calibration_points(req)?;
    if all.is_empty() {
        return Ok(Chart {
            title,
            svg: None,
            note: "No answered turn request.".into(),
        });
    }
    let mut per_mode: Vec<(Mode, Points, usize)> = Vec::new();
    for &m in modes {
        let pts: Vec<(f64, f64)> = all
            .iter()
            .filter(|p| p.0 == m)
            .map(|p| (p.1, p.2))
            .collect();
        let total = pts.len();
        let step = total.div_ceil(SCATTER_POINTS).max(1);
        per_mode.push((m, pts.into_iter().step_by(step).collect(), total));
    }
    let max = all.iter().map(|p| p.1.max(p.2)).fold(1.0, f64::max);
    let lim = nice_max(max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..lim, 0.0..lim)
            .map_err(chart_err)?;
        chart
            .configure_mesh()
            .x_desc("estimated input tokens (est_total)")
            .y_desc("provider-reported input tokens")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(chart_err)?;
        chart
            .draw_series(LineSeries::new([(0.0, 0.0), (lim, lim)], BLACK.mix(0.4)))
            .map_err(chart_err)?
            .label("estimate = provider")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.4)));
        for (m, pts, _) in &per_mode {
            let c = mode_color(*m);
            chart
                .draw_series(
                    pts.iter()
                        .map(|&(x, y)| Circle::new((x, y), 2, c.mix(0.6).filled())),
                )
                .map_err(chart_err)?
                .label(m.as_str())
                .legend(move |(x, y)| Circle::new((x + 10, y), 3, c.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(chart_err)?;
        root.present().map_err(chart_err)?;
    }
    let counts = per_mode
        .iter()
        .map(|(m, pts, total)| format!("{}: {} of {}", m.as_str(), pts.len(), total))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Chart {
        title,
        svg: Some(svg),
        note: format!(
            "Sent turn requests with a provider count; points above the diagonal are \
             undercounts. Points shown per mode ({counts}): every k-th request when there \
             are more than {SCATTER_POINTS}."
        ),
    })
}

/// Chart 3b: histogram of the signed relative estimation error (`rel_error`) of turn
/// requests, all modes together.
fn error_histogram(req: &DataFrame) -> Result<Chart, ExportError> {
    let title = "Relative estimation error (estimate − provider) / provider";
    let df = req
        .clone()
        .lazy()
        .filter(col("purpose").eq(lit(PURPOSE_TURN)))
        .select([col("rel_error")])
        .collect()?;
    let rel = f64s(&df, "rel_error")?;
    let mut bins = [0u64; HIST_BINS];
    let mut outside = 0u64;
    let mut n = 0u64;
    let width = 2.0 * HIST_RANGE / HIST_BINS as f64;
    for v in rel.into_iter().flatten().filter(|v| v.is_finite()) {
        n += 1;
        if v.abs() > HIST_RANGE {
            outside += 1;
        }
        let b = ((v + HIST_RANGE) / width).floor();
        let b = b.clamp(0.0, (HIST_BINS - 1) as f64) as usize;
        bins[b] += 1;
    }
    if n == 0 {
        return Ok(Chart {
            title,
            svg: None,
            note: "No turn request with a provider count.".into(),
        });
    }
    let y_max = bins.iter().copied().max().unwrap_or(0) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-HIST_RANGE..HIST_RANGE, 0.0..nice_max(y_max))
            .map_err(chart_err)?;
        chart
            .configure_mesh()
            .x_desc("relative error (negative = undercount)")
            .y_desc("turn requests")
            .x_label_formatter(&|v| format!("{:.0}%", v * 100.0))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(chart_err)?;
        let color = RGBColor(26, 115, 232);
        chart
            .draw_series(
                bins.iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(|(i, c)| {
                        let x0 = -HIST_RANGE + i as f64 * width;
                        Rectangle::new(
                            [(x0, 0.0), (x0 + width, *c as f64)],
                            color.mix(0.7).filled(),
                        )
                    }),
            )
            .map_err(chart_err)?;
        chart
            .draw_series(LineSeries::new(
                [(0.0, 0.0), (0.0, nice_max(y_max))],
                BLACK.mix(0.5),
            ))
            .map_err(chart_err)?;
        root.present().map_err(chart_err)?;
    }
    Ok(Chart {
        title,
        svg: Some(svg),
        note: format!(
            "{n} turn requests with a provider count, {HIST_BINS} bins of {:.1}%; {outside} \
             beyond ±{:.0}% are counted in the edge bins.",
            width * 100.0,
            HIST_RANGE * 100.0
        ),
    })
}

/// Chart 4: pass rate and recall per mode, each with its Wilson 95% interval.
fn rates_chart(summary: &[SummaryRow]) -> Result<Chart, ExportError> {
    let title = "Pass rate and recall per mode (Wilson 95% intervals)";
    let rows: Vec<&SummaryRow> = summary.iter().filter(|r| r.is_suite()).collect();
    if rows
        .iter()
        .all(|r| r.pass_rate.is_none() && r.recall.is_none())
    {
        return Ok(Chart {
            title,
            svg: None,
            note: "No graded trial.".into(),
        });
    }
    let modes: Vec<Mode> = rows.iter().map(|r| r.mode).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let n = modes.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..(n - 0.5), 0.0..1.05)
            .map_err(chart_err)?;
        let fmt = mode_axis(&modes);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(modes.len() * 2 + 1)
            .x_label_formatter(&fmt)
            .y_desc("share")
            .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
            .draw()
            .map_err(chart_err)?;
        type Sel = fn(&SummaryRow) -> Option<crate::stats::Proportion>;
        let metrics: [(&str, f64, RGBColor, Sel); 2] = [
            ("pass rate", -0.12, RGBColor(30, 142, 62), |r| r.pass_rate),
            ("recall", 0.12, RGBColor(171, 71, 188), |r| r.recall),
        ];
        for (label, dx, color, sel) in metrics {
            let mut elems: Vec<PathElement<(f64, f64)>> = Vec::new();
            let mut dots: Vec<Circle<(f64, f64), u32>> = Vec::new();
            for (i, r) in rows.iter().enumerate() {
                let Some(p) = sel(r) else { continue };
                let x = i as f64 + dx;
                elems.push(PathElement::new(
                    vec![(x, p.lo), (x, p.hi)],
                    color.stroke_width(2),
                ));
                for y in [p.lo, p.hi] {
                    elems.push(PathElement::new(
                        vec![(x - 0.05, y), (x + 0.05, y)],
                        color.stroke_width(2),
                    ));
                }
                dots.push(Circle::new((x, p.value), 4, color.filled()));
            }
            chart.draw_series(elems).map_err(chart_err)?;
            chart
                .draw_series(dots)
                .map_err(chart_err)?
                .label(label)
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(chart_err)?;
        root.present().map_err(chart_err)?;
    }
    Ok(Chart {
        title,
        svg: Some(svg),
        note: "Dots are the point values, bars the Wilson 95% intervals; errored trials are \
               left out of both denominators."
            .into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_lose_control_chars_and_are_bounded() {
        assert_eq!(svg_label("a\u{0}b\nc"), "abc");
        let long = "x".repeat(LABEL_CHARS + 5);
        assert_eq!(svg_label(&long).chars().count(), LABEL_CHARS + 1);
        // Markup is left for plotters' own escaping.
        assert_eq!(svg_label("<script>"), "<script>");
    }

    #[test]
    fn inert_check_rejects_markup_and_urls() {
        let ok = "<svg xmlns=\"http://www.w3.org/2000/svg\"><text>&lt;script&gt;</text></svg>";
        assert!(is_inert(ok));
        assert!(!is_inert("<svg><script>x</script></svg>"));
        assert!(!is_inert("<svg><image href=\"https://x\"/></svg>"));
        assert!(!is_inert("<svg><rect onclick=\"x\"/></svg>"));
        assert!(!is_inert("<svg><foreignObject/></svg>"));
    }

    #[test]
    fn downsampling_keeps_peaks() {
        let pts: Vec<(f64, f64)> = (0..1000).map(|i| (i as f64, (i % 7) as f64)).collect();
        let d = downsample_max(&pts, 100);
        assert!(d.len() <= 100);
        assert!(d.iter().all(|p| p.1 == 6.0));
    }
}
