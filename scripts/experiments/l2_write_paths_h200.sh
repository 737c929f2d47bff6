#!/bin/bash
# One device call: l2_write_paths_h200.py's shapes under Nsight Compute (DRAM bytes, L2 write
# sectors and requests, time), one profiled kernel per shape.
#   bash scripts/experiments/l2_write_paths_h200.sh $OUT
out=${1:?usage: l2_write_paths_h200.sh OUTDIR}
cd "$(dirname "$0")" || exit 2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$out/smi.txt"
want="gpu__time_duration dram__bytes_read dram__bytes_write lts__t_sectors_op_write
lts__t_requests_op_write lts__t_sectors_op_read lts__t_sectors_srcunit_tex_op_write
lts__t_requests_srcunit_tex_op_write lts__t_sectors_srcunit_tex_op_read lts__t_bytes"
avail=$(ncu --query-metrics 2>/dev/null | awk '{print $1}')
metrics=""
for m in $want; do
  if echo "$avail" | grep -qx "$m"; then metrics="$metrics,$m.sum"
  else echo "no metric $m" >> "$out/l2_write_paths.log"; fi
done
metrics="${metrics#,}"
for f in "flash 1024 2" "flash 1024 4" "flash 1024 8" "flash 1024 16" "flash 4096 1" "flash 4096 2" \
         "flash 4096 4" "qk 2992 16" "qk 3000 16" "qk 3008 16" "qk 4992 9" "qk 5000 9" "qk 5008 9"; do
  set -- $f
  echo "## $f"
  if [ "$1" = flash ]; then k="regex:flash_fwd"; else k="regex:gemm|nvjet|Kernel"; fi
  ncu --clock-control none --kernel-name "$k" --metrics "$metrics" --csv --page raw \
      --print-units base python3 l2_write_paths_h200.py --one $f 2>&1 \
      | grep -v '^==PROF==' | grep -v '^==WARNING=='
done > "$out/l2_write_paths_ncu.csv"
python3 - "$out/l2_write_paths_ncu.csv" >> "$out/l2_write_paths.log" <<'PY'
import csv, io, sys
for block in open(sys.argv[1]).read().split("## ")[1:]:
    name, rest = block.split("\n", 1)
    lines = [l for l in rest.splitlines() if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 3:
        print(name, "no rows", rest[:300].replace("\n", " | ")); continue
    for r in rows[2:]:
        d = dict(zip(rows[0], r))
        g = lambda k: d.get(k + ".sum", "nan").replace(",", "")
        print(f"{name:16s} {d['Kernel Name'][:50]:50s} t_ns {g('gpu__time_duration')} "
              f"rd {g('dram__bytes_read')} wr {g('dram__bytes_write')} "
              f"lts_wr_sec {g('lts__t_sectors_op_write')} lts_wr_req {g('lts__t_requests_op_write')} "
              f"lts_rd_sec {g('lts__t_sectors_op_read')}")
PY
cat "$out/l2_write_paths.log" | cut -c1-260
