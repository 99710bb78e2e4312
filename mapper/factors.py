"""Integer factorisations: the raw material of a mapspace.

An *ordered k-factorisation* of n is a tuple (f_1, ..., f_k) of positive integers whose
product is n. Per prime p^e of n, the exponents of p split over the k slots as a composition
of e into k non-negative parts, independently of other primes; so the count is
prod_p C(e + k - 1, k - 1) and a uniform sample picks each prime's composition uniformly.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=4096)        # a bounded memo of a pure function: the dims of a sweep's shapes
def prime_factorization(n: int) -> tuple[tuple[int, int], ...]:
    """((p, e), ...) with n = prod p**e, primes ascending."""
    out, p = [], 2
    while p * p <= n:
        e = 0
        while n % p == 0:
            n //= p
            e += 1
        if e:
            out.append((p, e))
        p += 1
    if n > 1:
        out.append((n, 1))
    return tuple(out)


def count_factorizations(n: int, k: int) -> int:
    """Number of ordered k-factorisations of n (closed form, no enumeration)."""
    return math.prod(math.comb(e + k - 1, k - 1) for _, e in prime_factorization(n))


@lru_cache(maxsize=1024)
def _compositions(e: int, k: int) -> np.ndarray:
    """All compositions of e into k non-negative parts, (C(e+k-1, k-1), k), in lexicographic
    order (the order of `itertools.combinations` of the bars). Built part by part in numpy: a
    dim of 2^20 over 8 slots has 888,030 of them, a few seconds as Python tuples. Read-only
    (memoised)."""
    if k == 1:
        out = np.array([[e]], dtype=np.int64)
    else:
        out = np.concatenate([np.hstack([np.full((len(rest), 1), first, np.int64), rest])
                              for first in range(e + 1) for rest in [_compositions(e - first, k - 1)]])
    out.setflags(write=False)
    return out


def enumerate_factorizations(n: int, k: int) -> np.ndarray:
    """Every ordered k-factorisation of n as rows of a (count, k) int64 array."""
    table = np.ones((1, k), dtype=np.int64)
    for p, e in prime_factorization(n):
        powers = p ** _compositions(e, k)
        table = (table[:, None, :] * powers[None, :, :]).reshape(-1, k)
    return table


def sample_factorizations(n: int, k: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` ordered k-factorisations of n drawn uniformly (no rejection), (count, k)."""
    out = np.ones((count, k), dtype=np.int64)
    for p, e in prime_factorization(n):
        # A uniform composition of e into k parts: choose k-1 bar positions among e+k-1.
        keys = rng.random((count, e + k - 1))
        bars = np.sort(np.argsort(keys, axis=1)[:, :k - 1], axis=1)
        cuts = np.concatenate([np.full((count, 1), -1), bars, np.full((count, 1), e + k - 1)], axis=1)
        out *= p ** (np.diff(cuts, axis=1) - 1)
    return out


def smooth_numbers(low: int, high: int, primes: tuple[int, ...] = (2, 3, 5, 7)) -> list[int]:
    """Numbers in [low, high] whose prime factors are all in `primes`, ascending. Built from
    the primes' powers (a few thousand numbers below 2^31), not by factorising the range."""
    out = [1]
    for p in primes:
        out = [n * p**e for n in out for e in range(high.bit_length() + 1) if n * p**e <= high]
    return sorted(n for n in out if n >= low)


def padded_extents(size: int, max_padding: float, limit: int = 8) -> tuple[int, ...]:
    """Extents a dim may be padded to: its size and the smoothest (largest prime factor <= 7)
    numbers up to size * (1 + max_padding), closest first; at most `limit` of them, so a dim
    of 6144 or 4099 stays a handful of candidates."""
    top = int(size * (1 + max_padding))
    smooth = smooth_numbers(size + 1, top)      # listed directly: a range of 10^8 is not scanned
    return (size,) + tuple(sorted(smooth)[: limit - 1])
