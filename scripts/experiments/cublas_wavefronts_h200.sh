#!/bin/bash
# One device call: Nsight Compute's L1 data-pipe counts (absolute) for cuBLAS's align1 kernels
# (odd N: cutlass_75 128x128, two CTAs per SM by registers), alone on their SM and two per SM:
# P V (nn) at d 64 and 128, S = Q Kᵀ (tn) at d 32..256; and the same counts for the project's
# softmax kernel on its scalar and 16-byte paths (N 6001 / 6008, B 1 H 16) at 1, 2 and 4 CTAs
# per SM. None is a validation shape.
#   bash scripts/experiments/cublas_wavefronts_h200.sh $OUT
out=${1:?usage: cublas_wavefronts_h200.sh OUTDIR}
cd "$(dirname "$0")" || exit 2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$out/smi.txt"
want="gpu__time_duration sm__cycles_elapsed sm__cycles_active launch__grid_size
launch__registers_per_thread launch__occupancy_limit_registers smsp__inst_executed
l1tex__data_pipe_lsu_wavefronts l1tex__data_pipe_lsu_wavefronts_mem_shared
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st
l1tex__data_pipe_lsu_wavefronts_mem_lg l1tex__t_requests_pipe_lsu_mem_global_op_ld
l1tex__t_sectors_pipe_lsu_mem_global_op_ld l1tex__t_requests_pipe_lsu_mem_global_op_st
l1tex__t_sectors_pipe_lsu_mem_global_op_st l1tex__lsuin_requests l1tex__data_bank_reads
l1tex__data_bank_writes smsp__inst_executed_op_global_ld smsp__inst_executed_op_global_st
smsp__inst_executed_op_shared_ld smsp__inst_executed_op_shared_st smsp__inst_executed_op_ldsm
sm__inst_executed_pipe_lsu smsp__inst_executed_pipe_lsu"
avail=$(ncu --query-metrics 2>/dev/null | awk '{print $1}')
metrics=""
for m in $want; do
  if echo "$avail" | grep -qx "$m"; then
    case $m in launch__*) metrics="$metrics,$m" ;;
      *) metrics="$metrics,$m.sum,$m.avg" ;; esac
  else echo "no metric $m" >> "$out/cublas_wavefronts.log"; fi
done
metrics="${metrics#,},l1tex__data_pipe_lsu_wavefronts.avg.peak_sustained,l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second"
shapes=("pv 4097 128 4" "pv 4097 128 8" "pv 4097 64 4" "pv 4097 64 8" "pv 2049 64 7" "pv 2049 64 15"
        "pv 2049 128 7" "pv 2049 128 15" "pv 6007 128 2" "pv 6007 128 4"
        "qk 1409 128 1" "qk 1409 128 2" "qk 1409 64 1" "qk 1409 64 2" "qk 1153 128 1"
        "qk 2997 32 2" "qk 2997 64 2" "qk 2997 128 2" "qk 2997 256 2" "qk 4003 128 1")
for f in "${shapes[@]}"; do
  echo "## $f"
  ncu --clock-control none --kernel-name regex:'Kernel|gemm' --metrics "$metrics" \
      --csv --page raw --print-units base \
      python3 cublas_residency_h200.py --one $f 2>&1 | grep -v '^==PROF==' | grep -v '^==WARNING=='
done > "$out/cublas_wavefronts_ncu.csv"
cd ../..
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
for f in "6001 1" "6001 2" "6001 4" "6008 1" "6008 2" "6008 4"; do
  set -- $f
  echo "## softmax $1 $2"
  ncu --clock-control none --kernel-name std_softmax --metrics "$metrics" --csv --page raw \
      --print-units base python3 scripts/experiments/softmax_scalar_h200.py --ncu $1 --ctas-per-sm $2 \
      2>&1 | grep -v '^==PROF==' | grep -v '^==WARNING=='
done >> "$out/cublas_wavefronts_ncu.csv"
python3 - "$out/cublas_wavefronts_ncu.csv" >> "$out/cublas_wavefronts.log" <<'PY'
import csv, io, sys
for block in open(sys.argv[1]).read().split("## ")[1:]:
    name, rest = block.split("\n", 1)
    lines = [l for l in rest.splitlines() if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 3:
        print(name, "no rows", rest[:300].replace("\n", " | ")); continue
    for r in rows[2:]:
        d = dict(zip(rows[0], r))
        num = lambda k: float(d.get(k, "nan").replace(",", "") or "nan")
        print(f"{name:16s} {d['Kernel Name'][:70]:70s} grid {d.get('launch__grid_size')} "
              f"regs {d.get('launch__registers_per_thread')} t_ns {num('gpu__time_duration.sum'):.0f} "
              f"cyc {num('sm__cycles_elapsed.avg'):.0f} wf {num('l1tex__data_pipe_lsu_wavefronts.sum'):.0f} "
              f"wf_shared {num('l1tex__data_pipe_lsu_wavefronts_mem_shared.sum'):.0f} "
              f"peak {d.get('l1tex__data_pipe_lsu_wavefronts.avg.peak_sustained')} "
              f"pct {d.get('l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed')}")
PY
cat "$out/cublas_wavefronts.log" | cut -c1-300
