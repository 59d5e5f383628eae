"""Real models, written elsewhere, compiled by loom for llvm and compared with onnxruntime.

The models live in a cache (`$LOOM_MODELS_DIR`, default `~/.cache/loom/models`) that
`python scripts/fetch-models.py` fills: models shipped in PyPI packages (magika, silero-vad,
PP-OCR from rapidocr-onnxruntime, NudeNet) and resnet18, mobilenet_v2 and a tiny BERT exported
with torch. A model missing from the cache is skipped with that command.

Each test compiles one model, runs it and onnxruntime on the same fixed input (a random one, or
a synthetic page or text line for the OCR models), and checks every output: the largest
difference relative to the output's largest magnitude is at most 1e-4, or, for a classifier,
the top five classes are the same (PP-OCR's recognizer passes so: loom and onnxruntime are each
about 2e-4 from a float64 evaluation of it, float32 rounding that its final softmax of large
logits amplifies). The run ends with a table (tests/models/summary.py).

`BLOCKED` lists models that cannot pass yet and why (a missing piece of loom): they are strict
xfails, so the change that makes one pass fails its test until its entry is removed.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import time
from collections.abc import Callable

import numpy as np
import pytest

import loom
from tests.models.summary import ROW

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

MODELS_DIR = pathlib.Path(os.environ.get("LOOM_MODELS_DIR") or "~/.cache/loom/models").expanduser()
FETCH = "python scripts/fetch-models.py"
RTOL = 1e-4


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    feeds: Callable[[np.random.Generator], dict[str, np.ndarray]]
    shapes: dict[str, tuple[int, ...]] | None = None
    classifier: str | None = None
    """The output whose last axis holds class scores (top-1 and top-5 are compared)."""

    @property
    def path(self) -> pathlib.Path:
        return MODELS_DIR / f"{self.name}.onnx"


def normal(*shape):
    return lambda rng: rng.standard_normal(shape).astype("float32")


def page(height: int, width: int, scale: int):
    """A synthetic page of random 5x7 glyphs, `scale` pixels per glyph pixel, dark on white,
    normalized as PaddleOCR does ((x - 0.5) / 0.5): text the detector finds (its probabilities
    reach 1), so the outputs compared are not all near zero."""

    def make(rng: np.random.Generator) -> np.ndarray:
        image = np.ones((height, width), np.float32)
        glyph_h, glyph_w = 7 * scale, 5 * scale
        pixel = np.ones((scale, scale), bool)
        for top in range(scale * 2, height - glyph_h, glyph_h + 3 * scale):
            for left in range(scale * 2, width - glyph_w, glyph_w + scale):
                if rng.random() < 0.15:
                    continue  # a space between words
                ink = np.kron(rng.random((7, 5)) < 0.45, pixel)
                image[top : top + glyph_h, left : left + glyph_w][ink] = 0.05
        image = image + rng.normal(0, 0.02, image.shape).astype(np.float32)
        return np.repeat(((image - 0.5) / 0.5)[None, None], 3, axis=1)

    return make


def bert_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    ids = rng.integers(0, 1000, (1, 32)).astype(np.int64)
    mask = np.ones((1, 32), np.int64)
    mask[0, 24:] = 0  # padding: the attention mask's additive bias
    return {"input_ids": ids, "attention_mask": mask}


def silero_inputs(samples: int, sample_rate: bool):
    def make(rng: np.random.Generator) -> dict[str, np.ndarray]:
        t = np.arange(samples) / 16000
        voice = 0.3 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 3 * t))
        audio = (voice + rng.normal(0, 0.05, samples)).astype(np.float32)[None]
        feeds = {"input": audio, "state": (rng.standard_normal((2, 1, 128)) * 0.1).astype("f4")}
        if sample_rate:
            feeds["sr"] = np.array(16000, np.int64)
        return feeds

    return make


CASES = [
    Case(
        "magika",
        lambda rng: {"bytes": rng.integers(0, 257, (1, 2048)).astype(np.int32)},
        shapes={"bytes": (1, 2048)},
        classifier="target_label",
    ),
    Case(
        "silero_vad_16k_op15",
        silero_inputs(512, sample_rate=True),
        shapes={"input": (1, 512), "state": (2, 1, 128)},
    ),
    Case("silero_vad_openvino_16k", silero_inputs(576, sample_rate=False)),
    Case("ppocrv4_det", lambda rng: {"x": page(320, 320, 2)(rng)}, shapes={"x": (1, 3, 320, 320)}),
    Case(
        "ppocrv4_rec",
        lambda rng: {"x": page(48, 320, 4)(rng)},
        shapes={"x": (1, 3, 48, 320)},
        classifier="softmax_11.tmp_0",
    ),
    Case(
        "ppocr_mobile_v2_cls",
        lambda rng: {"x": page(48, 192, 4)(rng)},
        shapes={"x": (1, 3, 48, 192)},
        classifier="save_infer_model/scale_0.tmp_1",
    ),
    Case(
        "nudenet_320n",
        lambda rng: {"images": rng.uniform(0, 1, (1, 3, 320, 320)).astype(np.float32)},
        shapes={"images": (1, 3, 320, 320)},
    ),
    Case("resnet18", lambda rng: {"input": normal(1, 3, 224, 224)(rng)}, classifier="logits"),
    Case("mobilenet_v2", lambda rng: {"input": normal(1, 3, 224, 224)(rng)}, classifier="logits"),
    Case("bert_tiny", bert_inputs, classifier="logits"),
]

BLOCKED: dict[str, str] = {}


def compare(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """The largest absolute difference, and that relative to the largest magnitude of `want`."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    scale = float(np.abs(want).max()) if want.size else 0.0
    largest = float(diff.max()) if diff.size else 0.0
    return largest, largest / scale if scale else largest


def top(scores: np.ndarray, k: int) -> np.ndarray:
    """The indices of the k largest scores along the last axis, largest first."""
    return np.argsort(-scores, axis=-1, kind="stable")[..., :k]


def onnx_node_count(path: pathlib.Path) -> int:
    """Nodes of the model, Constant nodes excepted (exporters differ in how they spell
    weights)."""
    model = onnx.load(str(path), load_external_data=False)
    return sum(1 for n in model.graph.node if n.op_type != "Constant")


def params() -> list:
    out = []
    for case in CASES:
        marks = []
        if case.name in BLOCKED:
            marks.append(pytest.mark.xfail(reason=BLOCKED[case.name], strict=True))
        out.append(pytest.param(case, id=case.name, marks=marks))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("case", params())
def test_model_matches_onnxruntime(case: Case, record_property):
    if not case.path.exists():
        pytest.skip(f"{case.path} is not in the model cache; run: {FETCH}")
    failed = "blocked" if case.name in BLOCKED else "failed"
    row = {"model": case.name, "onnx nodes": onnx_node_count(case.path), "result": failed}
    record_property(ROW, row)  # filled in as the test goes: a failure shows how far it got

    feeds = case.feeds(np.random.default_rng(0))
    session = ort.InferenceSession(str(case.path), providers=["CPUExecutionProvider"])
    start = time.perf_counter()
    want = session.run(None, feeds)
    row["ort run s"] = time.perf_counter() - start

    start = time.perf_counter()
    compiled = loom.compile(case.path, target="llvm", shapes=case.shapes)
    row["compile s"] = time.perf_counter() - start
    row["kernels"] = len(compiled.kernels)
    workspace = compiled.memory_plan["workspace"]
    row["tensors MB"] = sum(b.size for b in workspace.placed) / 1e6
    row["workspace MB"] = workspace.size / 1e6
    row["LB MB"] = workspace.plan.lower_bound / 1e6
    start = time.perf_counter()
    got = compiled(**feeds)
    row["loom run s"] = time.perf_counter() - start

    names = [o.name for o in session.get_outputs()]
    assert list(got) == names
    results = {}
    for name, expected in zip(names, want):
        results[name] = compare(got[name], expected)
    row["max abs"] = max(a for a, _ in results.values())
    row["max rel"] = max(r for _, r in results.values())
    top5_same = True
    if case.classifier is not None:
        scores_got, scores_want = got[case.classifier], want[names.index(case.classifier)]
        agree = np.mean(top(scores_got, 1) == top(scores_want, 1))
        row["top-1"] = f"{agree:.0%}"
        top5_same = bool(np.array_equal(top(scores_got, 5), top(scores_want, 5)))
    close = all(r <= RTOL for _, r in results.values())
    row["result"] = "ok" if close else "top-5" if case.classifier and top5_same else failed
    worst = {name: f"abs {a:.2e} rel {r:.2e}" for name, (a, r) in results.items()}
    assert close or (case.classifier is not None and top5_same), worst
