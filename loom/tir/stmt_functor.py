"""TVM's `tvm.tir.stmt_functor`: walking and rewriting statements (loom.ir.visitor's)."""

from loom.ir.visitor import post_order_visit, substitute

__all__ = ["post_order_visit", "substitute"]
