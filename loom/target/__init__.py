"""Target descriptions. A target's kind is a registered `loom.backend.Backend`: importing this
package registers the built-in kinds (llvm, c, hexagon, npu)."""

# loom's own target kinds register themselves when imported
from loom.backend import cpu as _cpu  # noqa: F401
from loom.backend.hexagon import DEFAULT_VTCM_BYTES
from loom.backend.npu import backend as _npu  # noqa: F401
from loom.target.target import Target, as_target


def hexagon(
    version: str = "v66", hvx: int = 128, vtcm_size: int = DEFAULT_VTCM_BYTES, opt_level: int = 3
) -> Target:
    """A Hexagon target: `version` v66/v67 (run under qemu-hexagon) or v68/v69/v73 (compile
    only here), HVX vector length in bytes (0: none), VTCM bytes."""
    return Target(f"hexagon -mcpu={version} -hvx={hvx} -vtcm={vtcm_size} -opt-level={opt_level}")


__all__ = ["Target", "as_target", "hexagon"]
