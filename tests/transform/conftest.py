"""Fixtures of the pass tests: `scopes` registers two fixed-address memories."""

import pytest

from loom import memory
from tests.transform.memory_cases import SCRATCH_BASE, WORDS_BASE


@pytest.fixture
def scopes():
    """Two fixed-address memories: 256 bytes addressed in bytes (16-byte alignment) and 64 bytes
    addressed in 32-bit words."""
    registered = [
        memory.MemoryScope(
            "test.scratch",
            memory.FixedAddress(SCRATCH_BASE, 256, 8, "scratch"),
            alignment=16,
            accessible_from=("test_dev",),
        ),
        memory.MemoryScope(
            "test.words",
            memory.FixedAddress(WORDS_BASE, 64, 32, "words"),
            alignment=4,
            accessible_from=("test_dev",),
        ),
    ]
    for scope in registered:
        memory.register(scope, replace=True)
    yield
    for scope in registered:
        memory.unregister(scope.name)
