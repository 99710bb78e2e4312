"""Command-line values: one argparse type per kind of value, shared by every subcommand.

Each type refuses, on one line, anything that is not a finite number of its kind within
[low, MAX_FLAG]: text that is no number, NaN, infinities, values below its floor (negatives
everywhere, and 0 where the value must be positive) and absurd ones above 1e9. argparse prints
the message after the flag's name (`argument --time-limit: expected ...`) and exits with
status 2, before any input is read.

- `seconds`: a time limit, > 0;
- `seconds_or_zero`: a time cap where 0 says none (CP-SAT's proposals, a sweep point's limit);
- `count`: a number of things, >= 1 (samples, evaluations, processes, an exact-count limit);
- `count_or_zero`: an integer >= 0 (a seed).
"""
from __future__ import annotations

import argparse
import math

MAX_FLAG = 10**9


def _number(kind, low: float, inclusive: bool, what: str):
    """An argparse type reading `kind` (int or float) within [low, MAX_FLAG] (low excluded
    unless `inclusive`); `what` names the kind in the message."""
    def parse(text: str):
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text[:40]!r}") from None
        # NaN is the one value unequal to itself; no math.isnan/isinf: an int of 400 digits
        # would overflow their conversion to float
        if value != value or value in (math.inf, -math.inf) or value < low \
                or (value == low and not inclusive) or value > MAX_FLAG:
            raise argparse.ArgumentTypeError(f"expected {what} up to 1e9, got {text[:40]!r}")
        return value
    return parse


seconds = _number(float, 0.0, False, "a number of seconds > 0")
seconds_or_zero = _number(float, 0.0, True, "a number of seconds >= 0")
count = _number(int, 1, True, "a positive integer")
count_or_zero = _number(int, 0, True, "an integer >= 0")
