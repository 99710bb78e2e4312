"""Sweeps: the same search over many shapes, models and architectures, kept in a results store.

`grid` (size values and ranges), `spec` (the sweep file and the flags that stand in for one),
`models` (model presets expanded to their layers), `points` (points and their input hashes),
`store` (SQLite, one row per point), `execute` (one point, as a worker runs it), `runner`
(in this process, local processes or a Dask cluster; warm starts), `report` (the text a sweep
prints), `plots` (PNG), `cli` (`mapper sweep`, `mapper results`).
"""
