"""Target descriptions. A target's kind is a registered `loom.backend.Backend`: importing this
package registers the built-in kinds (llvm, c, hexagon, npu)."""

# loom's own target kinds register themselves when imported
from loom.backend import cpu as _cpu  # noqa: F401
from loom.backend.hexagon import DEFAULT_VTCM_BYTES
from loom.backend.npu import backend as _npu  # noqa: F401
from loom.target import codegen
from loom.target.target import Target, as_target


def hexagon(
    version: str = "v66", hvx: int = 128, vtcm_size: int = DEFAULT_VTCM_BYTES, opt_level: int = 3
) -> Target:
    """A Hexagon target: `version` v66, v67, v68, v69, v71 or v73, HVX vector length in bytes
    (0: none), VTCM bytes. Under qemu-hexagon 10 (`make setup`) code of every version runs,
    except HVX floating point (v68+ float vectors), which is compile-only; QEMU 7.2 runs v66 and
    v67 code only (docs/hexagon.md)."""
    return Target(f"hexagon -mcpu={version} -hvx={hvx} -vtcm={vtcm_size} -opt-level={opt_level}")


__all__ = ["Target", "as_target", "codegen", "hexagon"]
