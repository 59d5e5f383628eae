"""loom.memory.picture: the one-line pool summary and the picture of a plan (file format, pixel
size from the PNG header, one panel per pool) and its refusal of bad input."""

import dataclasses
import struct

import pytest

from loom import LoomError
from loom.memory.picture import DPI, PANEL_INCHES, WIDTH_INCHES, Panel, draw, summary_line
from loom.memory.planner import Buffer, plan

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _buffers():
    return [
        Buffer("input", 4096, 0, 2),
        Buffer("conv1", 8192, 1, 3, alignment=64),
        Buffer("relu1", 8192, 2, 4, alignment=64),
        Buffer("conv2", 2048, 3, 6),
        Buffer("pool", 1000, 4, 7),
        Buffer("output", 512, 6, 8),
    ]


def _panel(title="dram", capacity=1 << 20):
    buffers = _buffers()
    return Panel(title, tuple(buffers), plan(buffers), capacity)


def _png_size(path):
    """Width and height from the IHDR chunk, which follows the signature."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


# ------------------------------------------------------------------ summary line


def test_summary_line_states_the_plan():
    panel = _panel(capacity=1 << 20)
    line = summary_line(panel)
    expected = panel.plan
    assert "\n" not in line
    assert line.startswith("pool dram: 6 buffers, size 1,048,576 bytes, ")
    assert f"peak {expected.peak:,}," in line
    assert f"lower bound {expected.lower_bound:,}," in line
    assert f"peak/LB {expected.peak / expected.lower_bound:.3f}" in line
    assert expected.algorithm in line
    assert ("not proven optimal" in line) == (not expected.optimal)


def test_summary_line_without_capacity_and_without_buffers():
    assert "size as planned" in summary_line(_panel(capacity=None))
    empty = Panel("vtcm", (), plan([]), capacity=4096)
    assert summary_line(empty) == "pool vtcm: no buffers, size 4,096 bytes"


def test_summary_line_says_when_the_peak_is_over_the_size():
    panel = _panel(capacity=1000)
    assert f"OVER SIZE by {panel.plan.peak - 1000:,}" in summary_line(panel)


# ------------------------------------------------------------------ the picture


def test_draw_writes_a_png_of_the_expected_size(tmp_path):
    one = tmp_path / "p.png"
    draw([_panel()], one, title="model.onnx")
    width, height = _png_size(one)
    assert (width, height) == (round(WIDTH_INCHES * DPI), round(PANEL_INCHES * DPI))


def test_two_panels_are_taller_than_one(tmp_path):
    one, two = tmp_path / "one.png", tmp_path / "two.png"
    draw([_panel()], one)
    draw([_panel("dram"), _panel("sram", capacity=None)], two)
    (width1, height1), (width2, height2) = _png_size(one), _png_size(two)
    assert width1 == width2
    assert height2 == 2 * height1


def test_an_empty_pool_draws(tmp_path):
    path = tmp_path / "empty.png"
    draw([Panel("vtcm", (), plan([]), capacity=4096), Panel("l2", (), plan([]))], path)
    assert _png_size(path) == (round(WIDTH_INCHES * DPI), round(2 * PANEL_INCHES * DPI))


def test_the_format_follows_the_suffix(tmp_path):
    path = tmp_path / "p.svg"
    draw([_panel()], path)
    assert b"<svg" in path.read_bytes()[:1000]


def test_many_tiny_buffers_draw(tmp_path):
    # names that cannot fit in their rectangles are left out rather than spilling over
    buffers = [Buffer(f"a_rather_long_name_{i}", 1 + i % 7, i, i + 3) for i in range(200)]
    path = tmp_path / "many.png"
    draw([Panel("dram", tuple(buffers), plan(buffers, algorithm="greedy_by_size"))], path)
    assert _png_size(path)[0] == round(WIDTH_INCHES * DPI)


# ------------------------------------------------------------------ bad input


def test_a_buffer_missing_from_the_plan_is_named(tmp_path):
    panel = _panel()
    offsets = dict(panel.plan.offsets)
    del offsets["relu1"]
    broken = dataclasses.replace(panel, plan=dataclasses.replace(panel.plan, offsets=offsets))
    path = tmp_path / "p.png"
    with pytest.raises(LoomError, match="panel 'dram': buffer 'relu1' is not in its plan"):
        draw([broken], path)
    assert not path.exists()


def test_no_panels_is_an_error(tmp_path):
    with pytest.raises(LoomError, match="at least one Panel"):
        draw([], tmp_path / "p.png")
    with pytest.raises(LoomError, match=r"panels\[0\] must be a Panel"):
        draw(["dram"], tmp_path / "p.png")


def test_bad_panel_fields_are_named():
    buffers = _buffers()
    with pytest.raises(LoomError, match="capacity must be an int >= 0"):
        Panel("dram", tuple(buffers), plan(buffers), capacity=-1)
    with pytest.raises(LoomError, match=r"buffers\[0\] must be a Buffer"):
        Panel("dram", ("input",), plan(buffers))
    with pytest.raises(LoomError, match="plan must be a Plan"):
        Panel("dram", tuple(buffers), {"input": 0})
