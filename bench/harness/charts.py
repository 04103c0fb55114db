"""Charts of a series per turn: text sparklines and the sawtooth chart for the terminal, and the
figure (a PNG, with matplotlib) bench/sawtooth.py writes."""

from __future__ import annotations

from pathlib import Path

CHART_WIDTH = 60
CHART_HEIGHT = 10

SPARKS = "▁▂▃▄▅▆▇█"


def bins(values: list[int], width: int) -> list[list[int]]:
    """Indices of `values` split into at most `width` consecutive, nearly equal groups."""
    n = len(values)
    width = min(width, n)
    return [list(range(i * n // width, (i + 1) * n // width)) for i in range(width)]


def sparkline(values: list[int], top: int, width: int = CHART_WIDTH) -> str:
    out = []
    for group in bins(values, width):
        v = max(values[i] for i in group)
        out.append(SPARKS[min(len(SPARKS) - 1, int(v / top * len(SPARKS)))] if v < top else "!")
    return "".join(out)


def ascii_chart(
    with_c: list[int], naive: list[int], marks: set[int], budget: int, threshold: int
) -> list[str]:
    """Rows of the sawtooth (█, max per column) against the budget; · is the naive window,
    ↑ where it is above the budget; ^ marks columns holding a compaction."""
    groups = bins(with_c, CHART_WIDTH)
    peaks = [max(with_c[i] for i in g) for g in groups]
    naive_peaks = [max(naive[i] for i in g) for g in groups]
    step = budget / CHART_HEIGHT
    lines = []
    for r in range(CHART_HEIGHT, 0, -1):
        lo, hi = step * (r - 1), step * r
        cells = []
        for v, nv in zip(peaks, naive_peaks, strict=True):
            if v >= hi:
                cells.append("█")
            elif v >= lo + step / 2:
                cells.append("▄")
            elif r == CHART_HEIGHT and nv > budget:
                cells.append("↑")
            elif lo <= nv < hi:
                cells.append("·")
            elif lo <= threshold < hi:
                cells.append("-")
            else:
                cells.append(" ")
        label = ""
        if r == CHART_HEIGHT:
            label = "  budget"
        elif lo <= threshold < hi:
            label = f"  auto threshold {threshold:,} (bottom of this row)"
        lines.append(f"{hi:>8,.0f} |{''.join(cells)}|{label}")
    lines.append(f"{0:>8} +{'-' * len(groups)}+")
    lines.append(
        " " * 10
        + "".join("^" if any(i + 1 in marks for i in g) else " " for g in groups)
        + "  ^ compaction"
    )
    last = len(with_c)
    axis = f"turn 1{' ' * max(1, len(groups) - len('turn 1') - len(str(last)))}{last}"
    lines.append(" " * 10 + axis)
    per = len(with_c) / len(groups)
    lines.append(
        f"          █ with compaction (peak of each column, {per:.0f} turn(s) per column)  "
        "· naive  ↑ naive above the budget"
    )
    return lines


def write_png(path: Path, sent, naive, peaks: dict[int, int], budget, wall) -> None:
    """Two panels: the whole picture (the naive line runs away), and zoomed to the budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    x = list(range(1, len(sent) + 1))
    fig, (full, zoom) = plt.subplots(
        2, 1, figsize=(11, 8), sharex=True, gridspec_kw={"height_ratios": [1, 1.6]}
    )
    for ax in (full, zoom):
        ax.plot(x, naive, color="tab:gray", lw=1.4, label="without compaction (whole transcript)")
        ax.plot(x, sent, color="tab:blue", lw=1.2, label="with compaction (window sent)")
        ax.axhline(budget.total, color="tab:red", lw=1, label=f"budget {budget.total:,}")
        ax.axhline(
            budget.threshold,
            color="tab:orange",
            lw=1,
            ls="--",
            label=f"auto threshold {budget.threshold:,}",
        )
        ax.grid(alpha=0.25)
        ax.set_ylabel("input tokens per turn")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    if wall:
        zoom.axvline(wall, color="tab:red", ls=":", lw=1)
        zoom.annotate(
            f"naive window passes the budget at turn {wall}",
            (wall, budget.total * 1.07),
            xytext=(6, 0),
            textcoords="offset points",
            color="tab:red",
            fontsize=8,
            va="center",
        )
    marked = sorted(peaks)
    zoom.scatter(
        marked,
        [peaks[n] for n in marked],
        marker="v",
        color="tab:green",
        zorder=3,
        label="compaction after the turn's reply (at its pre_tokens)",
    )
    zoom.set_ylim(0, budget.total * 1.15)
    full.set_title(f"Window tokens per turn over {len(sent)} turns (fake model, estimated tokens)")
    zoom.set_title("Zoomed to the budget: the sawtooth", fontsize=10)
    zoom.set_xlabel("turn")
    handles, labels = zoom.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
