//! The SVG of a timed TPC-C run: one file that shows, without any other, the latency distribution
//! of each transaction type (HdrHistogram style: percentile on a log scale of 1/(1−q), latency in
//! milliseconds on a log scale) above the run's throughput per second.
//!
//! It is handed finished numbers (histograms in microseconds, counts per second) and a title. It
//! must not know the engines, the terminals or how the run was driven: whatever produced the
//! numbers, the picture is drawn the same way, so that two runs' pictures compare.
//!
//! Text is written as SVG `<text>` and left to the viewer's fonts: plotters is built without a
//! font feature, so it sizes labels by its own estimate and needs no font library to build.

use plotters::coord::Shift;
use plotters::prelude::*;

/// One transaction type's latencies, recorded in microseconds.
pub struct Latencies<'a> {
    pub name: &'a str,
    pub histogram: &'a hdrhistogram::Histogram<u64>,
}

const SIZE: (u32, u32) = (1000, 900);

/// Points per decade of 1/(1−q): enough for a smooth line at this width without bloating the file.
const POINTS_PER_DECADE: u32 = 24;

/// Colours by a type's place in `types`, not among the non-empty ones, so that a type keeps its
/// colour from one run's picture to the next even when another type recorded nothing.
const COLOURS: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

const THROUGHPUT: RGBColor = RGBColor(0x22, 0x22, 0x22);

fn colour(index: usize) -> RGBColor {
    COLOURS[index % COLOURS.len()]
}

/// Writes `path` as an SVG: the latency distribution of each transaction type (log scale) and the
/// throughput per second of the run. `per_second[i]` = transactions completed in second i of the
/// measured window. `title` goes on top (e.g. "pure, W=1, 16 terminals, 20 s").
pub fn write(
    path: &std::path::Path,
    title: &str,
    types: &[Latencies<'_>],
    per_second: &[u64],
) -> anyhow::Result<()> {
    let draw = || -> DrawResult {
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let body = root.titled(title, ("sans-serif", 26))?;
        let (top, bottom) = body.split_vertically(body.dim_in_pixel().1 * 3 / 5);
        latency_panel(&top, types)?;
        throughput_panel(&bottom, per_second)?;
        // Dropping the backend would also write the file, but would swallow an I/O error.
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn latency_panel(area: &Area<'_>, types: &[Latencies<'_>]) -> DrawResult {
    let drawn: Vec<(usize, &Latencies<'_>)> = types
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.histogram.is_empty())
        .collect();

    // x is 1/(1−q). With n samples the finest quantile told apart from the max is 1 − 1/n, so the
    // axis runs to the largest count; at least one decade, so that an axis exists at all.
    let most = drawn
        .iter()
        .map(|(_, t)| t.histogram.len())
        .max()
        .unwrap_or(0);
    let x_end = (most as f64).max(10.0);
    let x_ticks: Vec<f64> = (0..)
        .map(|k| 10f64.powi(k))
        .take_while(|&x| x <= x_end * (1.0 + 1e-9))
        .collect();

    // Whole decades of milliseconds: log-scale ticks then land on round numbers.
    let (y_lo, y_hi) = if drawn.is_empty() {
        (0.1, 10.0)
    } else {
        let lo = drawn
            .iter()
            .map(|(_, t)| ms(t.histogram.min()))
            .fold(f64::INFINITY, f64::min);
        let hi = drawn
            .iter()
            .map(|(_, t)| ms(t.histogram.max()))
            .fold(0.0, f64::max);
        let lo = 10f64.powf(lo.log10().floor());
        let hi = 10f64.powf(hi.log10().ceil());
        (lo, if hi > lo { hi } else { lo * 10.0 })
    };
    let y_ticks = log_ticks(y_lo, y_hi);

    let caption = if drawn.is_empty() {
        "latency by transaction type (no transaction recorded)"
    } else {
        "latency by transaction type"
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(75)
        .build_cartesian_2d(
            (1.0..x_end).log_scale().with_key_points(x_ticks),
            (y_lo..y_hi).log_scale().with_key_points(y_ticks),
        )?;
    chart
        .configure_mesh()
        .x_desc("percentile (log scale of 1/(1 − q))")
        .y_desc("latency, ms (log scale)")
        .x_label_formatter(&|x| percentile_label(*x))
        .y_label_formatter(&|y| ms_label(*y))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()?;

    for (index, t) in &drawn {
        let style = colour(*index).stroke_width(2);
        chart
            .draw_series(LineSeries::new(distribution(t.histogram), style))?
            .label(t.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
    }
    if !drawn.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 16))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    Ok(())
}

fn throughput_panel(area: &Area<'_>, per_second: &[u64]) -> DrawResult {
    let seconds = per_second.len() as u64;
    let peak = per_second.iter().copied().max().unwrap_or(0);
    let caption = if seconds == 0 {
        "throughput (no measured second)".to_string()
    } else {
        let total: u64 = per_second.iter().sum();
        format!(
            "throughput: {:.0} transactions/s on average over {seconds} s",
            total as f64 / seconds as f64
        )
    };
    // Headroom above the peak keeps the line off the frame; at least 1 so the range is not empty.
    let y_end = (peak + peak / 10).max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(75)
        .build_cartesian_2d(0..seconds.max(1), 0..y_end)?;
    chart
        .configure_mesh()
        .x_desc("second of the measured window")
        .y_desc("transactions/s")
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()?;
    chart.draw_series(LineSeries::new(
        (0u64..).zip(per_second.iter().copied()),
        THROUGHPUT.stroke_width(2),
    ))?;
    Ok(())
}

/// Points (1/(1−q), latency in ms) log-spaced in 1/(1−q) from the minimum (q = 0) to the maximum,
/// which is placed at 1/(1−q) = n: the finest quantile n samples can tell.
fn distribution(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    let n = h.len() as f64;
    let mut points: Vec<(f64, f64)> = (0..)
        .map(|i| 10f64.powf(f64::from(i) / f64::from(POINTS_PER_DECADE)))
        .take_while(|&x| x < n)
        .map(|x| (x, ms(h.value_at_quantile(1.0 - 1.0 / x))))
        .collect();
    points.push((n.max(1.0), ms(h.max())));
    points
}

/// Microseconds to milliseconds, no lower than 1 µs: a log axis has no place for 0.
fn ms(micros: u64) -> f64 {
    micros.max(1) as f64 / 1000.0
}

/// 1, 2 and 5 of each decade from `lo` to `hi` (both whole decades).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let first = lo.log10().round() as i32;
    let last = hi.log10().round() as i32;
    let mut ticks = Vec::new();
    for e in first..=last {
        for m in [1.0, 2.0, 5.0] {
            let v = m * 10f64.powi(e);
            if v <= hi * (1.0 + 1e-9) {
                ticks.push(v);
            }
        }
    }
    ticks
}

/// 1/(1−q) = 10^k as the percentile it stands for: 0%, 90%, 99%, 99.9%, ...
fn percentile_label(x: f64) -> String {
    let k = x.log10().round();
    if k < 1.0 {
        return "0%".to_string();
    }
    let decimals = (k as usize).saturating_sub(2);
    format!("{:.*}%", decimals, 100.0 - 100.0 / 10f64.powf(k))
}

/// Milliseconds with as many decimals as the value needs and no float noise (0.005, not
/// 0.005000000000000001).
fn ms_label(ms: f64) -> String {
    if ms >= 1.0 {
        format!("{ms:.0}")
    } else {
        let decimals = (-ms.log10()).ceil() as usize;
        format!("{ms:.decimals$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::Histogram;

    fn histogram(values: impl IntoIterator<Item = u64>) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in values {
            h.record(v).unwrap();
        }
        h
    }

    fn svg_of(title: &str, types: &[Latencies<'_>], per_second: &[u64]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.svg");
        write(&path, title, types, per_second).unwrap();
        std::fs::read_to_string(&path).unwrap()
    }

    fn texts(doc: &roxmltree::Document<'_>) -> Vec<String> {
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| n.text().unwrap_or("").trim().to_string())
            .collect()
    }

    /// The number of points of each polyline drawn in `colour`.
    fn lines_in(doc: &roxmltree::Document<'_>, colour: RGBColor) -> Vec<usize> {
        let stroke = format!("#{:02X}{:02X}{:02X}", colour.0, colour.1, colour.2);
        doc.descendants()
            .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(&*stroke))
            .map(|n| {
                n.attribute("points")
                    .unwrap_or("")
                    .split_whitespace()
                    .count()
            })
            .collect()
    }

    #[test]
    fn plot_draws_each_recorded_type_with_its_legend_and_the_throughput() {
        let new_order = histogram(100..5000);
        let payment = histogram(20..900);
        let delivery = histogram([]);
        let types = [
            Latencies {
                name: "new_order",
                histogram: &new_order,
            },
            Latencies {
                name: "payment",
                histogram: &payment,
            },
            Latencies {
                name: "delivery",
                histogram: &delivery,
            },
        ];
        let per_second: Vec<u64> = (0..20).map(|s| 900 + 10 * s).collect();
        let svg = svg_of("pure, W=1, 16 terminals, 20 s", &types, &per_second);

        let doc = roxmltree::Document::parse(&svg).unwrap();
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let texts = texts(&doc);
        let has = |s: &str| texts.iter().any(|t| t == s);
        assert!(has("pure, W=1, 16 terminals, 20 s"), "{texts:?}");
        assert!(has("new_order") && has("payment"), "legend: {texts:?}");
        assert!(!has("delivery"), "an empty type is not drawn: {texts:?}");
        // 4,900 samples tell 99.9% from the max, not 99.99%.
        for tick in ["0%", "90%", "99%", "99.9%"] {
            assert!(has(tick), "tick {tick}: {texts:?}");
        }
        assert!(!has("99.99%"), "{texts:?}");
        assert!(
            has("latency, ms (log scale)") && has("transactions/s"),
            "{texts:?}"
        );

        // Each drawn type: its line (many points) and its legend sample (two).
        for index in [0, 1] {
            let lines = lines_in(&doc, colour(index));
            assert!(lines.iter().any(|&n| n > 50), "type {index}: {lines:?}");
            assert!(
                lines.contains(&2),
                "legend sample of type {index}: {lines:?}"
            );
        }
        assert!(lines_in(&doc, colour(2)).is_empty());
        assert_eq!(lines_in(&doc, THROUGHPUT), vec![per_second.len()]);
    }

    #[test]
    fn plot_of_nothing_recorded_is_still_an_svg() {
        let empty = histogram([]);
        let types = [Latencies {
            name: "new_order",
            histogram: &empty,
        }];
        for types in [&types[..], &[]] {
            let svg = svg_of("nothing", types, &[]);
            let doc = roxmltree::Document::parse(&svg).unwrap();
            assert_eq!(doc.root_element().tag_name().name(), "svg");
            let texts = texts(&doc);
            assert!(texts.iter().any(|t| t == "nothing"), "{texts:?}");
            assert!(!texts.iter().any(|t| t == "new_order"), "{texts:?}");
        }
        // One sample and one second: a line of one point, an axis of one decade.
        let one = histogram([60_000_000]);
        let svg = svg_of(
            "one",
            &[Latencies {
                name: "payment",
                histogram: &one,
            }],
            &[7],
        );
        let doc = roxmltree::Document::parse(&svg).unwrap();
        assert!(texts(&doc).iter().any(|t| t == "payment"));
        assert_eq!(lines_in(&doc, THROUGHPUT), vec![1]);
        // All zero: the throughput axis still has a height.
        let svg = svg_of("idle", &types, &[0; 5]);
        let doc = roxmltree::Document::parse(&svg).unwrap();
        assert_eq!(lines_in(&doc, THROUGHPUT), vec![5]);
    }

    #[test]
    fn plot_labels_percentiles_and_milliseconds() {
        let labels: Vec<String> = [1.0, 10.0, 100.0, 1e3, 1e4, 1e6]
            .map(percentile_label)
            .into();
        assert_eq!(labels, ["0%", "90%", "99%", "99.9%", "99.99%", "99.9999%"]);
        let labels: Vec<String> = log_ticks(0.001, 10.0).into_iter().map(ms_label).collect();
        assert_eq!(
            labels,
            [
                "0.001", "0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2",
                "5", "10"
            ]
        );
    }
}
