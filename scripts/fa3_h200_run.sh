#!/bin/bash
# One H200 device call for the FA-3 part of issue 12 (run from the repository root, OUT set):
# the wgmma/softmax overlap probe, the kernels' SASS mix, numerics and traces of the kernel with
# separate K/V release, the K/V-release A/B and d = 64 ablations, then the fa3 validation sweep
# (CUDA events + ncu). Each phase is time-boxed; everything is logged to $OUT/log.txt.
set -o pipefail
LOG=$OUT/log.txt
ph() { echo "=== $1 $(date -u +%T)" | tee -a $LOG; }
ph probe;  timeout 60 python3 -m iosim.measure.wgmma_overlap $OUT/wgmma_overlap.json 2>&1 | tee -a $LOG
ph sass;   timeout 60 python3 benchmarks/fa3_sass.py $OUT/fa3_sass.txt > /dev/null 2>>$LOG; tail -3 $OUT/fa3_sass.txt >> $LOG
ph check
mkdir -p /tmp/chk
for v in full no_intra_overlap no_warp_specialization; do
  timeout 90 python3 benchmarks/fa3_vs_torch.py check $v /tmp/chk/check_$v.json 2>&1 | tee -a $LOG
done
ph traces; timeout 60 python3 benchmarks/fa3_vs_torch.py traces /tmp/chk/traces 2>&1 | tee -a $LOG
ph ab;     timeout 120 python3 benchmarks/fa3_kv_release.py measure $OUT/kv_release_measured.json 2>&1 | tee -a $LOG
ph sweep_time
export IOSIM_SWEEP=iosim/data/validation/sweep_fa3.yaml
timeout 120 python3 -m iosim.measure.sweep time /tmp/times.csv 2>&1 | tee -a $LOG
ph sweep_ncu
timeout 200 python3 -m iosim.measure.sweep ncu /tmp/times.csv $OUT/measured_h200_fa3.csv /tmp/ncu_raw.txt $OUT/measured_h200_fa3_kernels.csv 2>&1 | tee -a $LOG
(cd /tmp && tar czf $OUT/misc.tgz chk ncu_raw.txt times.csv 2>/dev/null)
ph done
