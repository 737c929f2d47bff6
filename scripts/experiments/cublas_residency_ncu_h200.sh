#!/bin/bash
# One device call: Nsight Compute's scheduler, warp-state, compute and memory sections for the
# align1 P V kernel alone on its SM and two per SM (N 4097 z 4 / 8, N 2049 z 7 / 15).
#   bash scripts/experiments/cublas_residency_ncu_h200.sh $OUT
out=${1:?usage: cublas_residency_ncu_h200.sh OUTDIR}
cd "$(dirname "$0")" || exit 2
for f in "pv 4097 128 4" "pv 4097 128 8" "pv 2049 128 7" "pv 2049 128 15"; do
  echo "## $f"
  ncu --clock-control none --kernel-name regex:'Kernel2|gemm' --section SchedulerStats \
      --section WarpStateStats --section ComputeWorkloadAnalysis --section Occupancy \
      --section LaunchStats --section SpeedOfLight --csv --page raw --print-units base \
      python3 cublas_residency_h200.py --one $f 2>&1 | grep -v '^==PROF=='
done > "$out/cublas_residency_ncu.csv"
python3 - "$out/cublas_residency_ncu.csv" <<'PY'
import csv, io, sys
want = ["gpu__time_duration.sum", "sm__cycles_active.avg", "launch__grid_size",
        "smsp__issue_active.avg.pct_of_peak_sustained_active", "smsp__inst_executed.sum",
        "smsp__average_warp_latency_per_inst_issued.ratio",
        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
        "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
        "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
        "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio",
        "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
        "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
        "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
        "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio"]
for block in open(sys.argv[1]).read().split("## ")[1:]:
    name, rest = block.split("\n", 1)
    lines = [l for l in rest.splitlines() if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 3:
        print(name, "no rows"); continue
    d = dict(zip(rows[0], rows[2]))
    print("##", name)
    for w in want:
        print("  ", w, d.get(w))
PY
