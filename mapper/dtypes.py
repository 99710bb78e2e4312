"""Element types: their bits, the rate family a compute unit's throughput table is keyed by, and
the block-scaled formats whose scales are tensors of their own.

A plain dtype is bits per element (`bf16` 16, `fp8_e4m3` 8, `fp4` 4). A block-scaled format
(OCP Microscaling MXFP8/MXFP6/MXFP4: one E8M0 scale per 32 elements; NVIDIA's NVFP4: one FP8
E4M3 scale per 16 elements) stores elements of a plain dtype plus one scale per block along the
reduction dim: the workload loader turns those scales into tensors (`load/block_scaled.py`), so
the cost model counts their traffic, capacity and energy with the same rules as any tensor.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

# canonical name -> bits per element. The fp8/fp6/fp4 encodings (exponent/mantissa bits) are
# OCP's: E4M3 and E5M2 (8 bits), E2M3 and E3M2 (6), E2M1 (4); E8M0 is the MX formats' scale
# (a power of two).
DTYPE_BITS = MappingProxyType({
    "int4": 4, "fp4": 4, "fp4_e2m1": 4, "fp6": 6, "fp6_e2m3": 6, "fp6_e3m2": 6,
    "int8": 8, "uint8": 8, "fp8": 8, "fp8_e4m3": 8, "fp8_e5m2": 8, "e8m0": 8,
    "int16": 16, "fp16": 16, "bf16": 16, "int32": 32, "fp32": 32, "tf32": 32, "fp64": 64,
})
# other spellings of the names above (the encodings alone, as papers write them)
ALIASES = MappingProxyType({"e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2", "e2m3": "fp6_e2m3",
                            "e3m2": "fp6_e3m2", "e2m1": "fp4_e2m1", "fp8_e8m0": "e8m0"})


@dataclass(frozen=True)
class BlockFormat:
    """Elements of `element` dtype in blocks of `block` along the reduction dim, each block with
    one scale of `scale` dtype. `tensor_scale`: a further scale per tensor (NVFP4's FP32), one
    word that no level's traffic notices, so not modelled."""
    element: str
    block: int
    scale: str
    tensor_scale: str = ""


BLOCK_FORMATS = MappingProxyType({
    "mxfp8": BlockFormat("fp8_e4m3", 32, "e8m0"),     # OCP Microscaling Formats (MX) v1.0, 2023
    "mxfp6": BlockFormat("fp6_e2m3", 32, "e8m0"),
    "mxfp4": BlockFormat("fp4_e2m1", 32, "e8m0"),
    "nvfp4": BlockFormat("fp4_e2m1", 16, "fp8_e4m3", tensor_scale="fp32"),   # NVIDIA Blackwell
})
# The family a compute unit's per-dtype throughput is keyed by (`macs_per_cycle: {fp8: 1024}`):
# the encodings of one width share their MMA rate.
_FAMILY = MappingProxyType({"fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp6_e2m3": "fp6", "fp6_e3m2": "fp6",
                            "fp4_e2m1": "fp4", "uint8": "int8"})


def canonical(name: str) -> str | None:
    """The canonical name of a dtype or block format (`E4M3` -> `fp8_e4m3`), None if unknown."""
    low = name.strip().lower()
    low = ALIASES.get(low, low)
    return low if low in DTYPE_BITS or low in BLOCK_FORMATS else None


def known_names() -> tuple[str, ...]:
    """Every name a spec may give, for error messages."""
    return tuple(DTYPE_BITS) + tuple(BLOCK_FORMATS) + tuple(ALIASES)


def element_bits(name: str) -> int:
    """Bits of one element of a canonical dtype or block format (its scales not counted)."""
    fmt = BLOCK_FORMATS.get(name)
    return DTYPE_BITS[fmt.element if fmt else name]


def family(name: str) -> str:
    """The throughput family of a canonical dtype or format: `nvfp4` and `fp4_e2m1` -> `fp4`,
    `mxfp8` and `fp8_e5m2` -> `fp8`; any other its own name."""
    fmt = BLOCK_FORMATS.get(name)
    name = fmt.element if fmt else name
    return _FAMILY.get(name, name)
