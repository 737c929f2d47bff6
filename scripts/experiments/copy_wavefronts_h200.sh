#!/bin/bash
# One device call (copy_wavefronts_h200.py says why): CUDA-event times of torch's flash forward
# and the project's fa2_fwd.cu at flash-attention's tiles, then Nsight Compute's L1 data-pipe,
# LDGSTS, instruction, local-memory and DRAM counts of both at d 64 / 128 / 256, then the
# standard softmax's L1 and xbar counts at N ≡ 8 mod 16 (and two aligned neighbours).
#   bash scripts/experiments/copy_wavefronts_h200.sh $OUT
out=${1:?usage: copy_wavefronts_h200.sh OUTDIR}
cd "$(dirname "$0")/../.." || exit 2
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
py=scripts/experiments/copy_wavefronts_h200.py
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$out/smi.txt"
python3 $py --time "$out/copy_times_h200.json" > "$out/copy_wavefronts.log" 2>&1
ncu --query-metrics 2>/dev/null | awk '{print $1}' > /tmp/avail.txt
grep -i ldgsts /tmp/avail.txt > "$out/ldgsts_metrics.txt"
want="gpu__time_duration sm__cycles_elapsed sm__cycles_active smsp__cycles_active launch__grid_size
launch__registers_per_thread launch__occupancy_limit_registers launch__occupancy_limit_shared_mem
launch__shared_mem_per_block_dynamic launch__stack_size smsp__inst_executed
l1tex__data_pipe_lsu_wavefronts l1tex__data_pipe_lsu_wavefronts_mem_shared
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st
l1tex__data_pipe_lsu_wavefronts_mem_lg l1tex__data_bank_conflicts_pipe_lsu_mem_shared
l1tex__t_requests_pipe_lsu_mem_global_op_ld l1tex__t_sectors_pipe_lsu_mem_global_op_ld
l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss
l1tex__t_requests_pipe_lsu_mem_global_op_st l1tex__t_sectors_pipe_lsu_mem_global_op_st
l1tex__t_bytes_pipe_lsu_mem_local_op_ld l1tex__t_bytes_pipe_lsu_mem_local_op_st
l1tex__m_xbar2l1tex_read_bytes l1tex__m_xbar2l1tex_read_sectors dram__bytes_read dram__bytes_write
lts__t_sectors_srcunit_tex_op_write lts__t_sectors_srcunit_tex_op_read
l1tex__lsuin_requests l1tex__data_bank_reads l1tex__data_bank_writes
smsp__inst_executed_op_global_ld smsp__inst_executed_op_global_st smsp__inst_executed_op_shared_ld
smsp__inst_executed_op_shared_st smsp__inst_executed_op_ldsm smsp__inst_executed_op_ldgsts
sm__inst_executed_pipe_lsu smsp__inst_executed_pipe_lsu smsp__inst_executed_pipe_tensor
smsp__inst_executed_pipe_fma smsp__inst_executed_pipe_alu smsp__inst_executed_pipe_xu
smsp__inst_executed_pipe_adu smsp__inst_executed_pipe_uniform"
want="$want $(grep -E '^(l1tex|smsp)__.*ldgsts' "$out/ldgsts_metrics.txt" | tr '\n' ' ')"
metrics=""
for m in $want; do
  if grep -qx "$m" /tmp/avail.txt; then
    case $m in launch__*) metrics="$metrics,$m" ;;
      *) metrics="$metrics,$m.sum,$m.avg" ;; esac
  else echo "no metric $m" >> "$out/copy_wavefronts.log"; fi
done
metrics="${metrics#,},l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second"
run() {   # name, kernel regex, then the probe's --one arguments
  local name=$1 kern=$2; shift 2
  echo "## $name"
  timeout 120 ncu --clock-control none --kernel-name "regex:$kern" --launch-skip 1 --launch-count 1 \
      --metrics "$metrics" --csv --page raw --print-units base python3 $py --one "$@" 2>&1 \
      | grep -v '^==PROF==' | grep -v '^==WARNING=='
}
{
  run "torch d64" flash_fwd torch 64 2048 2 16
  run "fa2 d64" fa2_fwd fa2 64 2048 2 16
  run "torch d128" flash_fwd torch 128 2048 2 16
  run "fa2 d128" fa2_fwd fa2 128 2048 2 16
  run "torch d256" flash_fwd torch 256 2048 2 8
  run "fa2 d256" fa2_fwd fa2 256 2048 2 8
  run "fa2 d256 stages2" fa2_fwd fa2 256 2048 2 8 2
} > "$out/copy_wavefronts_ncu.csv"
echo "## opcodes" >> "$out/copy_wavefronts.log"
for f in "torch flash_fwd 128" "fa2 fa2_fwd 128" "torch flash_fwd 256" "fa2 fa2_fwd 256"; do
  set -- $f
  echo "## $1 d$3"
  timeout 90 ncu --clock-control none --kernel-name "regex:$2" --launch-skip 1 --launch-count 1 \
      --metrics sass__inst_executed_per_opcode --print-metric-instances values --csv --page raw \
      python3 $py --one $1 $3 2048 2 8 2>&1 | grep -v '^==PROF==' | grep -v '^==WARNING=='
done > "$out/copy_opcodes_ncu.csv"
{
  for s in "3000 1 16" "5000 1 4" "7000 1 2" "1800 2 8" "2600 1 8" "4200 2 2" "6200 1 4" \
           "3000 4 12" "3008 1 16" "3016 1 16"; do
    run "softmax $s" std_softmax softmax $s
  done
} > "$out/softmax_sectors_ncu.csv"
echo done >> "$out/copy_wavefronts.log"
