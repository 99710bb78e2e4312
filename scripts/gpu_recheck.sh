#!/usr/bin/env bash
# A second GPU session after a calibration (scripts/gpu_replay.py shows beforehand what it should
# change): the check on the preset (every shape: the pick, the top 8, the autotune list), the
# picks of a fitted variant (FITTED: an arch file; its autotune list times again, which shows the
# timing noise), configs the first session did not time (GRID_STAGES stages on the GRID shapes),
# then the latencies of scripts/gpu_micro.py. Under $OUT (./gpu_out without it): 8 files, the
# logs in one.
#
#     FITTED=docs/gpu/h200-2026-12-04/h200-fitted.yaml bash scripts/gpu_recheck.sh
#
# BUDGET (seconds, default 240) bounds the whole; the steps get 50%, 25% and 12% of it.
set -u
out="${OUT:-gpu_out}"
budget="${BUDGET:-240}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
check() {       # name, seconds, arguments...
    local name=$1 seconds=$2
    shift 2
    timeout $((seconds + 20)) python3 scripts/gpu_check.py --precompile 15 --deadline "$seconds" \
        --csv "$out/$name.csv" "$@" > "$out/$name.log" 2>&1
    echo "$name: exit $?"
    grep -v "does not run" "$out/$name.log" | tail -n 21
}
check preset $((budget * 50 / 100)) --arch h200
if [ -n "${FITTED:-}" ]; then
    check fitted $((budget * 25 / 100)) --arch "$FITTED" --top 1
fi
check grid $((budget * 12 / 100)) --arch h200 --top 1 --only "${GRID:-square-8192,prefill-o,odd-3000}" \
    --grid "${GRID:-square-8192,prefill-o,odd-3000}" --grid-stages "${GRID_STAGES:-2}"
timeout 25 python3 scripts/gpu_micro.py --parts cupy --csv "$out/latency.csv" > "$out/latency.log" 2>&1
cat "$out/latency.log"
for name in preset fitted grid latency; do
    [ -f "$out/$name.log" ] && { echo "=== $name"; cat "$out/$name.log"; } >> "$out/recheck.log" && rm "$out/$name.log"
done
rm -f "$out/fitted.csv"          # its rows hold the fitted pick beside autotune: the configs CSV has them
echo "gpu_recheck: ${SECONDS} s"
