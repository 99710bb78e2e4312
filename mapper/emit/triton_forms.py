"""Which form a Triton matmul of a mapping takes on a device.

- The Hopper form (compute capability 9.0 and later): the operand tiles are loaded through
  TMA tensor descriptors (`triton.tools.tensor_descriptor.TensorDescriptor`, where the installed
  Triton has them and the operands' strides allow them), the mapping's thread-block cluster is
  launched as `num_ctas`, and where the mapping's MMA is a warpgroup op (wgmma: m64 issued by
  the four warps of a warpgroup) the block's warps come in whole warpgroups.
- The Ampere form (below 9.0, a100-class parts): pointer loads, `mma.sync`, one CTA a program
  (Triton refuses num_ctas > 1 below sm90).

What the form reads off the mapping is what `mapper search --json` says in its `kernel` key:
the MMA shape (`GemmView.instruction`, by role) and the cluster (`GemmView.cluster`). Every
departure from the mapping is one line in `KernelForm.notes`. Nothing here imports triton:
scripts/gpu_check.py plans a run before any GPU is touched, and the emitted kernel module
carries `tma_refusal` as text (`triton.kernel_text`), so the rule is written once.
"""
from __future__ import annotations

from dataclasses import dataclass

HOPPER = (9, 0)        # sm90: wgmma, TMA, thread-block clusters
ROWS_PER_WARP = 16     # an MMA's m per warp issuing it: mma.sync m16 by one warp, wgmma m64 by four
WARPGROUP = 4          # the warps that issue one wgmma together


def tma_refusal(shape, strides, itemsize, address=0):
    """Why TMA cannot load a tensor of this shape and these strides (in elements), or None when
    it can: the base 16-byte aligned, the last dim contiguous, every other stride a multiple of
    16 bytes (cuTensorMapEncodeTiled's rules, which Triton's TensorDescriptor checks too)."""
    if strides[-1] != 1:
        return f"its last dim has stride {strides[-1]}, not contiguous"
    for dim, stride in enumerate(strides[:-1]):
        if stride * itemsize % 16:
            return (f"its dim-{dim} stride is {stride} elements ({stride * itemsize} bytes), "
                    "not a multiple of 16 bytes")
    if address % 16:
        return f"its base address is {address % 16} bytes past a 16-byte boundary"
    return None


@dataclass(frozen=True)
class KernelForm:
    """How one config runs on one device: what gpu_check launches and reports."""
    hopper: bool             # the Hopper form (sm90+)
    tma: bool                # operand tiles through TMA tensor descriptors, else pointer loads
    mma: str                 # the instruction the config lets Triton issue: "wgmma" or "mma.sync"
    num_warps: int
    num_ctas: int
    notes: tuple[str, ...] = ()

    @property
    def parts(self) -> str:
        """The instruction and the loads: "wgmma+TMA", "mma+TMA", "mma", ..."""
        return f"{'wgmma' if self.mma == 'wgmma' else 'mma'}{'+TMA' if self.tma else ''}"

    @property
    def label(self) -> str:
        """"Hopper wgmma+TMA", "Hopper mma+TMA", "Ampere mma", ..."""
        return f"{'Hopper' if self.hopper else 'Ampere'} {self.parts}"


def kernel_form(config, mma, cluster, capability, descriptors: bool, operands=()) -> KernelForm:
    """The form of `config` (a `BlockConfig`; a `TritonConfig` brings its `num_ctas`) on a device
    of `capability` (major, minor). `mma`: the mapping's MMA shape by role (m, n, k), None
    without one; `cluster`: its thread-block cluster's CTAs along (m, n); `descriptors`: whether
    the installed Triton has tensor descriptors; `operands`: (name, shape, strides, itemsize) of
    each operand TMA would load (none: not checked)."""
    num_ctas = getattr(config, "num_ctas", 1)
    if tuple(capability) < HOPPER:
        notes = ()
        if num_ctas > 1:
            notes = (f"num_ctas: the mapping's {cluster[0]}x{cluster[1]} cluster needs sm90 (this device is "
                     f"{capability[0]}.{capability[1]}): one CTA runs the program's whole block",)
        return KernelForm(False, False, "mma.sync", config.num_warps, 1, notes)
    notes = []
    tma = descriptors
    if not descriptors:
        notes.append("TMA: the installed Triton has no tensor descriptors "
                     "(triton.tools.tensor_descriptor): pointer loads")
    for name, shape, strides, itemsize in operands if descriptors else ():
        why = tma_refusal(shape, strides, itemsize)
        if why:
            notes.append(f"TMA: {name} ({'x'.join(map(str, shape))}): {why}: pointer loads")
            tma = False
    if num_ctas & (num_ctas - 1):
        notes.append(f"num_ctas: {num_ctas} CTAs is no power of two (Triton splits a program's tensors over its "
                     "CTAs in halves): 1, one CTA runs the program's whole block")
        num_ctas, cluster = 1, (1, 1)
    instruction, num_warps = _instruction(config, mma, cluster, notes)
    return KernelForm(True, tma, instruction, num_warps, num_ctas, tuple(notes))


def _instruction(config, mma, cluster, notes: list) -> tuple[str, int]:
    """(the MMA instruction, the warps) on sm90: wgmma where the mapping's MMA is a warpgroup op
    and a CTA's block rows are whole MMAs (Triton's own condition for wgmma: whole warpgroups,
    a CTA's M a multiple of 64), else mma.sync."""
    warps = config.num_warps
    if mma is None:
        notes.append("MMA: the mapping names no MMA shape: Triton's own choice")
        return "mma.sync", warps
    issuing = max(1, mma[0] // ROWS_PER_WARP)        # the warps one MMA takes
    shape = "x".join(map(str, mma))
    if issuing < WARPGROUP:
        notes.append(f"MMA: the mapping's {shape} is mma.sync (one warp); on sm90 Triton issues wgmma by its own "
                     "choice where the block allows")
        return "mma.sync", warps
    rows = config.block_m // max(1, cluster[0])
    if rows % mma[0]:
        notes.append(f"MMA: a CTA's {rows} block rows are no multiple of the mapping's wgmma m{mma[0]}: "
                     "Triton issues mma.sync")
        return "mma.sync", warps
    if warps % issuing:
        whole = -(-warps // issuing) * issuing
        notes.append(f"num_warps: {warps} warps are no whole warpgroups (wgmma m{mma[0]} is issued by {issuing} "
                     f"warps): {whole}")
        warps = whole
    return "wgmma", warps
