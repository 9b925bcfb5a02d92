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


def problems(fig) -> list[str]:
    """What ``fig`` lacks: an axis label without a unit on an axes that shows data, a legend
    entry that is an internal name."""
    from matplotlib.ticker import FixedFormatter

    out = []
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible() or not _has_data(ax):
            continue
        title = ax.get_title() or f"axes {k}"
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            label = axis.get_label_text()
            if not axis.get_visible() or not len(axis.get_ticklocs()) or \
                    isinstance(axis.get_major_formatter(), FixedFormatter):
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
