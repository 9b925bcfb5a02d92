"""Every PNG exo-rt writes goes through :func:`save_png`, which checks the figure first.

A figure for people: each axes that shows data names what it shows with its unit — a label
ending in ``(unit)``, ``(%)`` or ``(0–1)`` for a fraction — and no legend entry is an
internal name (``v[V_LEVEL]``, ``s["level"]``, ``SOME_CONSTANT``). :data:`HOOKS` are called
with each figure before it is saved (the tests collect the figures there,
``tests/test_figures.py``); :func:`problems` says what a figure lacks.
"""

from __future__ import annotations

import re
from collections.abc import Callable

HOOKS: list[Callable] = []  # called as hook(fig, path) before a figure is saved

UNIT = re.compile(r"\([^()]+\)\s*$|\[[^\[\]]+\]\s*$")  # "… (unit)" at the label's end
INTERNAL = re.compile(r"\w\[|\[['\"A-Z]|^[A-Z][A-Z0-9]*_[A-Z0-9_]+$|\bself\.|\w\(\)")


def _has_data(ax) -> bool:
    """Lines, markers, bars or an image drawn (not a legend or text alone)."""
    return bool(ax.lines or ax.collections or ax.patches or ax.images)


def _named(axis) -> bool:
    """Ticks set with names (``set_yticks(rows, names)``: a timeline's or a table's rows), not
    numbers: fixed locations with fixed texts (matplotlib ≥ 3.9 formats them through a
    function, older ones through FixedFormatter)."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, FuncFormatter

    fmt = axis.get_major_formatter()
    return isinstance(fmt, FixedFormatter) or (
        isinstance(fmt, FuncFormatter) and isinstance(axis.get_major_locator(), FixedLocator))


def problems(fig) -> list[str]:
    """What ``fig`` lacks: an axis label without a unit on an axes that shows data (a diagram
    drawn with its axes off has none to label), a legend entry that is an internal name."""
    out = []
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible() or not _has_data(ax):
            continue
        title = ax.get_title() or f"axes {k}"
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            label = axis.get_label_text()
            if not ax.axison or not axis.get_visible() or not len(axis.get_ticklocs()) or \
                    _named(axis):
                continue  # no numbers on it: named rows (a timeline's), or none
            shared = (ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes())
            labels = [label] + [(a.get_xlabel() if which == "x" else a.get_ylabel())
                                for a in shared.get_siblings(ax) if a is not ax]
            if not label and any(lb and UNIT.search(lb) for lb in labels):
                continue  # a shared axis, labelled once (below or beside)
            if not label or not UNIT.search(label):
                out.append(f"{title}: the {which} axis label {label!r} has no unit")
        legend = ax.get_legend()
        for t in legend.get_texts() if legend is not None else ():
            if INTERNAL.search(t.get_text()):
                out.append(f"{title}: legend entry {t.get_text()!r} is an internal name")
    return out


def save_png(fig, target, **kwargs) -> None:
    """Run :data:`HOOKS` on ``fig``, then save it as PNG to ``target`` (a path or a binary
    file)."""
    for hook in HOOKS:
        hook(fig, target)
    kwargs.setdefault("format", "png")
    fig.savefig(target, **kwargs)
