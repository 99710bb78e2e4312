"""The access-energy rule: what one level charges for `count` words of one kind of access.

An access moves a vector of `block_size` words (rounded up, as Timeloop does), plus any
per-byte energy. The cost model (scalar and vectorised) prices each instance's counts with it;
fusion prices the words its kernels add or remove with it, and the search's bounds and CP-SAT's
model price a word with it, block rounding relaxed (`per_word`): a change to the rule is made
here once.
"""
from __future__ import annotations

KINDS = ("read", "write", "update")     # a fill is a write into the level


def access_energy(level, count, word_bytes: float, kind: str, rounded: bool = True):
    """Energy of `count` words (a number or a numpy array) of one `kind` of access at `level`
    (a `spec.Level`): whole vectors of `block_size` words, as Timeloop charges them, or with
    `rounded` False the fraction count / block_size of a vector (what the search's bounds
    charge: never above the rounded figure). A zero price adds nothing, not even 0.0."""
    per_access, per_byte = {"read": (level.energy_read, level.byte_energy_read),
                            "write": (level.energy_write, level.byte_energy_write),
                            "update": (level.energy_update, level.byte_energy_update)}[kind]
    out = 0.0
    if per_access:
        if level.block_size == 1:
            out = out + count * per_access
        elif rounded:
            out = out + -(-count // level.block_size) * per_access
        else:
            out = out + count * per_access / level.block_size
    if per_byte:
        out = out + count * (word_bytes * per_byte)
    return out


def per_word(level, word_bytes: float, kind: str) -> float:
    """Energy of one word of `kind` at `level`, block rounding relaxed (a lower bound's price)."""
    return access_energy(level, 1.0, word_bytes, kind, rounded=False)
