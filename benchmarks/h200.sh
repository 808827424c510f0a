#!/usr/bin/env bash
# One session's H200 measurements in one call (BENCHMARKS.md says which session ran which stage).
# On the device machine, after `source .device/b/install.sh`; results go under $OUT. Every stage
# saves as it goes and stops when the call's BUDGET (seconds, default 570) runs out.
#   attention: the CUDA port's correctness on every case (2 seeds), then device time against
#              mx.fast.scaled_dot_product_attention and the port's variants (kernel_profile.py;
#              ATT_VARIANTS=a,b times only those)
#   ncu:       Nsight Compute on the attention port at the D = 128 causal case (speed of light, warp
#              states, occupancy, scheduler), into $OUT/attention_ncu.txt
#   rules:     the default policy's own output against the expert ports on the memory-bound tasks
#              (rules_vs_expert.py, 8 tasks at once; RULES_ARGS replaces its arguments)
set -uo pipefail
export PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-570}
left() { local l=$((BUDGET - SECONDS)); echo $(( l < ${1} ? (l > 1 ? l : 1) : ${1} )); }
for stage in ${@:-attention rules}; do
  case $stage in
    attention)
      timeout "$(left 200)" python3 benchmarks/gpu_suite.py --backend cuda --tasks attention_fwd --skip bench,timer,translated --out "$OUT/att" | grep -v '^{'
      timeout "$(left 300)" python3 benchmarks/kernel_profile.py --tasks attention_fwd --variants "${ATT_VARIANTS:-all}" --calls 20 --out "$OUT/prof" | cut -c1-300 ;;
    ncu)
      NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
      timeout "$(left 150)" "$NCU" --clock-control none -k regex:attention_fwd --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section Occupancy --section SchedulerStats \
        --section LaunchStats python3 benchmarks/port_once.py attention_fwd --case 0 --calls 3 \
        > "$OUT/attention_ncu.txt" 2>&1; tail -5 "$OUT/attention_ncu.txt" ;;
    rules)
      t=$(left 590)  # its --seconds leaves 45 s for the last task's full check and expert port
      timeout "$t" python3 benchmarks/rules_vs_expert.py --backend cuda --out "$OUT/rules" ${RULES_ARGS:---tasks memory --iters 15 --jobs 8 --seconds $((t > 90 ? t - 45 : 45))} | cut -c1-300 ;;
    *) echo "unknown stage $stage: use attention, ncu or rules" >&2; exit 2 ;;
  esac
done
