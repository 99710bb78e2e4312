"""The access-energy rule: what one level charges for `count` words of one kind of access.

An access moves a vector of `block_size` words (rounded up, as Timeloop does), plus any
per-byte energy. The cost model prices each instance's counts with it; fusion prices the words
its kernels add or remove with it too, so a change to the rule is made here once.
"""
from __future__ import annotations

KINDS = ("read", "write", "update")     # a fill is a write into the level


def access_energy(level, count, word_bytes: float, kind: str):
    """Energy of `count` words (a number or a numpy array) of one `kind` of access at `level`
    (a `spec.Level`)."""
    per_access, per_byte = {"read": (level.energy_read, level.byte_energy_read),
                            "write": (level.energy_write, level.byte_energy_write),
                            "update": (level.energy_update, level.byte_energy_update)}[kind]
    vectors = count if level.block_size == 1 else -(-count // level.block_size)
    return vectors * per_access + count * (word_bytes * per_byte)
