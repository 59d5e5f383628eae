"""A picture of a memory plan: for each pool, where every buffer lives in time and in memory.

Each pool gets a panel. Time (the buffer's lifetime, start..end) runs along the x axis and the
address in bytes (offset..offset+size) up the y axis, so each buffer is one filled rectangle;
two rectangles never overlap when the plan is valid. A dashed line marks the lower bound (the
most bytes alive at once, which no plan can go below), a solid line the plan's peak (the pool
size it needs) and a dotted line the pool's capacity when it is fixed; the gap between the
top of the rectangles and the lower bound is the memory lost to fragmentation. The panel's
title is `summary_line`: buffer count, size, peak, lower bound and their ratio.

This is what `loom plan model.onnx -o plan.png` draws. It uses matplotlib's object-oriented
API (a Figure with an Agg canvas, never pyplot), so it needs no display and leaves no global
figure behind.
"""

from __future__ import annotations

import colorsys
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator, MultipleLocator, NullLocator

from loom.errors import LoomError
from loom.memory.planner import Buffer, Plan

WIDTH_INCHES = 12.0
PANEL_INCHES = 3.5
DPI = 100
LABEL_FONT_SIZE = 7
# room above the highest line for its label
HEADROOM = 1.12
GOLDEN_RATIO = 0.618033988749895
UNITS = ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"), (1, "B"))


@dataclass(frozen=True)
class Panel:
    """One pool of a plan: its name, its buffers, their plan and the pool's size if fixed."""

    title: str
    buffers: tuple[Buffer, ...]
    plan: Plan
    capacity: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.title, str):
            raise LoomError(f"Panel title must be a str, got {type(self.title).__name__}")
        object.__setattr__(self, "buffers", tuple(self.buffers))
        for index, buffer in enumerate(self.buffers):
            if not isinstance(buffer, Buffer):
                raise LoomError(
                    f"panel {self.title!r}: buffers[{index}] must be a Buffer, "
                    f"got {type(buffer).__name__}"
                )
        if not isinstance(self.plan, Plan):
            raise LoomError(
                f"panel {self.title!r}: plan must be a Plan, got {type(self.plan).__name__}"
            )
        capacity = self.capacity
        if capacity is not None and (
            not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 0
        ):
            raise LoomError(
                f"panel {self.title!r}: capacity must be an int >= 0 or None, got {capacity!r}"
            )


def summary_line(panel: Panel) -> str:
    """One line about a pool, e.g. `pool dram: 12 buffers, size 1,048,576 bytes, peak 802,816,
    lower bound 802,816, peak/LB 1.000 (search, optimal)`."""
    size = "size as planned" if panel.capacity is None else f"size {panel.capacity:,} bytes"
    if not panel.buffers:
        return f"pool {panel.title}: no buffers, {size}"
    plan = panel.plan
    count = len(panel.buffers)
    proof = "optimal" if plan.optimal else "not proven optimal"
    over = ""
    if panel.capacity is not None and plan.peak > panel.capacity:
        over = f", OVER SIZE by {plan.peak - panel.capacity:,}"
    return (
        f"pool {panel.title}: {count:,} buffer{'s' if count != 1 else ''}, {size}, "
        f"peak {plan.peak:,}, lower bound {plan.lower_bound:,}, peak/LB {plan.ratio:.3f} "
        f"({plan.algorithm}, {proof}){over}"
    )


def draw(panels: Sequence[Panel], path: str | os.PathLike[str], title: str = "") -> None:
    """Write a picture of the panels, one above the other, to `path` (PNG, or whatever format
    matplotlib infers from its suffix): WIDTH_INCHES wide, PANEL_INCHES tall per panel."""
    panels = tuple(panels)
    if not panels:
        raise LoomError("draw: panels must hold at least one Panel, got none")
    for index, panel in enumerate(panels):
        if not isinstance(panel, Panel):
            raise LoomError(f"panels[{index}] must be a Panel, got {type(panel).__name__}")
        _check_placed(panel)
    figure = Figure(figsize=(WIDTH_INCHES, PANEL_INCHES * len(panels)), dpi=DPI)
    canvas = FigureCanvasAgg(figure)
    axes = figure.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, panel in zip(axes, panels):
        _draw_panel(ax, panel)
    if title:
        figure.suptitle(title, fontsize=12)
    figure.tight_layout()
    # names go in last: whether one fits depends on the final size of its rectangle
    renderer = canvas.get_renderer()
    for ax, panel in zip(axes, panels):
        _label_buffers(ax, panel, renderer)
    figure.savefig(path, dpi=DPI)


def _check_placed(panel: Panel) -> None:
    for buffer in panel.buffers:
        if buffer.name not in panel.plan.offsets:
            raise LoomError(
                f"panel {panel.title!r}: buffer {buffer.name!r} is not in its plan's offsets"
            )


def _draw_panel(ax: Axes, panel: Panel) -> None:
    ax.set_title(summary_line(panel), fontsize=9, loc="left")
    ax.set_xlabel("time (step)")
    ax.set_ylabel("address")
    if not panel.buffers:
        _draw_empty(ax, panel)
        return
    for index, buffer in enumerate(panel.buffers):
        ax.add_patch(
            Rectangle(
                (buffer.start, panel.plan.offsets[buffer.name]),
                buffer.end - buffer.start,
                buffer.size,
                facecolor=_colour(index),
                edgecolor="black",
                linewidth=0.4,
            )
        )
    first = min(b.start for b in panel.buffers)
    last = max(b.end for b in panel.buffers)
    ax.set_xlim(first, last)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    top = max(panel.plan.peak, panel.plan.lower_bound, panel.capacity or 0, 1)
    ax.set_ylim(0, top * HEADROOM)
    _format_addresses(ax, top)
    _draw_lines(ax, panel)


def _draw_empty(ax: Axes, panel: Panel) -> None:
    top = max(panel.capacity or 0, 1)
    ax.set_xlim(0, 1)
    # there is no time to show
    ax.xaxis.set_major_locator(NullLocator())
    ax.set_ylim(0, top * HEADROOM)
    _format_addresses(ax, top)
    if panel.capacity is not None:
        _line(ax, panel.capacity, ":", "right", f"capacity {panel.capacity:,}")
    ax.text(
        0.5,
        0.5,
        "no buffers in this pool",
        transform=ax.transAxes,
        ha="center",
        va="center",
        fontsize=11,
        color="grey",
    )


def _draw_lines(ax: Axes, panel: Panel) -> None:
    """Lower bound, peak and capacity, each labelled at a different end so that coinciding
    lines keep readable labels."""
    plan = panel.plan
    _line(ax, plan.lower_bound, "--", "right", f"lower bound {plan.lower_bound:,}")
    _line(ax, plan.peak, "-", "left", f"peak {plan.peak:,}")
    if panel.capacity is not None:
        _line(ax, panel.capacity, ":", "center", f"capacity {panel.capacity:,}")


def _line(ax: Axes, y: int, style: str, where: str, label: str) -> None:
    ax.axhline(y, linestyle=style, color="black", linewidth=1.0)
    x = {"left": 0.005, "center": 0.5, "right": 0.995}[where]
    ax.text(
        x,
        y,
        label,
        transform=ax.get_yaxis_transform(),
        ha=where,
        va="bottom",
        fontsize=8,
        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 1},
    )


def _label_buffers(ax: Axes, panel: Panel, renderer: RendererAgg) -> None:
    """Write each buffer's name in its rectangle when the name fits inside it."""
    for buffer in panel.buffers:
        offset = panel.plan.offsets[buffer.name]
        corners = ax.transData.transform(
            [(buffer.start, offset), (buffer.end, offset + buffer.size)]
        )
        (left, bottom), (right, top) = corners
        text = ax.text(
            (buffer.start + buffer.end) / 2,
            offset + buffer.size / 2,
            buffer.name,
            ha="center",
            va="center",
            fontsize=LABEL_FONT_SIZE,
            clip_on=True,
        )
        extent = text.get_window_extent(renderer)
        if extent.width > right - left - 2 or extent.height > top - bottom - 2:
            text.remove()


def _colour(index: int) -> tuple[float, float, float]:
    """A light colour whose hue is far from those of the indexes just before it, so neighbours
    in the buffer list differ however many buffers there are."""
    hue = (index * GOLDEN_RATIO) % 1.0
    return colorsys.hsv_to_rgb(hue, 0.45, 0.95)


def _format_addresses(ax: Axes, top: int) -> None:
    """Ticks at round numbers of the largest binary unit (B, KiB, MiB, GiB) below the top."""
    scale, unit = next((s, u) for s, u in UNITS if top >= 2 * s or s == 1)
    step = _round_step(top / scale / 6)
    if scale == 1:
        step = max(step, 1)
    ax.yaxis.set_major_locator(MultipleLocator(step * scale))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value / scale:g} {unit}"))


def _round_step(raw: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is at least `raw`."""
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
