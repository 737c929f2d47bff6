#!/usr/bin/env bash
# Nsight Compute's L1 counters of FA-1's cp.async copies (LDGSTS: .cg 16-byte tiles bypass L1,
# .ca 4-byte row statistics l and m may hit it), N 512 / 1024 / 2048 at d 64.
#   bash scripts/experiments/fa1_l1_hits_h200.sh OUT.csv
ncu --clock-control none --kernel-name fa1_fwd \
    --metrics "regex:l1tex__t_(sectors|requests)_pipe_lsu_mem_global_op_ldgsts.*\.sum$,l1tex__m_xbar2l1tex_read_bytes.sum" \
    --csv --page raw --print-units base --log-file "$1" python3 scripts/experiments/fa1_l1_hits_run.py
