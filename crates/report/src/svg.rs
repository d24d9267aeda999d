//! Just enough SVG plotting for the report: line plots on linear or logarithmic axes, horizontal
//! bars with a whisker, and horizontal stacked bars. Output is plain SVG text with inline styles,
//! so the page needs neither scripts nor fonts from elsewhere.

use std::fmt::Write as _;

/// Escapes text for HTML and SVG content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A compact number for tick labels and tables: at most 3 significant digits below 1000,
/// whole numbers with thousands separated by thin spaces above.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "–".to_owned();
    }
    let a = v.abs();
    let s = if a == 0.0 {
        "0".to_owned()
    } else if a >= 999.5 {
        let whole = format!("{:.0}", a);
        let mut grouped = String::new();
        for (i, c) in whole.chars().enumerate() {
            if i > 0 && (whole.len() - i) % 3 == 0 {
                grouped.push('\u{2009}');
            }
            grouped.push(c);
        }
        grouped
    } else {
        let digits = (2 - a.log10().floor() as i32).clamp(0, 6) as usize;
        let t = format!("{:.*}", digits, a);
        if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            t
        }
    };
    if v < 0.0 {
        format!("−{s}")
    } else {
        s
    }
}

/// A tick label: like [`fmt_num`], but large values as k (thousands) and M (millions) so the
/// labels stay narrow.
pub fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", fmt_num(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", fmt_num(v / 1e3))
    } else {
        fmt_num(v)
    }
}

/// How an axis maps values to positions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// Evenly spaced values.
    Linear,
    /// Evenly spaced powers of ten (values must be positive).
    Log,
}

/// One axis: its label (with the unit), scale and range.
#[derive(Clone, Debug)]
pub struct Axis {
    /// Label shown beside the axis, including the unit.
    pub label: String,
    /// Linear or logarithmic.
    pub scale: Scale,
    /// Smallest value shown.
    pub min: f64,
    /// Largest value shown.
    pub max: f64,
}

impl Axis {
    /// An axis spanning the given values, widened to round numbers; linear axes start at zero
    /// when `from_zero`.
    pub fn fit(label: &str, scale: Scale, values: impl IntoIterator<Item = f64>, from_zero: bool) -> Axis {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for v in values {
            if v.is_finite() && (scale == Scale::Linear || v > 0.0) {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        if !lo.is_finite() {
            (lo, hi) = (1.0, 10.0);
        }
        let (min, max) = match scale {
            Scale::Log => {
                let lo = 10f64.powf(lo.log10().floor());
                let mut hi = 10f64.powf(hi.log10().ceil());
                if hi <= lo {
                    hi = lo * 10.0;
                }
                (lo, hi)
            }
            Scale::Linear => {
                let lo = if from_zero { lo.min(0.0) } else { lo };
                let hi = if hi <= lo { lo + 1.0 } else { hi };
                let step = nice_step((hi - lo) / 5.0);
                ((lo / step).floor() * step, (hi / step).ceil() * step)
            }
        };
        Axis { label: label.to_owned(), scale, min, max }
    }

    /// Position of `v` along the axis as a fraction 0..1 (clamped).
    fn frac(&self, v: f64) -> f64 {
        let f = match self.scale {
            Scale::Linear => (v - self.min) / (self.max - self.min),
            Scale::Log => {
                let v = v.max(self.min * 1e-3);
                (v.log10() - self.min.log10()) / (self.max.log10() - self.min.log10())
            }
        };
        if f.is_finite() {
            f.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// Tick values: round steps on linear axes; decades (and 2, 5 between them when the axis
    /// spans few decades) on log axes.
    fn ticks(&self) -> Vec<f64> {
        match self.scale {
            Scale::Linear => {
                let step = nice_step((self.max - self.min) / 5.0);
                let first = (self.min / step).ceil() as i64;
                let last = (self.max / step + 1e-9).floor() as i64;
                (first..=last).map(|i| i as f64 * step).collect()
            }
            Scale::Log => {
                let k0 = self.min.log10().floor() as i32;
                let k1 = self.max.log10().ceil() as i32;
                let mults: &[f64] = if k1 - k0 <= 2 { &[1.0, 2.0, 5.0] } else { &[1.0] };
                let mut out = Vec::new();
                for k in k0..=k1 {
                    for m in mults {
                        let v = m * 10f64.powi(k);
                        if v >= self.min * 0.999 && v <= self.max * 1.001 {
                            out.push(v);
                        }
                    }
                }
                out
            }
        }
    }
}

/// The round step (1, 2 or 5 times a power of ten) nearest above `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw.is_nan() || raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let nice = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * p
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Style {
    /// Solid line with a dot on each point.
    LineMarkers,
    /// Solid line only.
    Line,
    /// Dashed line only (models, predictions).
    Dashed,
}

/// One named series of (x, y) points.
#[derive(Clone, Debug)]
pub struct Series {
    /// Shown in the legend.
    pub name: String,
    /// CSS colour.
    pub color: String,
    /// Points in drawing order.
    pub points: Vec<(f64, f64)>,
    /// Line style.
    pub style: Style,
}

/// A line plot with axes, grid, title and legend.
#[derive(Clone, Debug)]
pub struct LinePlot {
    /// Title above the plot.
    pub title: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// The data.
    pub series: Vec<Series>,
}

const FONT: &str = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif";
const PLOT_W: f64 = 700.0;
const PLOT_H: f64 = 380.0;
const LEGEND_W: f64 = 190.0;
const MARGIN_L: f64 = 70.0;
const MARGIN_R: f64 = 20.0;
const MARGIN_T: f64 = 36.0;
const MARGIN_B: f64 = 56.0;

fn svg_open(out: &mut String, w: f64, h: f64, title: &str) {
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{t}" style="{FONT};font-size:12px;max-width:100%;height:auto">"##,
        t = esc(title)
    );
    let _ = write!(
        out,
        r##"<rect width="{w}" height="{h}" fill="#ffffff"/><text x="{x}" y="22" font-size="15" font-weight="600" fill="#1f2933">{t}</text>"##,
        x = MARGIN_L,
        t = esc(title)
    );
}

fn legend(out: &mut String, x: f64, y: f64, entries: &[(String, String, bool)]) {
    for (i, (name, color, dashed)) in entries.iter().enumerate() {
        let yy = y + i as f64 * 20.0;
        let dash = if *dashed { r#" stroke-dasharray="6 4""# } else { "" };
        let _ = write!(
            out,
            r##"<line x1="{x}" y1="{yy}" x2="{x2}" y2="{yy}" stroke="{color}" stroke-width="3"{dash}/><text x="{tx}" y="{ty}" fill="#1f2933">{n}</text>"##,
            x2 = x + 22.0,
            tx = x + 28.0,
            ty = yy + 4.0,
            n = esc(name)
        );
    }
}

impl LinePlot {
    /// Renders the plot as an `<svg>` element.
    pub fn render(&self) -> String {
        let w = PLOT_W + LEGEND_W;
        let h = PLOT_H;
        let (x0, x1) = (MARGIN_L, PLOT_W - MARGIN_R);
        let (y0, y1) = (PLOT_H - MARGIN_B, MARGIN_T);
        let px = |v: f64| x0 + self.x.frac(v) * (x1 - x0);
        let py = |v: f64| y0 - self.y.frac(v) * (y0 - y1);
        let mut out = String::new();
        svg_open(&mut out, w, h, &self.title);
        let _ = write!(
            out,
            r##"<rect x="{x0}" y="{y1}" width="{pw}" height="{ph}" fill="#fbfcfd" stroke="#9aa5b1"/>"##,
            pw = x1 - x0,
            ph = y0 - y1
        );
        for t in self.x.ticks() {
            let x = px(t);
            let _ = write!(
                out,
                r##"<line x1="{x:.1}" y1="{y1}" x2="{x:.1}" y2="{y0}" stroke="#e4e7eb"/><line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{yt}" stroke="#52606d"/><text x="{x:.1}" y="{yl}" text-anchor="middle" fill="#3e4c59">{l}</text>"##,
                yt = y0 + 5.0,
                yl = y0 + 18.0,
                l = fmt_tick(t)
            );
        }
        for t in self.y.ticks() {
            let y = py(t);
            let _ = write!(
                out,
                r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#e4e7eb"/><line x1="{xt}" y1="{y:.1}" x2="{x0}" y2="{y:.1}" stroke="#52606d"/><text x="{xl}" y="{yl:.1}" text-anchor="end" fill="#3e4c59">{l}</text>"##,
                xt = x0 - 5.0,
                xl = x0 - 8.0,
                yl = y + 4.0,
                l = fmt_tick(t)
            );
        }
        let _ = write!(
            out,
            r##"<text x="{xc}" y="{yb}" text-anchor="middle" fill="#1f2933">{xl}</text><text transform="translate(16 {yc}) rotate(-90)" text-anchor="middle" fill="#1f2933">{yl}</text>"##,
            xc = (x0 + x1) / 2.0,
            yb = PLOT_H - 14.0,
            yc = (y0 + y1) / 2.0,
            xl = esc(&self.x.label),
            yl = esc(&self.y.label)
        );
        let mut entries = Vec::new();
        for s in &self.series {
            let pts: Vec<String> = s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let dash = if s.style == Style::Dashed { r#" stroke-dasharray="6 4""# } else { "" };
            let _ = write!(
                out,
                r##"<polyline points="{p}" fill="none" stroke="{c}" stroke-width="2.2" stroke-linejoin="round"{dash}/>"##,
                p = pts.join(" "),
                c = s.color
            );
            if s.style == Style::LineMarkers {
                for p in &pts {
                    let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
                    let _ = write!(
                        out,
                        r##"<circle cx="{cx}" cy="{cy}" r="3.2" fill="{c}" stroke="#fff" stroke-width="1"/>"##,
                        c = s.color
                    );
                }
            }
            entries.push((s.name.clone(), s.color.clone(), s.style == Style::Dashed));
        }
        legend(&mut out, PLOT_W + 4.0, MARGIN_T + 10.0, &entries);
        out.push_str("</svg>");
        out
    }
}

/// One horizontal bar: a value, and optionally a whisker further out (e.g. p50 with p99).
#[derive(Clone, Debug)]
pub struct Bar {
    /// Label left of the bar.
    pub label: String,
    /// Bar length.
    pub value: f64,
    /// Whisker end, drawn as a thin line with a cap.
    pub whisker: Option<f64>,
    /// CSS colour.
    pub color: String,
}

/// Horizontal bars on a shared linear axis starting at zero.
pub fn bar_chart(title: &str, axis_label: &str, bars: &[Bar], legend_note: &str) -> String {
    let label_w = 230.0;
    let row_h = 26.0;
    let w = PLOT_W + LEGEND_W;
    let (x0, x1) = (label_w, w - 40.0);
    let y_top = MARGIN_T + 6.0;
    let h = y_top + bars.len().max(1) as f64 * row_h + 58.0;
    let axis =
        Axis::fit(axis_label, Scale::Linear, bars.iter().flat_map(|b| [b.value, b.whisker.unwrap_or(0.0)]), true);
    let px = |v: f64| x0 + axis.frac(v) * (x1 - x0);
    let y_bottom = y_top + bars.len().max(1) as f64 * row_h;
    let mut out = String::new();
    svg_open(&mut out, w, h, title);
    for t in axis.ticks() {
        let x = px(t);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{y_top}" x2="{x:.1}" y2="{y_bottom}" stroke="#e4e7eb"/><text x="{x:.1}" y="{yl}" text-anchor="middle" fill="#3e4c59">{l}</text>"##,
            yl = y_bottom + 16.0,
            l = fmt_tick(t)
        );
    }
    for (i, b) in bars.iter().enumerate() {
        let y = y_top + i as f64 * row_h;
        let bw = (px(b.value) - x0).max(0.0);
        let _ = write!(
            out,
            r##"<text x="{lx}" y="{ty}" text-anchor="end" fill="#1f2933">{l}</text><rect x="{x0}" y="{by}" width="{bw:.1}" height="{bh}" fill="{c}" rx="2"/>"##,
            lx = x0 - 8.0,
            ty = y + row_h / 2.0 + 4.0,
            l = esc(&b.label),
            by = y + 4.0,
            bh = row_h - 8.0,
            c = b.color
        );
        let mut end = x0 + bw;
        if let Some(wk) = b.whisker {
            let xw = px(wk);
            let ym = y + row_h / 2.0;
            let _ = write!(
                out,
                r##"<line x1="{xa:.1}" y1="{ym}" x2="{xw:.1}" y2="{ym}" stroke="#323f4b" stroke-width="1.5"/><line x1="{xw:.1}" y1="{ya}" x2="{xw:.1}" y2="{yb}" stroke="#323f4b" stroke-width="1.5"/>"##,
                xa = x0 + bw,
                ya = ym - 6.0,
                yb = ym + 6.0
            );
            end = end.max(xw);
        }
        let _ = write!(
            out,
            r##"<text x="{tx:.1}" y="{ty}" fill="#323f4b" font-size="11">{v}</text>"##,
            tx = end + 5.0,
            ty = y + row_h / 2.0 + 4.0,
            v = fmt_num(b.value)
        );
    }
    let _ = write!(
        out,
        r##"<line x1="{x0}" y1="{y_top}" x2="{x0}" y2="{y_bottom}" stroke="#52606d"/><text x="{xc}" y="{yb}" text-anchor="middle" fill="#1f2933">{al}</text>"##,
        xc = (x0 + x1) / 2.0,
        yb = y_bottom + 36.0,
        al = esc(&format!("{axis_label}{legend_note}"))
    );
    out.push_str("</svg>");
    out
}

/// One horizontal stacked bar: consecutive named segments.
#[derive(Clone, Debug)]
pub struct Stack {
    /// Label left of the bar.
    pub label: String,
    /// (segment name, value), drawn left to right.
    pub segments: Vec<(String, f64)>,
}

/// Horizontal stacked bars on a shared linear axis; segment colours come from `color_of` so the
/// same part has the same colour in every bar, and the legend lists each name once.
pub fn stacked_bars(title: &str, axis_label: &str, stacks: &[Stack], color_of: &dyn Fn(&str) -> String) -> String {
    let label_w = 170.0;
    let row_h = 34.0;
    let w = PLOT_W + LEGEND_W;
    let (x0, x1) = (label_w, w - 60.0);
    let y_top = MARGIN_T + 6.0;
    let mut names: Vec<&str> = Vec::new();
    for s in stacks {
        for (n, _) in &s.segments {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    let y_bottom = y_top + stacks.len().max(1) as f64 * row_h;
    // The legend sits under the axis, three names to a row, so long part names fit.
    let legend_cols = 3;
    let legend_top = y_bottom + 60.0;
    let legend_rows = names.len().div_ceil(legend_cols);
    let h = legend_top + legend_rows as f64 * 20.0 + 10.0;
    let axis = Axis::fit(
        axis_label,
        Scale::Linear,
        stacks.iter().map(|s| s.segments.iter().map(|x| x.1.max(0.0)).sum::<f64>()),
        true,
    );
    let px = |v: f64| x0 + axis.frac(v) * (x1 - x0);
    let mut out = String::new();
    svg_open(&mut out, w, h, title);
    for t in axis.ticks() {
        let x = px(t);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{y_top}" x2="{x:.1}" y2="{y_bottom}" stroke="#e4e7eb"/><text x="{x:.1}" y="{yl}" text-anchor="middle" fill="#3e4c59">{l}</text>"##,
            yl = y_bottom + 16.0,
            l = fmt_tick(t)
        );
    }
    for (i, s) in stacks.iter().enumerate() {
        let y = y_top + i as f64 * row_h;
        let _ = write!(
            out,
            r##"<text x="{lx}" y="{ty}" text-anchor="end" fill="#1f2933">{l}</text>"##,
            lx = x0 - 8.0,
            ty = y + row_h / 2.0 + 4.0,
            l = esc(&s.label)
        );
        let mut acc = 0.0;
        for (name, v) in &s.segments {
            let v = v.max(0.0);
            let (xa, xb) = (px(acc), px(acc + v));
            let _ = write!(
                out,
                r##"<rect x="{xa:.1}" y="{by}" width="{bw:.1}" height="{bh}" fill="{c}" stroke="#fff" stroke-width="0.8"><title>{t}</title></rect>"##,
                by = y + 5.0,
                bw = (xb - xa).max(0.0),
                bh = row_h - 10.0,
                c = color_of(name),
                t = esc(&format!("{name}: {}", fmt_num(v)))
            );
            acc += v;
        }
        let _ = write!(
            out,
            r##"<text x="{tx:.1}" y="{ty}" fill="#323f4b" font-size="11">{v}</text>"##,
            tx = px(acc) + 5.0,
            ty = y + row_h / 2.0 + 4.0,
            v = fmt_num(acc)
        );
    }
    let _ = write!(
        out,
        r##"<line x1="{x0}" y1="{y_top}" x2="{x0}" y2="{y_bottom}" stroke="#52606d"/><text x="{xc}" y="{yb}" text-anchor="middle" fill="#1f2933">{al}</text>"##,
        xc = (x0 + x1) / 2.0,
        yb = y_bottom + 36.0,
        al = esc(axis_label)
    );
    let col_w = (w - 2.0 * MARGIN_L) / legend_cols as f64;
    for (i, n) in names.iter().enumerate() {
        let x = MARGIN_L + (i % legend_cols) as f64 * col_w;
        let yy = legend_top + (i / legend_cols) as f64 * 20.0;
        let _ = write!(
            out,
            r##"<rect x="{x:.1}" y="{ry}" width="14" height="14" fill="{c}"/><text x="{tx:.1}" y="{ty}" fill="#1f2933">{n}</text>"##,
            ry = yy - 11.0,
            c = color_of(n),
            tx = x + 20.0,
            ty = yy + 1.0,
            n = esc(n)
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(1.0), "1");
        assert_eq!(fmt_num(0.25), "0.25");
        assert_eq!(fmt_num(12.34), "12.3");
        assert_eq!(fmt_num(1500.0), "1\u{2009}500");
        assert_eq!(fmt_num(-2.5), "−2.5");
        assert_eq!(fmt_num(f64::NAN), "–");
        assert_eq!(fmt_tick(1_500_000.0), "1.5M");
        assert_eq!(fmt_tick(50_000.0), "50k");
        assert_eq!(fmt_tick(5_000.0), "5\u{2009}000");
    }

    #[test]
    fn log_axis_spans_whole_decades() {
        let a = Axis::fit("x", Scale::Log, [3.0, 450.0], false);
        assert_eq!((a.min, a.max), (1.0, 1000.0));
        assert_eq!(a.ticks(), vec![1.0, 10.0, 100.0, 1000.0]);
        assert!((a.frac(10.0) - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn linear_axis_uses_round_steps() {
        let a = Axis::fit("x", Scale::Linear, [0.3, 87.0], true);
        assert_eq!(a.min, 0.0);
        assert_eq!(a.max, 100.0);
        assert_eq!(a.ticks(), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        let svg = bar_chart(
            "t<",
            "µs",
            &[Bar { label: "<b>".into(), value: 1.0, whisker: Some(2.0), color: "#000".into() }],
            "",
        );
        assert!(!svg.contains("<b>"));
        assert!(svg.contains("&lt;b&gt;"));
    }
}
