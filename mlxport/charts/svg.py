"""Tiny inline-SVG charts for the eval report: grouped bars, a labelled scatter, step lines.
No scripts, fonts or images from anywhere: the report must render offline."""

from __future__ import annotations

import math
from html import escape

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#17becf",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
)
BASELINE_COLOR = "#7f7f7f"
FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"'


def colors(names: list[str], baseline: str = "rules") -> dict[str, str]:
    out, i = {}, 0
    for n in names:
        if n == baseline:
            out[n] = BASELINE_COLOR
        else:
            out[n] = PALETTE[i % len(PALETTE)]
            i += 1
    return out


def _nice_max(v: float) -> float:
    if v <= 0 or math.isnan(v):
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * exp >= v * 1.0001:
            return m * exp
    return 10 * exp


def _ticks(top: float) -> list[float]:
    """4 to 6 intervals whose step is 1, 2, 2.5 or 5 times a power of ten."""
    for n in (5, 4, 6, 3):
        step = top / n
        mant = step / 10 ** math.floor(math.log10(step))
        if any(abs(mant - m) < 1e-9 for m in (1, 2, 2.5, 5, 10)):
            return [step * i for i in range(n + 1)]
    return [top * i / 5 for i in range(6)]


def _fmt(v: float, percent: bool) -> str:
    if percent:
        return f"{v:.0%}"
    return f"{v:.3g}"


def _frame(width: int, height: int, title: str, body: list[str], desc: str) -> str:
    return (
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}" {FONT} font-size="12">'
        f"<title>{escape(title)}</title><desc>{escape(desc)}</desc>"
        f'<rect width="{width}" height="{height}" fill="#fff"/>'
        + _title(title, width)
        + "".join(body)
        + "</svg>"
    )


def _title(title: str, width: int) -> str:
    """The title in one line, or in two where one would not fit inside the frame (a character of
    system-ui at 15 px, semibold, is at most about 9 px wide)."""
    if len(title) * 9 <= width - 20:
        lines = [title]
    else:
        mid = len(title) // 2
        cut = min(
            (i for i, ch in enumerate(title) if ch == " "), key=lambda i: abs(i - mid), default=mid
        )
        lines = [title[:cut], title[cut:].strip()]
    size = 15 if len(lines) == 1 else 14
    return "".join(
        f'<text x="{width / 2}" y="{20 + 17 * i}" text-anchor="middle" font-size="{size}" '
        f'font-weight="600">{escape(line)}</text>'
        for i, line in enumerate(lines)
    )


def _y_axis(
    x0: float,
    y0: float,
    h: float,
    w: float,
    top: float,
    percent: bool,
    label: str,
    ref: float | None = None,
) -> list[str]:
    out = []
    for t in _ticks(top):
        y = y0 - h * t / top
        out.append(
            f'<line x1="{x0}" x2="{x0 + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>'
            f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end" '
            f'fill="#444">{_fmt(t, percent)}</text>'
        )
    if ref is not None and 0 < ref < top:
        y = y0 - h * ref / top
        out.append(
            f'<line x1="{x0}" x2="{x0 + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#333" '
            f'stroke-dasharray="5 4"/>'
            f'<text x="{x0 + w - 4}" y="{y - 4:.1f}" text-anchor="end" fill="#333">baseline '
            f"{ref:g}x</text>"
        )
    out.append(
        f'<line x1="{x0}" x2="{x0}" y1="{y0 - h}" y2="{y0}" stroke="#333"/>'
        f'<line x1="{x0}" x2="{x0 + w}" y1="{y0}" y2="{y0}" stroke="#333"/>'
        f'<text transform="translate({x0 - 48},{y0 - h / 2}) rotate(-90)" text-anchor="middle" '
        f'fill="#222">{escape(label)}</text>'
    )
    return out


def _legend(
    names: list[str],
    color: dict[str, str],
    x: float,
    y: float,
    width: float,
    labels: dict[str, str],
) -> tuple[list[str], float]:
    """Swatches wrapped into rows within ``width``; returns the elements and the height used."""
    out, cx, cy = [], x, y
    for n in names:
        text = labels.get(n, n)
        w = 28 + 7 * len(text)
        if cx > x and cx + w > x + width:
            cx, cy = x, cy + 18
        dash = ' stroke="#fff" stroke-dasharray="3 2"' if n == "rules" else ""
        out.append(
            f'<rect x="{cx}" y="{cy - 10}" width="12" height="12" fill="{color[n]}"{dash}/>'
            f'<text x="{cx + 16}" y="{cy}" fill="#222">{escape(text)}</text>'
        )
        cx += w
    return out, cy - y + 18


def grouped_bars(
    title: str,
    groups: list[str],
    series: dict[str, list[float | None]],
    *,
    y_label: str,
    percent: bool = False,
    ref: float | None = None,
    labels: dict[str, str] | None = None,
    width: int = 1100,
    height: int = 380,
    desc: str = "",
) -> str:
    """Bars per group (task), one per series (model); a missing value is drawn as an 'x'."""
    labels = labels or {}
    names = list(series)
    color = colors(names)
    x0, y0, w, h = 70, height - 90, width - 90, height - 150
    values = [v for vs in series.values() for v in vs if v is not None and not math.isnan(v)]
    top = 1.0 if percent else _nice_max(max(values + [ref or 0.0, 1.0]))
    body = _y_axis(x0, y0, h, w, top, percent, y_label, ref)
    gw = w / max(len(groups), 1)
    bw = min(28.0, gw * 0.8 / max(len(names), 1))
    for gi, g in enumerate(groups):
        gx = x0 + gi * gw + (gw - bw * len(names)) / 2
        for si, n in enumerate(names):
            v = series[n][gi]
            bx = gx + si * bw
            if v is None or math.isnan(v):
                body.append(
                    f'<text x="{bx + bw / 2:.1f}" y="{y0 - 4}" text-anchor="middle" fill="#999" '
                    f'font-size="10">x</text>'
                )
                continue
            bh = max(
                h * min(v, top) / top, 2.0
            )  # a zero stays visible, unlike a run that is missing
            body.append(
                f'<rect x="{bx:.1f}" y="{y0 - bh:.1f}" width="{bw - 1:.1f}" height="{bh:.1f}" '
                f'fill="{color[n]}"><title>{escape(labels.get(n, n))} on {escape(g)}: '
                f"{_fmt(v, percent)}</title></rect>"
            )
        body.append(
            f'<text transform="translate({x0 + gi * gw + gw / 2:.1f},{y0 + 14}) rotate(-25)" '
            f'text-anchor="end" fill="#222">{escape(g)}</text>'
        )
    legend, extra = _legend(names, color, x0, height - 12, w, labels)
    return _frame(width, height + extra - 18, title, body + legend, desc)


def scatter(
    title: str,
    points: list[tuple[str, float, float]],
    *,
    x_label: str,
    y_label: str,
    percent: bool = False,
    ref: float | None = None,
    labels: dict[str, str] | None = None,
    width: int = 550,
    height: int = 400,
    desc: str = "",
) -> str:
    """Points (name, x, y) with a legend; coinciding points are drawn as rings around each other."""
    labels = labels or {}
    names = [p[0] for p in points]
    color = colors(names)
    x0, y0, w, h = 80, height - 80, width - 110, height - 130
    xmax = _nice_max(max([p[1] for p in points] + [0.0]))
    ymax = 1.0 if percent else _nice_max(max([p[2] for p in points] + [ref or 0.0, 1.0]))
    body = _y_axis(x0, y0, h, w, ymax, percent, y_label, ref)
    for t in _ticks(xmax):
        x = x0 + w * t / xmax
        body.append(
            f'<text x="{x:.1f}" y="{y0 + 16}" text-anchor="middle" fill="#444">{t:.3g}</text>'
        )
    body.append(
        f'<text x="{x0 + w / 2}" y="{y0 + 36}" text-anchor="middle" '
        f'fill="#222">{escape(x_label)}</text>'
    )
    placed: list[tuple[float, float]] = []
    marks = []
    for n, x, y in points:
        px, py = x0 + w * x / xmax, y0 - h * min(y, ymax) / ymax
        r = 6 + 4 * sum(abs(px - a) < 6 and abs(py - b) < 6 for a, b in placed)
        placed.append((px, py))
        marks.append(
            (
                r,
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="{r}" fill="{color[n]}" stroke="#fff" '
                f'stroke-width="1.5"><title>{escape(labels.get(n, n))}: {x:.4g}, {_fmt(y, percent)}'
                f"</title></circle>",
            )
        )
    body += [m for _, m in sorted(marks, key=lambda m: -m[0])]  # larger rings first, smaller on top
    legend, extra = _legend(names, color, x0, height - 12, w, labels)
    return _frame(width, height + extra - 18, title, body + legend, desc)


def lines(
    title: str,
    series: dict[str, list[float]],
    *,
    x_label: str,
    y_label: str,
    percent: bool = False,
    ref: float | None = None,
    labels: dict[str, str] | None = None,
    width: int = 550,
    height: int = 400,
    desc: str = "",
) -> str:
    """Step lines over x = 0, 1, 2, ... (one value per iteration)."""
    labels = labels or {}
    names = list(series)
    color = colors(names)
    x0, y0, w, h = 80, height - 80, width - 110, height - 130
    n = max((len(v) for v in series.values()), default=1)
    xmax = max(n - 1, 1)
    values = [v for vs in series.values() for v in vs if not math.isnan(v)]
    ymax = 1.0 if percent else _nice_max(max(values + [ref or 0.0, 1.0]))
    body = _y_axis(x0, y0, h, w, ymax, percent, y_label, ref)
    step = max(1, round(xmax / 12))
    for t in range(0, xmax + 1, step):
        body.append(
            f'<text x="{x0 + w * t / xmax:.1f}" y="{y0 + 16}" text-anchor="middle" '
            f'fill="#444">{t}</text>'
        )
    body.append(
        f'<text x="{x0 + w / 2}" y="{y0 + 36}" text-anchor="middle" '
        f'fill="#222">{escape(x_label)}</text>'
    )
    for k, name in enumerate(names):
        # Earlier series are drawn wider and later ones narrower on top, so where two series
        # coincide both stay visible; a marker on every value says where the series has one.
        wide = 2.5 + 6 * (len(names) - 1 - k)
        pts, marks, prev = [], [], None
        for i, v in enumerate(series[name]):
            if math.isnan(v):
                continue
            x, y = x0 + w * i / xmax, y0 - h * min(v, ymax) / ymax
            if prev is not None:
                pts.append(f"{x:.1f},{prev:.1f}")
            pts.append(f"{x:.1f},{y:.1f}")
            prev = y
            marks.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{wide / 2 + 2:.1f}" fill="{color[name]}" '
                f'stroke="#fff"><title>{escape(labels.get(name, name))} at {x_label} {i}: '
                f"{_fmt(v, percent)}</title></circle>"
            )
        dash = ' stroke-dasharray="6 4"' if name == "rules" else ""
        body.append(
            f'<polyline points="{" ".join(pts)}" fill="none" stroke="{color[name]}" '
            f'stroke-width="{wide:g}"'
            f"{dash}><title>{escape(labels.get(name, name))}</title></polyline>"
        )
        body += marks if len(marks) <= 40 else []
    legend, extra = _legend(names, color, x0, height - 12, w, labels)
    return _frame(width, height + extra - 18, title, body + legend, desc)


def roofline(
    title: str,
    points: list[tuple[str, float, float]],
    *,
    bandwidth_gbs: float,
    peak_gflops: float,
    cases: list[tuple[str, float]],
    width: int = 550,
    height: int = 400,
    desc: str = "",
) -> str:
    """A log-log roofline: attainable GFLOP/s against arithmetic intensity (FLOP/byte) under the
    memory and compute ceilings, each case (label, intensity) marked as a dashed line and a ring on
    the ceiling (the most it can reach there), and measured points (name, x, y)."""
    x0, y0, w, h = 80, height - 80, width - 110, height - 130
    ridge = peak_gflops / bandwidth_gbs
    xs = [p[1] for p in points] + [x for _, x in cases] + [ridge]
    lo_x = 10 ** math.floor(math.log10(max(min(xs), 1e-3)) - 1)
    hi_x = 10 ** math.ceil(math.log10(max(xs)) + 1)
    ys = [p[2] for p in points if p[2] > 0] + [bandwidth_gbs * lo_x, peak_gflops]
    lo_y, hi_y = 10 ** math.floor(math.log10(min(ys))), 10 ** math.ceil(math.log10(max(ys)) + 0.3)

    def px(x: float) -> float:
        return x0 + w * (math.log10(x) - math.log10(lo_x)) / (math.log10(hi_x) - math.log10(lo_x))

    def py(y: float) -> float:
        return y0 - h * (math.log10(max(y, lo_y)) - math.log10(lo_y)) / (
            math.log10(hi_y) - math.log10(lo_y)
        )

    body = _log_axes(x0, y0, w, h, (lo_x, hi_x), (lo_y, hi_y), px, py)
    ceiling = [(lo_x, bandwidth_gbs * lo_x), (ridge, peak_gflops), (hi_x, peak_gflops)]
    body.append(
        '<polyline points="'
        + " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in ceiling)
        + f'" fill="none" stroke="#222" stroke-width="2"><title>ceilings: {bandwidth_gbs:g} GB/s, '
        f"{peak_gflops:g} GFLOP/s</title></polyline>"
        f'<text x="{px(hi_x) - 4:.1f}" y="{py(peak_gflops) - 6:.1f}" text-anchor="end" '
        f'fill="#222">compute: {peak_gflops:g} GFLOP/s</text>'
    )
    (ax, ay), (bx, by) = [(px(x), py(y)) for x, y in ceiling[:2]]
    angle = math.degrees(math.atan2(by - ay, bx - ax))
    body.append(
        f'<text transform="translate({ax + 0.6 * (bx - ax):.1f},{ay + 0.6 * (by - ay) - 6:.1f}) '
        f'rotate({angle:.1f})" fill="#222">memory: {bandwidth_gbs:g} GB/s</text>'
    )
    for label, x in cases:
        bound = min(bandwidth_gbs * x, peak_gflops)
        what = f"{label}: {x:.3g} FLOP/byte, at most {bound:.4g} GFLOP/s"
        body += _case_mark(label, what, (px(x), py(bound)), y0, h, right=px(x) < x0 + w / 2)
    names = [p[0] for p in points]
    color = colors(names, baseline="")
    for n, x, y in points:
        body.append(
            f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="6" fill="{color[n]}" stroke="#fff" '
            f'stroke-width="1.5"><title>{escape(n)}: {y:.4g} GFLOP/s</title></circle>'
        )
    legend, extra = _legend(names, color, x0, height - 12, w, {}) if names else ([], 0)
    return _frame(width, height + extra - 18, title, body + legend, desc)


def _log_axes(x0, y0, w, h, xr, yr, px, py) -> list[str]:
    body = [
        f'<line x1="{x0}" y1="{y0}" x2="{x0 + w}" y2="{y0}" stroke="#444"/>',
        f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y0 - h}" stroke="#444"/>',
    ]
    for e in range(round(math.log10(xr[0])), round(math.log10(xr[1])) + 1):
        body.append(
            f'<text x="{px(10**e):.1f}" y="{y0 + 16}" text-anchor="middle" '
            f'fill="#444">{10**e:g}</text>'
        )
    for e in range(round(math.log10(yr[0])), round(math.log10(yr[1])) + 1):
        body.append(
            f'<text x="{x0 - 6}" y="{py(10**e) + 4:.1f}" text-anchor="end" '
            f'fill="#444">{10**e:g}</text>'
        )
    return body + [
        f'<text x="{x0 + w / 2}" y="{y0 + 36}" text-anchor="middle" fill="#222">FLOP per byte '
        f"(log)</text>",
        f'<text x="20" y="{y0 - h / 2}" transform="rotate(-90 20 {y0 - h / 2})" '
        f'text-anchor="middle" fill="#222">GFLOP/s (log)</text>',
    ]


def _case_mark(
    label: str, what: str, at: tuple[float, float], y0: float, h: float, right: bool
) -> list[str]:
    """A case's intensity as a dashed line, and a ring where it meets the ceiling, labelled on
    the side with more room."""
    cx, cy = at
    return [
        f'<line x1="{cx:.1f}" y1="{y0}" x2="{cx:.1f}" y2="{y0 - h}" stroke="#999" '
        f'stroke-dasharray="4 4"><title>{escape(what)}</title></line>',
        f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="6" fill="#fff" stroke="#555" '
        f'stroke-width="2"><title>{escape(what)}</title></circle>',
        f'<text x="{cx + (10 if right else -10):.1f}" y="{cy + 16:.1f}" '
        f'text-anchor="{"start" if right else "end"}" fill="#444" font-size="11">'
        f"{escape(label)}</text>",
    ]
