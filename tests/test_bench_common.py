"""bench/common.py's selection and table helpers: a `--only` that selects nothing is a usage
error naming the choices (it was a TypeError from an empty table)."""

import argparse
import importlib.util
import pathlib

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[1] / "bench" / "common.py"
_SPEC = importlib.util.spec_from_file_location("bench_common", _PATH)
common = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(common)

NAMES = ["resnet18 3x3 64", "resnet18 stem 7x7/2", "pointwise 32->64 112"]


def test_only_selects_by_substring_or_prefix():
    parser = argparse.ArgumentParser(prog="bench")
    assert common.only(parser, None, NAMES, "layer") == NAMES
    assert common.only(parser, "resnet18", NAMES, "layer") == NAMES[:2]
    assert common.only(parser, "3x3", NAMES, "layer") == NAMES[:1]
    assert common.only(parser, "pointwise", NAMES, "layer", prefix=True) == NAMES[2:]


def test_only_refuses_a_choice_that_selects_nothing(capsys):
    parser = argparse.ArgumentParser(prog="bench")
    with pytest.raises(SystemExit) as exit_:
        common.only(parser, "nosuch", NAMES, "layer")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--only 'nosuch' matches no layer" in err
    assert "resnet18 stem 7x7/2" in err
    with pytest.raises(SystemExit):
        common.only(parser, "3x3", NAMES, "layer", prefix=True)


def test_print_table_of_no_rows_prints_the_headers(capsys):
    common.print_table(["layer", "ms"], [])
    assert capsys.readouterr().out.split() == ["layer", "ms"]
