"""Log-log plots of the comparison: time and peak memory of one
loss+gradient against N, one line per library, with the LAPACK floor
(dpotrf + dpotri) and the 8 N^2 line drawn. Needs matplotlib (the ``bench``
extra); uses the Agg backend, so no display is needed."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ._problems import PROBLEMS  # noqa: E402
from .peers import LIBRARY_LABELS, library_for  # noqa: E402

__all__ = ["write_plots"]


def _series(doc, problem, library, pick):
    points = []
    for r in doc["cases"]:
        if (r["problem"] == problem and r["library"] == library and r["kind"] == "loss_grad"
                and r.get("status") == "ok"):
            y = pick(r)
            if y is not None:
                points.append((r["n"], y))
    return sorted(points)


def _time(key):
    def pick(r):
        try:
            return r["time"][key]["median_s"]
        except KeyError:
            return None
    return pick


def _finish(ax, fig, sizes, ylabel, title):
    ax.set(xscale="log", yscale="log", xlabel="N", ylabel=ylabel, title=title)
    if sizes:
        ax.set_xticks(sizes)
        ax.set_xticklabels([f"{n:,}" for n in sizes])
        ax.minorticks_off()
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()


def _plot(ax, points, **style):
    if points:
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", **style)


def write_plots(doc, img_dir):
    """Write comparison_time_<problem>.png and comparison_memory_<problem>.png
    per problem measured; return their paths."""
    img_dir = Path(img_dir)
    img_dir.mkdir(parents=True, exist_ok=True)
    written = []
    machine = doc["environment"]["cpu_model"]
    for problem in ("1d", "ard10", "seattle", "gplvm", "gpc"):
        libraries = sorted({r["library"] for r in doc["cases"] if r["problem"] == problem
                            and r["kind"] == "loss_grad" and r.get("status") == "ok"},
                           key=lambda name: (not name.startswith("fastgp"), name))
        if not libraries:
            continue
        fast = library_for("fastgp", problem)
        sizes = sorted({r["n"] for r in doc["cases"] if r["problem"] == problem
                        and r["kind"] == "loss_grad"})

        fig, ax = plt.subplots(figsize=(9.6, 4.8))
        for lib in libraries:
            _plot(ax, _series(doc, problem, lib, _time("loss_grad")),
                  label=LIBRARY_LABELS.get(lib, lib), linewidth=2.5 if lib == fast else 1.5)
        floor = _series(doc, problem, fast, _time("floor-potrf-potri"))
        if not floor and "no_floor" not in PROBLEMS[problem]:
            # GPLVM rows without fastgp: take any fastgp floor of the run
            floor = _series(doc, "1d", "fastgp", _time("floor-potrf-potri"))
        _plot(ax, floor, label="floor: dpotrf + dpotri", color="black", linestyle="--")
        _finish(ax, fig, sizes, "one loss+gradient (s, median)",
                f"{PROBLEMS[problem]['title']}\n{machine}")
        path = img_dir / f"comparison_time_{problem}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

        fig, ax = plt.subplots(figsize=(9.6, 4.8))
        for lib in libraries:
            _plot(ax, _series(doc, problem, lib, lambda r: r["memory"]["delta_mb"]),
                  label=LIBRARY_LABELS.get(lib, lib), linewidth=2.5 if lib == fast else 1.5)
        if sizes:
            grid = [sizes[0], sizes[-1]] if len(sizes) > 1 else sizes
            ax.plot(grid, [8 * n * n / 2**20 for n in grid], color="black", linestyle="--",
                    label="8 N^2 bytes (one N x N float64)")
            ax.plot(grid, [1.15 * 8 * n * n / 2**20 for n in grid], color="grey",
                    linestyle=":", label="target 1.15 x 8 N^2")
        _finish(ax, fig, sizes, "peak memory above baseline (MB)",
                f"{PROBLEMS[problem]['title']}\n{machine}")
        path = img_dir / f"comparison_memory_{problem}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
