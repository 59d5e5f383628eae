"""Graph passes: each takes a Graph and returns a new one (loom/graph/passes/pipeline.py lists
them in order)."""
