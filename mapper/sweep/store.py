"""The results store: one SQLite file, one row per point, keyed by the point's input hash.

Only the sweep's parent process writes. Each point is written in one transaction (WAL journal,
synchronous=FULL), so a `kill -9` at any moment leaves every finished point and no half-written
row. Writing a point whose slot (architecture, workload, mapspace, strategy, objective names)
holds a row of other inputs replaces that row in the same transaction: the store keeps the
latest answer to each question.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ..errors import MapperError

DEFAULT_DB = "mapper-results.sqlite"
SCHEMA_VERSION = 1

# (column, SQL type); JSON columns hold text and are decoded by `rows`
COLUMNS = (
    ("key", "TEXT PRIMARY KEY"), ("slot", "TEXT NOT NULL"), ("status", "TEXT NOT NULL"),
    ("reason", "TEXT"), ("arch", "TEXT"), ("workload", "TEXT"), ("einsum", "TEXT"),
    ("mapspace", "TEXT"), ("strategy", "TEXT"), ("objective", "TEXT"),
    ("settings", "JSON"), ("sizes", "JSON"), ("family", "TEXT"),
    ("model", "TEXT"), ("phase", "TEXT"), ("model_inputs", "JSON"), ("expansion", "TEXT"),
    ("layers", "TEXT"), ("count", "INTEGER"), ("position", "INTEGER"),
    ("score", "REAL"), ("energy_pj", "REAL"), ("cycles", "REAL"), ("seconds_kernel", "REAL"),
    ("edp", "REAL"), ("macs", "INTEGER"), ("utilization", "REAL"), ("bottleneck", "TEXT"),
    ("outer_bytes", "REAL"), ("peak_macs_per_s", "REAL"), ("outer_bytes_per_s", "REAL"),
    ("evaluated", "INTEGER"), ("search_seconds", "REAL"), ("seconds_to_best", "REAL"),
    ("optimal", "INTEGER"), ("complete", "INTEGER"), ("gap", "REAL"),
    ("warm_given", "INTEGER"), ("warm_admitted", "INTEGER"), ("warm_score", "REAL"),
    ("start_score", "REAL"),
    ("mapping", "JSON"), ("tiles", "JSON"), ("cost", "JSON"), ("notes", "JSON"),
    ("version", "TEXT"), ("finished_at", "REAL"), ("worker", "TEXT"),
    ("area_mm2", "REAL"), ("expansion_groups", "INTEGER"),
)
# columns added after SCHEMA_VERSION 1's first layout: a store without them gains them (NULL in
# its older rows) instead of being refused
ADDED = ("area_mm2", "expansion_groups")
NAMES = tuple(name for name, _ in COLUMNS)
JSON_COLUMNS = frozenset(name for name, kind in COLUMNS if kind == "JSON")


class Store:
    def __init__(self, path: str | Path = DEFAULT_DB):
        self.path = Path(path)
        try:
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            columns = ", ".join(f"{name} {kind.replace('JSON', 'TEXT')}" for name, kind in COLUMNS)
            self.db.execute(f"CREATE TABLE IF NOT EXISTS points ({columns})")
            self.db.execute("CREATE INDEX IF NOT EXISTS points_slot ON points(slot)")
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            have = {row[1] for row in self.db.execute("PRAGMA table_info(points)")}
            for name in ADDED:
                if name not in have:
                    self.db.execute(f"ALTER TABLE points ADD COLUMN {name} {dict(COLUMNS)[name]}")
                    have.add(name)
        except sqlite3.DatabaseError as exc:
            raise MapperError(f"{self.path}: not a results store ({exc})") from None
        if set(NAMES) - have:
            raise MapperError(f"{self.path}: a results store of another layout (missing columns "
                              f"{', '.join(sorted(set(NAMES) - have))}); use another --db")

    def close(self) -> None:
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def statuses(self) -> dict[str, str]:
        """Every stored point's key and status (without reading the JSON columns)."""
        return dict(self.db.execute("SELECT key, status FROM points"))

    def write(self, row: dict) -> None:
        """Insert one point (replacing an older answer in its slot), in one transaction."""
        values = [json.dumps(row.get(n)) if n in JSON_COLUMNS else row.get(n) for n in NAMES]
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("DELETE FROM points WHERE slot = ? AND key != ?", (row["slot"], row["key"]))
            self.db.execute(f"INSERT OR REPLACE INTO points ({', '.join(NAMES)}) "
                            f"VALUES ({', '.join('?' * len(NAMES))})", values)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def rows(self, keys=None) -> list[dict]:
        """Rows as dicts (JSON columns decoded), in the order they were finished."""
        cursor = self.db.execute(f"SELECT {', '.join(NAMES)} FROM points ORDER BY finished_at, key")
        out = []
        for values in cursor:
            row = {n: (json.loads(v) if n in JSON_COLUMNS and v is not None else v)
                   for n, v in zip(NAMES, values)}
            if keys is None or row["key"] in keys:
                out.append(row)
        return out

    def family_rows(self, family: str) -> list[dict]:
        """Finished rows of one warm-start family (same arch, mapspace, objective, einsum)."""
        cursor = self.db.execute(f"SELECT {', '.join(NAMES)} FROM points WHERE family = ? AND status = 'ok'",
                                 (family,))
        return [{n: (json.loads(v) if n in JSON_COLUMNS and v is not None else v) for n, v in zip(NAMES, values)}
                for values in cursor]
