"""Fusion of op chains: which ops share a kernel, the fused mapping, and what it saves.

Modules: `kernels` (each op searched on its own or under fusion constraints), `price` (the
accounting of what fusing removes and adds), `groups` (legal groups and the grouping search),
`report` (text, JSON, plots), `command` (`mapper fuse`).
"""
