#!/bin/bash
# One device call: local-memory (register spill) traffic of torch's flash forward kernel,
# Nsight Compute, at shapes of l2_write_paths_h200.py (d 128, H 16) and at d 64; and the
# kernel's resource usage as the binary states it (cuobjdump -res-usage, flash_fwd entries).
#   bash scripts/experiments/flash_local_h200.sh $OUT
out=${1:?usage: flash_local_h200.sh OUTDIR}
cd "$(dirname "$0")" || exit 2
want="gpu__time_duration dram__bytes_write lts__t_sectors_op_write
l1tex__t_sectors_pipe_lsu_mem_local_op_st l1tex__t_sectors_pipe_lsu_mem_local_op_ld
l1tex__t_requests_pipe_lsu_mem_local_op_st l1tex__t_requests_pipe_lsu_mem_local_op_ld
l1tex__t_sectors_pipe_lsu_mem_global_op_st l1tex__t_requests_pipe_lsu_mem_global_op_st
lts__t_sectors_srcunit_tex_aperture_device_op_write
l1tex__m_l1tex2xbar_write_sectors_mem_lg_op_st smsp__inst_executed_op_local_st smsp__inst_executed_op_local_ld
smsp__inst_executed_op_global_st launch__registers_per_thread launch__grid_size"
avail=$(ncu --query-metrics 2>/dev/null | awk '{print $1}')
metrics=""
for m in $want; do
  if echo "$avail" | grep -qx "$m"; then
    case $m in launch__*) metrics="$metrics,$m" ;; *) metrics="$metrics,$m.sum" ;; esac
  else echo "no metric $m"; fi
done
metrics="${metrics#,},launch__registers_per_thread,launch__grid_size"
for f in "flash 1024 16" "flash 4096 4" "flash 4096 1"; do
  echo "## $f"
  ncu --clock-control none --kernel-name regex:flash_fwd --metrics "$metrics" --csv --page raw \
      --print-units base python3 l2_write_paths_h200.py --one $f 2>&1 \
      | grep -v '^==PROF==' | grep -v '^==WARNING=='
done > "$out/flash_local_ncu.csv"
lib=$(python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib', 'libtorch_cuda.so'))")
timeout 240 cuobjdump -res-usage "$lib" 2>/dev/null | grep -A1 "flash_fwd_kernel" | head -80 > "$out/flash_res_usage.txt"
python3 - "$out/flash_local_ncu.csv" <<'PY'
import csv, io, sys
for block in open(sys.argv[1]).read().split("## ")[1:]:
    name, rest = block.split("\n", 1)
    lines = [l for l in rest.splitlines() if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 3:
        print(name, "no rows", rest[:400].replace("\n", " | ")); continue
    for r in rows[2:]:
        d = dict(zip(rows[0], r))
        print("##", name, d["Kernel Name"][:60])
        for k, v in d.items():
            if "__" in k and not k.startswith("device__"):
                print("  ", k, v)
PY
wc -l "$out/flash_res_usage.txt"; grep -o "STACK:[0-9]*\|LOCAL:[0-9]*\|REG:[0-9]*" "$out/flash_res_usage.txt" | sort | uniq -c | head -20
