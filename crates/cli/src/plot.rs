//! SVG plots of the experiments, with plotters.

use std::path::Path;

use anyhow::Context;
use plotters::prelude::*;

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Style {
    Line,
    Dashed,
    Points,
}

/// One named series of (x, y) points.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub color: usize,
    pub style: Style,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn line(name: String, color: usize, points: Vec<(f64, f64)>) -> Self {
        Series { name, color, style: Style::Line, points }
    }
    pub fn dashed(name: String, color: usize, points: Vec<(f64, f64)>) -> Self {
        Series { name, color, style: Style::Dashed, points }
    }
    pub fn points(name: String, color: usize, points: Vec<(f64, f64)>) -> Self {
        Series { name, color, style: Style::Points, points }
    }
}

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// A line chart with a log-scaled y axis.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> anyhow::Result<()> {
    let all = series.iter().flat_map(|s| s.points.iter());
    let x_max = all.clone().map(|p| p.0).fold(1.0, f64::max);
    let positive = all.map(|p| p.1).filter(|&y| y > 0.0);
    let y_min = positive.clone().fold(1.0, f64::min).max(1e-7) / 2.0;
    let y_max = positive.fold(y_min * 4.0, f64::max) * 2.0;
    let root = SVGBackend::new(path, (1000, 650)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max * 1.02, (y_min..y_max).log_scale())?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0e}"))
        .draw()?;
    for s in series {
        let c = color(s.color);
        let pts = s.points.iter().copied().filter(|p| p.1 > 0.0);
        match s.style {
            Style::Line => {
                chart.draw_series(LineSeries::new(pts, c.stroke_width(2)))?.label(&s.name).legend(
                    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)),
                )
            }
            Style::Dashed => chart
                .draw_series(DashedLineSeries::new(pts, 6, 4, c.stroke_width(1)))?
                .label(&s.name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(1))
                }),
            Style::Points => chart
                .draw_series(pts.map(|p| Cross::new(p, 5, c.stroke_width(2))))?
                .label(&s.name)
                .legend(move |(x, y)| Cross::new((x + 10, y), 5, c.stroke_width(2))),
        };
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Fig. 10 beside Fig. 11: URLs per domain against one domain filter's capacity, and URLs per
/// DSBF leaf.
pub fn balance_chart(
    path: &Path,
    domain_counts: &[f64],
    capacity: f64,
    leaf_counts: &[f64],
) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(620);

    let y_max = domain_counts.iter().copied().fold(capacity, f64::max) * 2.0;
    let mut chart = ChartBuilder::on(&left)
        .caption("Per-domain 32 kB filters (Fig. 10)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..domain_counts.len() as f64, (1.0..y_max).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("domain rank")
        .y_desc("URLs")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    chart
        .draw_series(domain_counts.iter().enumerate().map(|(i, &n)| {
            let c = if n > capacity { PALETTE[3] } else { PALETTE[0] };
            Rectangle::new([(i as f64, 1.0), (i as f64 + 0.8, n.max(1.0))], c.filled())
        }))?
        .label("URLs of the domain (red: filter overflows)")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], PALETTE[0].filled()));
    chart
        .draw_series(LineSeries::new(
            vec![(0.0, capacity), (domain_counts.len() as f64, capacity)],
            BLACK.stroke_width(2),
        ))?
        .label("capacity of one 32 kB filter, k = 10")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;

    let leaf_max = leaf_counts.iter().copied().fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&right)
        .caption(format!("DSBF, H = 1, c = {} (Fig. 11)", leaf_counts.len()), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..leaf_counts.len() as f64, 0.0..leaf_max)?;
    chart
        .configure_mesh()
        .x_desc("leaf")
        .y_desc("URLs")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    chart.draw_series(leaf_counts.iter().enumerate().map(|(i, &n)| {
        Rectangle::new([(i as f64 + 0.1, 0.0), (i as f64 + 0.9, n)], PALETTE[2].filled())
    }))?;
    root.present().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
