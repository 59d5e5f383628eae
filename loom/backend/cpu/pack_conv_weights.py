"""pack_conv_weights: the CPU's graph pass that lays each convolution's constant weights out as
its register tile reads them, once, at compile time.

conv_schedules.py computes a convolution in tiles of C output channels; at each reduction step
(input channel, kernel row, kernel column) the tile reads one weight per channel. In ONNX's
layout W[O, I, KH, KW] those C weights lie KH*KW*I floats apart: the tile reads its weights as
C separate short streams, which the hardware prefetcher follows poorly, and in a whole model,
where each layer's weights come from memory once per run, that cost mobilenet_v2 about 1.3 ms
of 9 (bench/model_gap.py, "sequence" against "sequence, weights warm"). Here a Conv with
constant weights gets them as [O / C, I / group, KH, KW, C] (onnxruntime's blocked layout for
its NCHWc kernels) and the attribute `loom.weight_block` = C (loom/graph/ops/nn.py reads W
through it): a tile's weights are then one contiguous stream, C consecutive floats per step.

C is the tile's channel count for the target (`conv_schedules.channel_tile`, from the same
rule and cost model the schedule uses), so the schedule's split of the output channels by C
turns `m // C` and `m % C` into the tile's loop variables. Convolutions whose tile has one
channel (depthwise, or left to group_schedules.py) keep their layout: it is already one
stream per channel; so do those whose filters are longer than MAX_FILTER_BYTES, unless their
tile puts the output channels in the vector lanes (conv_channels.py): that tile loads each
step's weights of its channels as vectors, contiguous only when packed. Nodes
reading the same weights with the same C share the packed constant; a constant nothing reads
any more is dropped.

The CPU backend runs it for the model's target (Backend.graph_passes(target)); called without
one, C is computed for this machine's CPU. On a CPU other than the one C was computed for, the
schedule's tile takes the block's C channels (when they fit its registers), so the weights
are still read without a division; results never depend on C.
"""

from __future__ import annotations

import dataclasses
import functools

import llvmlite.binding as llvm

from loom.backend.cpu.conv_schedules import channel_tile, channels_in_lanes
from loom.backend.cpu.dense_tiles import VectorUnit
from loom.graph.ir import Graph, Node
from loom.graph.ops import OPERATORS
from loom.graph.ops.nn import WEIGHT_BLOCK, block_weights
from loom.graph.passes.eliminate_dead import eliminate_dead
from loom.graph.passes.pack_weights import fresh_name, taken_names
from loom.te.operation import placeholder
from loom.te.schedule import create_schedule
from loom.te.tensor import ComputeOp, Reduce

MAX_FILTER_BYTES = 8192
"""Filters longer than this keep ONNX's layout: each of a tile's channels is then a stream
long enough for the prefetcher, and several streams keep more reads in flight than one
(measured in resnet18 run whole: its 3x3 convolutions of 256 and 512 channels, 9 and 18 KB
filters, were 1-3 % slower packed; those of 64 and 128 channels, 2.3 and 4.6 KB, and the
1x1 ones as fast or faster; mobilenet_v2's filters are at most 3.8 KB). Not for a tile with
its channels in the lanes (conv_channels.py: resnet18's 3x3 convolutions at 14x14 and 7x7
since): it needs the packed layout for its vector loads."""


@dataclasses.dataclass(frozen=True)
class HostCPU:
    """What conv_schedules.py asks of a target, for this machine (as loom.target's host
    target answers it; that package registers the backends, which import this module)."""

    vector_bytes: int
    cpu: str
    masked_loads_are_safe: bool = True


@functools.cache
def host_cpu() -> HostCPU:
    return HostCPU(VectorUnit.of(None).vector_bytes, llvm.get_host_cpu_name())


def conv_channel_tile(node: Node, graph: Graph, target=None) -> int | None:
    """The channels of the register tile conv_schedules.py gives Conv `node` of `graph` for
    `target` (None: this machine's CPU); None if it gives none."""
    tile = _conv_tile(node, graph, target)
    return None if tile is None else tile[0]


def _conv_tile(node: Node, graph: Graph, target) -> tuple[int, bool] | None:
    """The channels of the tile conv_schedules.py gives Conv `node`, and whether they are in
    the vector lanes (conv_channels.py); None if it gives none."""
    tensors = [
        placeholder(graph.type_of(v).shape, dtype=graph.type_of(v).dtype, name=f"input{k}")
        if v
        else None
        for k, v in enumerate(node.inputs)
    ]
    out_types = [graph.type_of(v) for v in node.outputs]
    outputs = OPERATORS.get("Conv").compute(node, tensors, {}, out_types)
    s = create_schedule([t.op for t in outputs])
    for stage in s.stages:
        if isinstance(stage.op, ComputeOp) and isinstance(stage.op.body, Reduce):
            target = host_cpu() if target is None else target
            channels = channel_tile(s, stage, target)
            if channels is None:
                return None
            return channels, channels_in_lanes(s, stage, target)
    return None


def _block(node: Node, graph: Graph, target) -> int | None:
    """The block of output channels `node`'s weights are packed in, or None: leave them."""
    if node.op != "Conv" or node.attr(WEIGHT_BLOCK) is not None or len(node.inputs) < 2:
        return None
    w = graph.constants.get(node.inputs[1])
    if w is None or w.ndim != 4:  # the schedules tile 2-D convolutions only
        return None
    tile = _conv_tile(node, graph, target)
    if tile is None:
        return None
    block, in_lanes = tile
    if w[0].nbytes > MAX_FILTER_BYTES and not in_lanes:
        return None  # a tile of channels in the lanes loads its block's weights as vectors
    if block == 1 or w.shape[0] % block:
        return None
    return block


def pack_conv_weights(graph: Graph, target=None) -> Graph:
    """`graph` with each Conv of constant weights reading them in blocks of its tile's output
    channels (`loom.weight_block`), for `target` (None: this machine's CPU)."""
    constants = dict(graph.constants)
    taken = taken_names(graph)
    packed: dict[tuple[str, int], str] = {}  # (weights, block) -> the packed constant
    nodes: list[Node] = []
    for node in graph.nodes:
        block = _block(node, graph, target)
        if block is None:
            nodes.append(node)
            continue
        w = node.inputs[1]
        if (w, block) not in packed:
            packed[w, block] = fresh_name(f"{w}.blocked{block}", taken)
            constants[packed[w, block]] = block_weights(constants[w], block)
        inputs = (node.inputs[0], packed[w, block], *node.inputs[2:])
        nodes.append(node.replace(inputs=inputs, attrs={**node.attrs, WEIGHT_BLOCK: block}))
    if not packed:
        return graph
    return eliminate_dead(graph.with_nodes(nodes, constants))  # the unpacked weights, if unread


__all__ = ["MAX_FILTER_BYTES", "HostCPU", "conv_channel_tile", "host_cpu", "pack_conv_weights"]
