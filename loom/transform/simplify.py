"""simplify: constant folding and canonical index arithmetic in every function.

Afterwards index expressions are in canonical form (no `i*1 + 0`), provably true guards and
loops of extent 0 or 1 are gone.
"""

from __future__ import annotations

from loom.ir.simplify import simplify_module
from loom.transform.pass_infra import Pass, register_pass

simplify = register_pass(Pass("simplify", simplify_module))
