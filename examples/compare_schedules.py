"""FA-1, FA-2 and FA-3 on one problem: where the bytes go and what bounds the time.

    python examples/compare_schedules.py [--seq 8192] [--gpu h100] [--causal]

L2→SM bytes are what the papers call HBM accesses (tile loads into shared memory); DRAM
bytes are what is left after the L2 model. FA-1 writes O, l and m back every outer step,
FA-2 keeps O in registers, FA-3 overlaps softmax with the GEMMs.
"""
import argparse

import iosim.api as io

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--seq", type=int, default=8192)
ap.add_argument("--gpu", default="h100")
ap.add_argument("--causal", action="store_true")
args = ap.parse_args()

df = io.compare(algos=["fa1", "fa2", "fa3"], gpu=args.gpu, seq=args.seq, causal=args.causal)
print(f"{args.gpu}, batch 1, 32 heads, d 128, N {args.seq}{', causal' if args.causal else ''}")
print(f"{'algo':5s} {'L2->SM GB':>10s} {'SM->L2 GB':>10s} {'DRAM GB':>8s} {'time ms':>8s} "
      f"{'TFLOP/s':>8s}  bound")
for d in df.to_dict("records"):
    print(f"{d['algorithm']:5s} {d['counters.l2_to_smem_bytes'] / 1e9:10.3f} "
          f"{d['counters.smem_to_l2_bytes'] / 1e9:10.3f} "
          f"{(d['dram_read_bytes'] + d['dram_write_bytes']) / 1e9:8.3f} "
          f"{d['predicted_time_s'] * 1e3:8.3f} {d['achieved_tflops']:8.1f}  {d['bound_by']}")
