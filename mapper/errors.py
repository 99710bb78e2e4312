"""The project's small error hierarchy.

Every error a user can cause carries a message that names the file, the key path inside it
and what was expected, so the CLI can print it on one line and exit with status 2. Messages
never echo a huge input back: values are shown through `shown` and every part is clipped.
"""
import math
import reprlib

MAX_PART = 300          # characters of a file name, key path or explanation kept in a message
# Integers this long are described, not written: Python refuses to turn an int of more than
# 4,300 digits into text (a quadratic conversion), and one of 30 digits is already unreadable
MAX_SHOWN_DIGITS = 30


def amount(value) -> str:
    """An integer or float from user input, written for an error message: with thousands
    separators, or as its number of digits when it is too long to write (a YAML hex or octal
    literal may hold more digits than Python converts to text)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > MAX_SHOWN_DIGITS * 3:       # 90 bits: about 27 digits or more
            digits = int(value.bit_length() * math.log10(2)) + 1
            return f"{'-' if value < 0 else ''}a number of about {digits:,} digits"
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    return shown(value)


class _ShortRepr(reprlib.Repr):
    """reprlib's repr with an error message's limits. `reprlib.Repr.__init__` sets its limits on
    the instance, so they are set here after it; `shown` builds one per call (no shared state)."""

    def __init__(self):
        super().__init__()
        self.maxstring = self.maxother = 60
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = 6
        self.maxlevel = 3

    def repr_int(self, x, level):
        return amount(x) if x.bit_length() > MAX_SHOWN_DIGITS * 3 else super().repr_int(x, level)


def shown(value) -> str:
    """A short repr of user input for an error message (long strings, deep or aliased YAML
    structures cut with '...')."""
    return _ShortRepr().repr(value)


def clipped(text: str, limit: int = MAX_PART) -> str:
    """One line of at most `limit` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


class MapperError(Exception):
    """Base class: an error the user can act on (the CLI prints it, never a traceback)."""


class SpecError(MapperError):
    """A spec (architecture, workload, mapping, constraints) is malformed or inconsistent."""

    def __init__(self, where: str, path: str, expected: str):
        self.where, self.path, self.expected = where, path, expected
        location = f"{clipped(where)}: {clipped(path)}" if path else clipped(where)
        super().__init__(f"{location}: {clipped(expected, 2 * MAX_PART)}")


class InfeasibleError(MapperError):
    """No mapping satisfies the constraints; the message says which constraint and by how much."""


class BudgetExhausted(InfeasibleError):
    """The search's budget (its time limit, evaluation budget or Ctrl-C) ended before it found
    any valid mapping; a larger budget may find one."""
