"""Microbenchmarks that calibrate a GPU preset (issue 42's item 2): what the memory levels and the
tensor cores of the GPU at hand deliver, beside the datasheet figures the presets quote.

    python scripts/gpu_micro.py [--csv gpu_micro.csv] [--interpret]

Each figure is one row of the CSV (figure, value, unit, how it was measured):
- HBM: a device-to-device copy (torch, bytes read + written) and a streaming read (a Triton
  kernel, loads that bypass L1) of 2 GiB, far above the L2;
- L2: the same streaming read over working sets that fit the L2, re-read inside the kernel;
- shared memory: a CUDA kernel (CuPy) re-reading 48 KiB of shared memory per block, 16 bytes a
  thread a load, all SMs busy;
- latency of a dependent load chain (CuPy, one thread): a random cycle of 128-byte lines in a
  working set that fits L1, L2 or only HBM, in SM clock cycles per load; for L2 and HBM also
  under load (every other block streaming a buffer meanwhile);
- tensor cores: torch.matmul in bf16 and torch._scaled_mm in fp8 (e4m3) at 8192^3, random data;
- the SM clock nvidia-smi reads just after the matrix products.
Times are medians (triton.testing.do_bench). A figure whose tool is missing (CuPy, an fp8
matmul) is reported as not measured, with why; nothing else stops the others.
`--interpret` runs the Triton kernels in Triton's CPU interpreter at small sizes (the test).
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import time
from pathlib import Path

MiB = 1 << 20

SMEM_READ = r"""
extern "C" __global__ void smem_read(float *out, int reps) {
    __shared__ float4 buffer[3072];                    // 48 KiB
    for (int i = threadIdx.x; i < 3072; i += blockDim.x)
        buffer[i] = make_float4(i, i + 1, i + 2, i + 3);
    __syncthreads();
    float4 acc = make_float4(0, 0, 0, 0);
    for (int r = 0; r < reps; ++r) {
        for (int i = threadIdx.x; i < 3072; i += blockDim.x) {
            float4 v = buffer[(i + r * 32) % 3072];    // consecutive threads, consecutive 16 B
            acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        }
    }
    if (acc.x + acc.y + acc.z + acc.w == -1.0f) out[threadIdx.x] = acc.x;   // never: keeps the loads
}
"""

CHASE = r"""
extern "C" __global__ void chase(const unsigned int *next, unsigned int steps, int bypass_l1,
                                 unsigned long long *cycles, unsigned int *sink) {
    unsigned int at = 0;
    for (unsigned int i = 0; i < 64; ++i) at = next[at];          // warm the path's first lines
    long long start = clock64();
    if (bypass_l1) {
        for (unsigned int i = 0; i < steps; ++i) at = __ldcg(next + at);
    } else {
        for (unsigned int i = 0; i < steps; ++i) at = next[at];
    }
    long long stop = clock64();
    cycles[0] = stop - start;
    sink[0] = at;
}
"""

# the same chase with every other block streaming a buffer meanwhile (L1 bypassed): the latency a
# load waits under load, which the cost model's latency term stands for in a pipelined kernel
CHASE_LOADED = r"""
extern "C" __global__ void chase_loaded(const unsigned int *next, unsigned int start, unsigned int steps,
                                        const float4 *stream, unsigned long long n4, int reps,
                                        unsigned long long *cycles, unsigned int *sink, float *out) {
    if (blockIdx.x == 0) {
        if (threadIdx.x != 0) return;
        unsigned int at = start;
        long long begin = clock64();
        for (unsigned int i = 0; i < steps; ++i) at = __ldcg(next + at);
        cycles[0] = clock64() - begin;
        sink[0] = at;
        return;
    }
    float acc = 0.0f;
    unsigned long long stride = (unsigned long long)(gridDim.x - 1) * blockDim.x;
    for (int r = 0; r < reps; ++r) {
        for (unsigned long long i = (unsigned long long)(blockIdx.x - 1) * blockDim.x + threadIdx.x; i < n4;
             i += stride) {
            float4 v = __ldcg(stream + i);
            acc += v.x + v.y + v.z + v.w;
        }
    }
    if (acc == -1.0f) out[0] = acc;     // never: keeps the loads
}
"""


def stream_read_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def stream_read(x_ptr, out_ptr, n, reps, BLOCK: tl.constexpr):
        """Each program reads its share of x (n floats) `reps` times, L1 bypassed (.cg)."""
        pid = tl.program_id(0)
        programs = tl.num_programs(0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for _ in range(reps):
            for start in range(pid * BLOCK, n, programs * BLOCK):
                acc += tl.load(x_ptr + start + tl.arange(0, BLOCK), cache_modifier=".cg")
        tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)
    return stream_read


def timed_ms(fn, interpret: bool) -> float:
    if interpret:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3
    import triton
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


def memory_rows(interpret: bool) -> list[tuple]:
    import torch
    device = "cpu" if interpret else "cuda"
    rows = []
    big = (4 * MiB if interpret else 2048 * MiB) // 4
    src = torch.randn(big, device=device)
    dst = torch.empty_like(src)
    ms = timed_ms(lambda: dst.copy_(src), interpret)
    rows.append(("hbm_copy", 2 * big * 4 / ms / 1e9, "TB/s", f"torch copy_ of {big * 4 // MiB} MiB, read + written"))
    kernel = stream_read_kernel()
    block, programs = 1024, (4 if interpret else 132 * 16)
    out = torch.empty(programs * block, device=device)

    def read(x, reps):
        return lambda: kernel[(programs,)](x, out, x.numel(), reps, BLOCK=block, num_warps=8)
    ms = timed_ms(read(src, 1), interpret)
    rows.append(("hbm_read", big * 4 / ms / 1e9, "TB/s", f"Triton streaming read (.cg) of {big * 4 // MiB} MiB"))
    for size in ((1,) if interpret else (8, 16, 32)):
        x = torch.randn(size * MiB // 4, device=device)
        reps = 2 if interpret else max(8, 2048 // size)
        ms = timed_ms(read(x, reps), interpret)
        rows.append((f"l2_read_{size}MiB", size * MiB * reps / ms / 1e9, "TB/s",
                     f"Triton streaming read (.cg) of {size} MiB, {reps} times in one launch"))
    return rows


def cupy_rows(sms: int) -> list[tuple]:
    import cupy as cp
    import numpy as np
    rows = []
    smem = cp.RawKernel(SMEM_READ, "smem_read")
    out = cp.zeros(1024, dtype=cp.float32)
    reps, threads, blocks = 4000, 512, sms * 4
    smem((blocks,), (threads,), (out, np.int32(reps)))          # compile, warm
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    smem((blocks,), (threads,), (out, np.int32(reps)))
    stop.record()
    stop.synchronize()
    ms = cp.cuda.get_elapsed_time(start, stop)
    clock = int(cp.cuda.runtime.deviceGetAttribute(cp.cuda.runtime.cudaDevAttrClockRate, 0)) * 1e3   # Hz
    per_sm = blocks * reps * 3072 * 16 / (ms * 1e-3) / sms
    rows.append(("smem_read", per_sm / 1e9, "GB/s per SM",
                 f"{blocks} blocks x {threads} threads re-read 48 KiB {reps} times (16 B loads); "
                 f"{per_sm / clock:.1f} B/cycle per SM at the device's reported {clock / 1e9:.2f} GHz"))
    chase = cp.RawKernel(CHASE, "chase")
    cycles, sink = cp.zeros(1, dtype=cp.uint64), cp.zeros(1, dtype=cp.uint32)
    generator = np.random.default_rng(0)
    for label, size, bypass in (("l1", 16 * 1024, 0), ("l2", 8 * MiB, 1), ("hbm", 1024 * MiB, 1)):
        lines = size // 128
        order = generator.permutation(lines)
        words = np.zeros(size // 4, dtype=np.uint32)          # one random cycle through every line
        words[order * 32] = np.roll(order, -1) * 32
        steps = 20000 if label != "hbm" else 10000
        next_words = cp.asarray(words)
        # L1 and L2: a first pass brings the path's lines in, the second is timed; HBM: one cold
        # pass (a second would find the 10,000 lines it touched in the 50 MiB L2)
        for _ in range(1 if label == "hbm" else 2):
            chase((1,), (1,), (next_words, np.uint32(steps), np.int32(bypass), cycles, sink))
        per_load = int(cycles.get()[0]) / steps
        rows.append((f"latency_{label}", per_load, "cycles",
                     f"one thread, a random cycle of {lines} 128-byte lines ({size // 1024} KiB), "
                     f"{'L1 bypassed (__ldcg)' if bypass else 'plain loads'}"))
        if label != "l1":
            # L2: the warmed path again; HBM: lines past those the unloaded pass touched
            start = 0 if label == "l2" else int(order[steps + 64]) * 32
            rows.append(loaded_latency(cp, label, next_words, start, sms))
        del next_words
    return rows


def loaded_latency(cp, label: str, next_words, start: int, sms: int) -> tuple:
    """The chase of `label`'s path from `start` while the other blocks stream 16 MiB (L2) or 2 GiB
    (HBM) over and over."""
    import numpy as np
    kernel = cp.RawKernel(CHASE_LOADED, "chase_loaded")
    stream = cp.ones((16 if label == "l2" else 2048) * MiB // 4, dtype=cp.float32)
    steps, reps = (4000, 400) if label == "l2" else (4000, 16)
    cycles, sink, out = cp.zeros(1, dtype=cp.uint64), cp.zeros(1, dtype=cp.uint32), cp.zeros(1, dtype=cp.float32)
    kernel((sms * 4,), (512,), (next_words, np.uint32(start), np.uint32(steps), stream, np.uint64(stream.size // 4),
                                np.int32(reps), cycles, sink, out))
    cp.cuda.Device().synchronize()
    return (f"latency_{label}_loaded", int(cycles.get()[0]) / steps, "cycles",
            f"the same chase from untouched lines while {sms * 4 - 1} blocks of 512 threads stream "
            f"{stream.nbytes // MiB} MiB {reps} times (L1 bypassed)")


def tensor_rows() -> list[tuple]:
    import torch
    size = 8192
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    flops = 2.0 * size ** 3
    rows = [("bf16_matmul", flops / (timed_ms(lambda: a @ b, False) * 1e-3) / 1e12, "TFLOP/s",
             f"torch.matmul {size}^3 bf16, random data")]
    try:
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()       # column-major, as _scaled_mm wants
        one = torch.ones((), device="cuda")
        ms = timed_ms(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), False)
        rows.append(("fp8_matmul", flops / (ms * 1e-3) / 1e12, "TFLOP/s", f"torch._scaled_mm {size}^3 e4m3, random data"))
    except Exception as exc:        # noqa: BLE001 - an fp8 path this torch lacks: said, not fatal
        rows.append(("fp8_matmul", float("nan"), "TFLOP/s", f"not measured: {type(exc).__name__}: {str(exc)[:120]}"))
    try:
        read = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,clocks.mem,power.draw",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
        rows.append(("clocks_after_matmul", float("nan"), "", f"nvidia-smi sm, max sm, mem, power: {read}"))
    except Exception as exc:        # noqa: BLE001
        rows.append(("clocks_after_matmul", float("nan"), "", f"not read: {exc}"))
    return rows


def main(argv=None) -> list[tuple]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", default="gpu_micro.csv")
    parser.add_argument("--interpret", action="store_true", help="Triton's CPU interpreter, small sizes")
    parser.add_argument("--parts", default="memory,cupy,tensor",
                        help="which figures: memory (HBM, L2), cupy (shared memory, latencies), tensor")
    args = parser.parse_args(argv)
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    parts = args.parts.split(",")
    rows = memory_rows(args.interpret) if "memory" in parts else []
    if not args.interpret:
        import torch
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        for name, part in (("cupy", lambda: cupy_rows(sms)), ("tensor", tensor_rows)):
            if name not in parts:
                continue
            try:
                rows += part()
            except Exception as exc:        # noqa: BLE001 - one part's failure leaves the others
                rows.append((name, float("nan"), "", f"failed: {type(exc).__name__}: {str(exc)[:200]}"))
    Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["figure", "value", "unit", "how"])
        writer.writerows(rows)
    for figure, value, unit, how in rows:
        print(f"{figure:22} {value:10.2f} {unit:12} {how}")
    return rows


if __name__ == "__main__":
    main()
