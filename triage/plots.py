"""PNG plots of metric series around an anomaly, with its onset marked.

Drawn with matplotlib's object API on the Agg canvas (no pyplot, no display, no global
figure state), so the service can draw from several worker threads. Each plot returns
where its axes lie in the image and the x range they show, so a reader (or a test) can
find the pixel column of any step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from triage.metrics import Series

ONSET_COLOR = "#e6007e"  # the onset marker: a magenta no other element of the plot uses
SERIES_COLOR = "#1f5fa8"
NONFINITE_COLOR = "#000000"
SIZE_IN = (8.0, 3.0)
DPI = 100
# Points either side of the onset shown when a series is long.
WINDOW_MIN = 40


@dataclass(frozen=True)
class Plot:
    """One PNG: the metric it shows and where things are in the image."""

    path: Path
    metric: str  # canonical name, e.g. "grad_norm"
    source: str  # "kind:key", e.g. "step:train/grad_norm"
    onset_step: int | None
    xlim: tuple[float, float]
    axes_px: tuple[float, float, float, float]  # left, top, right, bottom in image pixels (origin top-left)
    size_px: tuple[int, int]  # width, height
    points: int  # records drawn
    nonfinite: int  # of which NaN / Inf

    def column_of(self, step: float) -> int:
        """The image column where `step` is drawn."""
        left, _top, right, _bottom = self.axes_px
        lo, hi = self.xlim
        return int(round(left + (step - lo) / (hi - lo) * (right - left)))


def window(steps: np.ndarray, onset: int | None, half: int | None = None) -> np.ndarray:
    """A mask of the records to draw: everything when short, else the stretch around the onset."""
    n = steps.shape[0]
    if onset is None or n <= 3 * WINDOW_MIN:
        return np.ones(n, dtype=bool)
    half = half or max(WINDOW_MIN, n // 6)
    at = int(np.searchsorted(steps, onset))
    lo, hi = max(0, at - half), min(n, at + half + 1)
    mask = np.zeros(n, dtype=bool)
    mask[lo:hi] = True
    return mask


def plot_series(series: Series, out: Path, *, onset_step: int | None = None, onset_label: str | None = None,
                title: str | None = None) -> Plot:
    """Draw `series` (non-finite values as crosses along the top) with a vertical line at the onset."""
    order = np.argsort(series.steps, kind="stable")
    steps = series.steps[order].astype(np.float64)
    values = series.values[order]
    keep = window(series.steps[order], onset_step)
    steps, values = steps[keep], values[keep]
    ok = np.isfinite(values)

    fig = Figure(figsize=SIZE_IN, dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_facecolor("white")
    if ok.any():
        ax.plot(steps[ok], values[ok], color=SERIES_COLOR, linewidth=1.4, marker="o", markersize=2.5, label=series.key)
    if (~ok).any():
        finite_vals = values[ok]
        top = float(finite_vals.max()) if finite_vals.size else 1.0
        span = float(finite_vals.max() - finite_vals.min()) if finite_vals.size > 1 else abs(top) or 1.0
        ax.scatter(steps[~ok], np.full((~ok).sum(), top + 0.08 * span), marker="x", color=NONFINITE_COLOR,
                   s=28, linewidths=1.5, label="NaN / Inf", zorder=4)
    lo = float(steps.min()) if steps.size else 0.0
    hi = float(steps.max()) if steps.size else 1.0
    if onset_step is not None:
        lo, hi = min(lo, float(onset_step)), max(hi, float(onset_step))
    pad = max(0.5, 0.03 * (hi - lo))
    ax.set_xlim(lo - pad, hi + pad)
    if onset_step is not None:
        ax.axvline(onset_step, color=ONSET_COLOR, linewidth=2.2, zorder=5)
        # NaN crosses sit along the top: the label goes to the bottom then.
        at_top = not (~ok).any()
        ax.annotate(onset_label or f"onset: step {onset_step}", xy=(onset_step, 1.0 if at_top else 0.0),
                    xycoords=("data", "axes fraction"), xytext=(5, -13 if at_top else 5), textcoords="offset points",
                    color=ONSET_COLOR, fontsize=9, fontweight="bold",
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1.0})
    default_title = series.name if series.name == series.key else f"{series.name} ({series.key})"
    ax.set_title(title or default_title, fontsize=10)
    ax.set_xlabel("step" if not series.source.startswith("rollout") else "rollout")
    ax.grid(True, color="#dddddd", linewidth=0.6)
    if (~ok).any():
        ax.legend(loc="upper left", fontsize=8, frameon=False)
    fig.tight_layout()
    canvas.draw()

    width, height = (int(round(v)) for v in fig.get_size_inches() * fig.dpi)
    box = ax.get_window_extent()
    axes_px = (float(box.x0), float(height - box.y1), float(box.x1), float(height - box.y0))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=DPI, facecolor="white")
    xlim = tuple(float(v) for v in ax.get_xlim())
    return Plot(path=out, metric=series.name, source=series.source, onset_step=onset_step, xlim=xlim,  # type: ignore[arg-type]
                axes_px=axes_px, size_px=(width, height), points=int(steps.size), nonfinite=int((~ok).sum()))


def safe_name(text: str) -> str:
    """A file name part from a metric name: `train/grad_norm` -> `train_grad_norm`."""
    out = "".join(c if c.isalnum() or c in "-_" else "_" for c in text).strip("_")
    return out or "metric"

