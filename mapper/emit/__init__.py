"""Kernels from mappings: one module per backend (`triton`, `cutlass`, `mlir`), each reading a
`Mapping` through `common`, never the search; `from_config` reads a Triton config back into a
mapping; `command` is `mapper emit` (which may run the search)."""
