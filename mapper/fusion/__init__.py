"""Fusion of op chains: which ops share a kernel, the fused mapping, and what it saves.

Modules, lowest first: `price` (the accounting of what fusing removes and adds), `kernels`
(each op searched on its own or under fusion constraints), `attention` (FlashAttention-style
kernel) and `mlp` (two GEMMs through their hidden dim), `seeds` (mappings carried between
einsums by role), `buffered` (einsums fused through a buffer level, by their slices), `groups`
(legal groups and their price),
`grouping` (the dynamic programme over runs, boundary reasons), `cover` (CP-SAT over any
legal connected groups), `bound` (the chain lower bound), `run`
(one study under one search context), `report` (text, JSON, plot), `command` (`mapper fuse`),
`replay` (a grouping priced again on another arch with its kernels' mappings), `capacity_curve`,
`capacity_report` and `capacity_command` (`mapper explain OPGRAPH --capacity`: the study per
capacity, fused and unfused).
"""
