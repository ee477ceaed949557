#!/usr/bin/env python3
"""Plots docs/img/scale.csv (the scale runs of docs/benchmarks.md) as docs/img/scale.svg:
peak RSS and lines/s against the number of lines, one line per mode, log-scaled n.
No dependencies beyond Python 3: the SVG is written by hand.

    python3 scripts/plot_scale.py            # reads docs/img/scale.csv, writes docs/img/scale.svg
"""
import csv
import math
import os

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SRC = os.path.join(ROOT, "docs", "img", "scale.csv")
DST = os.path.join(ROOT, "docs", "img", "scale.svg")
COLORS = {"spill": "#1f77b4", "data": "#2ca02c", "in-memory": "#d62728", "issue (before)": "#7f7f7f"}

rows = list(csv.DictReader(open(SRC)))
modes = []
for r in rows:
    if r["mode"] not in modes:
        modes.append(r["mode"])

W, H, M = 460, 300, 60  # one panel


def panel(x0, title, key, unit, ymax):
    out = []
    xs = [float(r["lines"]) for r in rows]
    lo, hi = math.log10(min(xs)), math.log10(max(xs))
    hi = hi if hi > lo else lo + 1

    def px(n):
        return x0 + M + (math.log10(n) - lo) / (hi - lo) * (W - 2 * M)

    def py(v):
        return H - M + 10 - v / ymax * (H - 2 * M)

    out.append(f'<text x="{x0 + W / 2}" y="24" text-anchor="middle" font-size="15">{title}</text>')
    out.append(f'<line x1="{x0 + M}" y1="{py(0)}" x2="{x0 + W - M}" y2="{py(0)}" stroke="black"/>')
    out.append(f'<line x1="{x0 + M}" y1="{py(0)}" x2="{x0 + M}" y2="{py(ymax)}" stroke="black"/>')
    for i in range(5):
        v = ymax * i / 4
        out.append(f'<text x="{x0 + M - 6}" y="{py(v) + 4}" text-anchor="end" font-size="11">{v:g}</text>')
        out.append(f'<line x1="{x0 + M}" y1="{py(v)}" x2="{x0 + W - M}" y2="{py(v)}" stroke="#ddd"/>')
    for e in range(int(math.floor(lo)), int(math.ceil(hi)) + 1):
        n = 10 ** e
        if lo - 1e-9 <= e <= hi + 1e-9:
            out.append(f'<text x="{px(n)}" y="{py(0) + 16}" text-anchor="middle" font-size="11">1e{e}</text>')
    out.append(f'<text x="{x0 + W / 2}" y="{H - 8}" text-anchor="middle" font-size="12">lines in the stream (log scale)</text>')
    out.append(f'<text x="{x0 + 14}" y="{H / 2}" font-size="12" transform="rotate(-90 {x0 + 14} {H / 2})" text-anchor="middle">{unit}</text>')
    for mode in modes:
        pts = sorted((float(r["lines"]), float(r[key])) for r in rows if r["mode"] == mode and r[key])
        if not pts:
            continue
        c = COLORS.get(mode, "black")
        out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                   % (c, " ".join(f"{px(n):.1f},{py(v):.1f}" for n, v in pts)))
        for n, v in pts:
            out.append(f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="3.5" fill="{c}"/>')
    return out


rss_max = max(float(r["peak_rss_mb"]) for r in rows)
rate_max = max(float(r["lines_per_s_m"]) for r in rows)
body = panel(0, "peak RSS", "peak_rss_mb", "MB", math.ceil(rss_max / 500) * 500)
body += panel(W, "throughput", "lines_per_s_m", "million lines/s", math.ceil(rate_max))
for i, mode in enumerate(modes):
    y = H + 10 + i * 16
    body.append(f'<rect x="{M}" y="{y - 9}" width="12" height="3" fill="{COLORS.get(mode, "black")}"/>')
    body.append(f'<text x="{M + 18}" y="{y - 4}" font-size="12">{mode}</text>')
svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{H + 20 + 16 * len(modes)}" '
       f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>'
       + "".join(body) + "</svg>\n")
open(DST, "w").write(svg)
print(f"wrote {DST}")
