"""Flash-Decoding kernels of iosim against torch SDPA with one query token (cuDNN and flash back
ends; with --all-backends also memory-efficient and the project's FA-2 kernel), on the same
inputs, measured in the same run.

    python3 benchmarks/decode_vs_torch.py [--quick] [--all-backends] [--out FILE]

fp16, d = 128, one query token, contiguous KV cache of seq_kv keys per request; GQA 1:1
(32 query heads, 32 KV heads) and 4:1 (32 / 8), seq_kv 16k and 32k, batch 1, 8, 64; then
GQA 8:1 (64 / 8) and a paged cache (pages 16 / 64 / 256, shuffled pool) at one size.
Each figure is the median of CUDA-event timings after warm-up, inputs rotated over enough sets
to defeat the 60 MB L2; the variants of one problem (ours, its split counts and page sizes, the
torch back ends) take turns round by round (time_interleaved), so they see the same clock. Ours: the fd_split (+ fd_combine) kernels with the splits and tiling of
iosim's flash-decoding schedule (its default). Batch-1 MHA rows are also run at 8, 16, 32, 64
splits (more CTAs than the split heuristic's choice fills the SMs' slots in more waves).
GB/s = K + V bytes / time. `vs cuDNN` = cuDNN time / our time at flash-decoding's default tiling (> 1: ours faster). torch back ends that refuse
GQA (enable_gqa) are run on K, V expanded to every query head (marked *: 4x the bytes); a back
end that refuses the problem shows '-'. `err` = ‖O_ours − O_cuDNN‖ / ‖O_cuDNN‖."""
from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iosim import AttentionProblem, build_schedule  # noqa: E402

TILINGS = {"64x3": dict(block_kv=64, stages=3, warps=4), "128x2": dict(block_kv=128, stages=2, warps=4)}
BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")


def default_tiling(b, hq, hkv, n) -> str:
    """The TILINGS key of flash-decoding's default tiling for this problem (vs_cuDNN uses it)."""
    t = build_schedule(AttentionProblem(batch=b, heads_q=hq, heads_kv=hkv, seq_q=1, seq_kv=n),
                       "h200", "flash-decoding").tiling["fwd"]
    return next((k for k, v in TILINGS.items() if (v["block_kv"], v["stages"]) == (t.block_kv, t.stages)),
                "64x3")


def block_q(hq, hkv, sq=1):
    return 16 if (hq // hkv) * sq <= 16 else 32


def make_sets(b, hq, hkv, n, d, n_sets, seed=0):
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    out = []
    for _ in range(n_sets):
        out.append([torch.randn(b, h, s, d, device="cuda", dtype=torch.float16, generator=g)
                    for h, s in ((hq, 1), (hkv, n), (hkv, n))])
    return out


def ours_op(problem, sets, tiling, page_size=0, splits=None):
    """op(k) running fd_split (+ fd_combine) on set k; the DecodeLaunch used."""
    import cupy as cp
    import numpy as np
    import torch
    from iosim.kernels.decode import DecodeLaunch, make_runner

    p = problem.with_(page_size=page_size or None, page_layout="shuffled" if page_size else "contiguous")
    extra = {"splits": splits} if splits else {}
    sched = build_schedule(p, "h200", "flash-decoding", block_q=block_q(p.heads_q, p.heads_kv), **tiling, **extra)
    launch = DecodeLaunch.from_schedule(sched)
    Ts = []
    for q, k, v in sets:
        T = {"Q": cp.from_dlpack(q), "K": cp.from_dlpack(k), "V": cp.from_dlpack(v),
             "seqlens": cp.full(p.batch, p.seq_kv, dtype=np.int32),
             "block_table": cp.zeros((p.batch, 1), dtype=np.int32)}
        if page_size:   # the same keys in a shuffled page pool [pages][Hkv][P][D]
            n_p = p.seq_kv // page_size
            perm = torch.randperm(p.batch * n_p, device="cuda", generator=torch.Generator(device="cuda").manual_seed(1))
            for name, x in (("K", k), ("V", v)):
                pool = x.view(p.batch, p.heads_kv, n_p, page_size, p.head_dim).permute(0, 2, 1, 3, 4) \
                    .reshape(p.batch * n_p, p.heads_kv, page_size, p.head_dim)
                shuffled = torch.empty(pool.shape, dtype=pool.dtype, device="cuda")   # [pages][Hkv][P][D]
                shuffled[perm] = pool
                T[name] = cp.from_dlpack(shuffled)
            T["block_table"] = cp.from_dlpack(perm.to(torch.int32).view(p.batch, n_p).contiguous())
        Ts.append(T)
    runners = [make_runner(launch, T) for T in Ts]
    return (lambda i: runners[i]()), launch, Ts


def fa2_op(problem, sets):
    import cupy as cp
    from iosim.kernels.run import Launcher
    ln = Launcher(build_schedule(problem, "h200", "fa2"))
    Ts = [{"Q": cp.from_dlpack(q), "K": cp.from_dlpack(k), "V": cp.from_dlpack(v)} for q, k, v in sets]
    return lambda i: ln.run(Ts[i])


def torch_op(backend, sets, group):
    """op(k) or None (refused); whether K/V had to be expanded for GQA."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    be = getattr(SDPBackend, backend)
    outs = {}

    def mk(kv_of, extra):
        def op(i):
            q, k, v = sets[i]
            kk, vv = kv_of(i)
            with sdpa_kernel([be]), torch.no_grad():
                outs[i] = F.scaled_dot_product_attention(q, kk, vv, **extra)
        return op
    tries = [(lambda i: sets[i][1:], {"enable_gqa": True} if group > 1 else {}, False)]
    if group > 1:
        exp = {}

        def expanded(i):
            if i not in exp:
                exp[i] = tuple(x.repeat_interleave(group, dim=1) for x in sets[i][1:])
            return exp[i]
        tries.append((expanded, {}, True))
    for kv_of, extra, is_expanded in tries:
        op = mk(kv_of, extra)
        try:
            for i in range(len(sets)):
                op(i)
            torch.cuda.synchronize()
            return op, is_expanded, outs
        except RuntimeError:
            continue
    return None, False, outs


def rel_err(a, b) -> float:
    import torch
    a, b = a.float(), b.float()
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def time_interleaved(ops: dict, n_sets: int, rounds: int, per_round: int, warmup: int = 3) -> dict:
    """name -> median seconds of rounds x per_round CUDA-event timings of op(k); the ops take
    turns round by round (ours, cuDNN, ...), so all of them see the same clock and thermal
    state (cuDNN's batch-1 times moved 1.7x between runs when timed in one block)."""
    import statistics
    import torch
    for op in ops.values():
        for w in range(warmup):
            op(w % n_sets)
    torch.cuda.synchronize()
    times = {name: [] for name in ops}
    k = 0
    for _ in range(rounds):
        for name, op in ops.items():
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(per_round)]
            for a, b in ev:
                a.record()
                op(k % n_sets)
                b.record()
                k += 1
            torch.cuda.synchronize()
            times[name].extend(a.elapsed_time(b) / 1e3 for a, b in ev)
    return {name: statistics.median(t) for name, t in times.items()}


def run_case(b, hq, hkv, n, rounds, page_sizes=(), with_torch=True, all_backends=False, splits=()):
    """Ours at the default splits, the split sweep, the paged variants and torch's back ends,
    all timed interleaved (time_interleaved) on the same input sets."""
    import cupy as cp
    import torch
    from iosim.measure.timing import sets_to_defeat_l2, time_op

    d = 128
    p = AttentionProblem(batch=b, heads_q=hq, heads_kv=hkv, seq_q=1, seq_kv=n, head_dim=d)
    kv = p.kv_bytes()
    n_sets = sets_to_defeat_l2(kv + p.q_bytes() * 2)
    sets = make_sets(b, hq, hkv, n, d, n_sets)
    res = {"kv_bytes": kv, "sets": n_sets}
    til = TILINGS[default_tiling(b, hq, hkv, n)]
    ops, keep = {}, []
    op, launch, Ts = ours_op(p, sets, til)
    ops["ours"] = op
    res["ours_splits"] = launch.n_splits
    keep.append(("ours_O", Ts))
    for s in splits:
        op, launch, Ts = ours_op(p, sets, til, splits=s)
        ops[f"s{s}"] = op
        res[f"s{s}_splits"] = launch.n_splits
    for ps in page_sizes:
        op, launch, Ts = ours_op(p, sets, til, page_size=ps)
        ops[f"page{ps}"] = op
        keep.append((f"page{ps}_O", Ts))
    outs_by_be = {}
    if with_torch:
        for be in BACKENDS if all_backends else BACKENDS[:2]:
            op, expanded, outs = torch_op(be, sets, hq // hkv)
            if op is None:
                res[be] = None
                continue
            ops[be] = op
            res[be + "_expanded"] = expanded
            outs_by_be[be] = outs
    per_round = 5 if b == 1 else 2
    res.update(time_interleaved(ops, n_sets, rounds, per_round))
    for s in splits:
        res[f"s{s}"] = (res.pop(f"s{s}_splits"), res[f"s{s}"])
    for key, Ts in keep:
        res[key] = torch.from_dlpack(Ts[0]["O"]).clone()
    for be in ("CUDNN_ATTENTION",) + BACKENDS:
        if be in outs_by_be:
            res["ref_O"] = outs_by_be[be][0].clone()
            break
    del ops, keep, outs_by_be
    if all_backends:
        op = fa2_op(p, sets)
        res["fa2"] = time_op(op, n_sets, warmup=2, repeat=5)["time_s"]
        del op
    if "ref_O" in res:
        for key in [k for k in res if k.endswith("_O")]:
            res[key.replace("_O", "_err")] = rel_err(res[key], res["ref_O"])
    for key in [k for k in res if k.endswith("_O")] + ["ref_O"]:
        res.pop(key, None)
    del sets
    gc.collect()
    torch.cuda.empty_cache()
    cp.get_default_memory_pool().free_all_blocks()
    return res


def fmt_us(t):
    return f"{t * 1e6:9.1f}" if t else "        -"


SPLIT_SWEEP = (8, 16, 32, 64)   # batch-1 rows: more CTAs than the heuristic's choice


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer repeats and sizes")
    ap.add_argument("--all-backends", action="store_true",
                    help="also torch's memory-efficient back end and the project's FA-2 kernel")
    ap.add_argument("--out", help="also write the table to this file")
    args = ap.parse_args(argv)
    import torch
    from iosim.measure.timing import sets_to_defeat_l2, time_op

    rounds = 5 if args.quick else 12   # x 5 calls per round at batch 1, x 2 above (time_interleaved)
    cases = [(b, hq, hkv, n) for hq, hkv in ((32, 32), (32, 8)) for n in (16384, 32768)
             for b in ((1, 16) if args.quick else (1, 8, 64))]
    cases += [(1, 64, 8, 32768), (64, 64, 8, 16384)]
    head = ("  B  Hq Hkv  seq_kv  KV_MB  tiling splits   ours_us   GB/s  cudnn_us  flash_us"
            + ("  effic_us    fa2_us" if args.all_backends else "") + "  vs_cuDNN  err")
    lines = [head]
    print(head, flush=True)
    sweep_lines = []
    for b, hq, hkv, n in cases:
        sweep = SPLIT_SWEEP if b == 1 and hq == hkv else ()
        try:
            r = run_case(b, hq, hkv, n, rounds, all_backends=args.all_backends, splits=sweep)
        except Exception as exc:   # one case failing must not lose the table
            lines.append(f"{b:3d} {hq:3d} {hkv:3d} {n:7d}  failed: {type(exc).__name__}: {str(exc)[:120]}")
            print(lines[-1], flush=True)
            continue
        cud = r.get("CUDNN_ATTENTION")
        star = {be: "*" if r.get(be + "_expanded") else " " for be in BACKENDS}
        extra = (f"{fmt_us(r.get('EFFICIENT_ATTENTION'))}{star['EFFICIENT_ATTENTION']}{fmt_us(r.get('fa2'))}"
                 if args.all_backends else "")
        lines.append(
            f"{b:3d} {hq:3d} {hkv:3d} {n:7d} {r['kv_bytes'] / 1e6:6.0f}  {default_tiling(b, hq, hkv, n):>6s} "
            f"{r['ours_splits']:5d} {fmt_us(r['ours'])}  {r['kv_bytes'] / r['ours'] / 1e9:5.0f} "
            f"{fmt_us(cud)}{star['CUDNN_ATTENTION']}{fmt_us(r.get('FLASH_ATTENTION'))}{star['FLASH_ATTENTION']}"
            f"{extra}  {(cud / r['ours']) if cud else float('nan'):8.2f}  {r.get('ours_err', float('nan')):.1e}")
        print(lines[-1], flush=True)
        if sweep:
            cells = "  ".join(f"{r[f's{s}'][0]:3d}: {r[f's{s}'][1] * 1e6:7.1f}" for s in sweep)
            sweep_lines.append(f"  {b:3d} {hq:3d} {hkv:3d} {n:7d}  default {r['ours_splits']:3d}: "
                               f"{r['ours'] * 1e6:7.1f}  {cells}   cuDNN {fmt_us(cud)}")
    lines.append("")
    lines.append("batch-1 MHA at other split counts (splits asked -> splits run: ours_us):")
    lines.extend(sweep_lines)
    # paged KV: what page size costs (same keys, shuffled pool)
    lines.append("")
    lines.append("paged KV (default tiling and splits, shuffled page pool): B  Hq Hkv seq_kv  contiguous_us  "
                 "page16_us  page64_us  page256_us  (err vs cuDNN)")
    for b, hq, hkv, n in ((8, 32, 8, 32768), (1, 32, 8, 32768)):
        try:
            r = run_case(b, hq, hkv, n, rounds, page_sizes=(16, 64, 256))
            errs = " ".join(f"{r.get(f'page{ps}_err', float('nan')):.1e}" for ps in (16, 64, 256))
            lines.append(f"  {b:3d} {hq:3d} {hkv:3d} {n:7d} {fmt_us(r['ours'])}     {fmt_us(r['page16'])}"
                         f"  {fmt_us(r['page64'])}  {fmt_us(r['page256'])}   ({errs})")
        except Exception as exc:
            lines.append(f"  {b:3d} {hq:3d} {hkv:3d} {n:7d} failed: {type(exc).__name__}: {str(exc)[:120]}")
        print(lines[-1], flush=True)
    # one CTA per (b, hk), no split: what one CTA streams when few or many run at once
    lines.append("")
    lines.append("one CTA per KV head (splits 1, 16384 keys each): B  Hq Hkv  CTAs  ours_us  GB/s per CTA  GB/s total")
    for b, hkv in ((1, 1), (1, 8), (1, 32), (4, 32)):
        try:
            p = AttentionProblem(batch=b, heads_q=hkv, heads_kv=hkv, seq_q=1, seq_kv=16384, head_dim=128)
            n_sets = sets_to_defeat_l2(p.kv_bytes() + p.q_bytes() * 2)
            sets = make_sets(b, hkv, hkv, 16384, 128, n_sets)
            op, launch, Ts = ours_op(p, sets, TILINGS["128x2"], splits=1)
            t = time_interleaved({"ours": op}, n_sets, rounds, 2)["ours"]
            lines.append(f"  {b:3d} {hkv:3d} {hkv:3d} {b * hkv:5d} {fmt_us(t)}  {p.kv_bytes() / (b * hkv) / t / 1e9:12.1f}"
                         f"  {p.kv_bytes() / t / 1e9:10.0f}")
            del op, Ts, sets
        except Exception as exc:
            lines.append(f"  {b:3d} {hkv:3d} {hkv:3d} failed: {type(exc).__name__}: {str(exc)[:120]}")
        print(lines[-1], flush=True)
    title = (f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  cuDNN "
             f"{torch.backends.cudnn.version()}  (medians of {rounds} interleaved rounds x 5 calls at batch 1, "
             f"x 2 above; us = microseconds)")
    text = "\n".join([title] + lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
