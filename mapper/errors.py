"""The project's small error hierarchy.

Every error a user can cause carries a message that names the file, the key path inside it
and what was expected, so the CLI can print it on one line and exit with status 2.
"""


class MapperError(Exception):
    """Base class: an error the user can act on (the CLI prints it, never a traceback)."""


class SpecError(MapperError):
    """A spec (architecture, workload, mapping, constraints) is malformed or inconsistent."""

    def __init__(self, where: str, path: str, expected: str):
        self.where, self.path, self.expected = where, path, expected
        location = f"{where}: {path}" if path else where
        super().__init__(f"{location}: {expected}")


class InfeasibleError(MapperError):
    """No mapping satisfies the constraints; the message says which constraint and by how much."""
