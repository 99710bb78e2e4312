#!/usr/bin/env bash
# The GPU session's one prepared script (issues 40 and 42): describe the GPU, calibrate the
# preset (scripts/gpu_micro.py), then time mapper's picks against autotuning
# (scripts/gpu_check.py) on every shape, with a calibration grid on six of them; a cluster run
# last if time is left. Everything lands under $OUT (./gpu_out without it) as 8 files, CSVs and logs,
# each CSV rewritten as it grows, so that a run stopped by its time limit keeps what it timed.
#
#     bash scripts/gpu_run.sh                      # on the GPU machine, from the checkout's root
#     GPU_RUN_INTERPRET=1 bash scripts/gpu_run.sh  # the same steps in Triton's CPU interpreter
#
# BUDGET (seconds, default 510) bounds the whole; the check stops timing 40 s before it ends.
set -u
out="${OUT:-gpu_out}"
budget="${BUDGET:-510}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if [ -n "${GPU_RUN_INTERPRET:-}" ]; then
    small=(--interpret --shapes small)
    micro=(--interpret)
    grid="odd"
else
    small=()
    micro=()
    grid="square-4096,square-8192,prefill-up,decode-up,odd-3000,tall-skinny-32768"
fi
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit \
        --format=csv 2>&1 || echo "no nvidia-smi"
    python3 -c "import sys, numpy, torch, triton; print('python', sys.version.split()[0], 'numpy', numpy.__version__,
'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__,
torch.cuda.get_device_name() if torch.cuda.is_available() else 'no cuda device')"
    nproc
} > "$out/micro.log" 2>&1
cat "$out/micro.log"
timeout 100 python3 scripts/gpu_micro.py "${micro[@]}" --csv "$out/gpu_micro.csv" >> "$out/micro.log" 2>&1
tail -n 16 "$out/micro.log"
left=$((budget - SECONDS))
timeout "$left" python3 scripts/gpu_check.py "${small[@]}" --arch h200 --csv "$out/gpu_check.csv" \
    --precompile "${PRECOMPILE:-14}" --deadline $((left - 40)) --grid "$grid" > "$out/check.log" 2>&1
echo "check: exit $?"
grep -v "Warning\|TensorHandle" "$out/check.log" | tail -n 30
left=$((budget - SECONDS))
if [ "$left" -gt 90 ] && [ -z "${GPU_RUN_INTERPRET:-}" ]; then
    timeout "$left" python3 scripts/gpu_check.py --arch h200 --mapspace clusters --only square-8192 --top 4 \
        --time-limit 30 --csv "$out/gpu_check_clusters.csv" --deadline $((left - 15)) > "$out/clusters.log" 2>&1
    echo "clusters: exit $?"
    tail -n 6 "$out/clusters.log"
fi
echo "gpu_run: ${SECONDS} s"
