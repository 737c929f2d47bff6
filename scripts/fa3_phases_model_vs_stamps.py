"""FA-3 at N 512 on a full grid (B 32, H 16): a steady-state CTA's phases in exact mode against
the untraced stamps of measurements/h200/q_latency/ (O store on). Model phases from the memory
front end's calls: entry -> Q issued, the Q wait, Q landed -> O stored (loop, normalise, the O
store's issue), the turnover; measured: entry -> producer, producer -> consumer 0 has Q, Q ->
the last consumer's end, the gap to the next CTA on the SM. Medians over the CTAs after each
SM's first, and the first CTAs' lifetimes. Then consumer 0's S_j -> S_{j+1} steps of a lone CTA
(N_kv 512) in exact mode, as built and without the intra-warpgroup overlap, against
measurements/h200/q_latency/fa3_steps_h200.json. Run from the repository root:
python scripts/fa3_phases_model_vs_stamps.py"""
import json
from dataclasses import replace

import numpy as np

from iosim import AttentionProblem, load_gpu
from iosim.algorithms import build_schedule
from iosim.clock import sustained_simulation
from iosim.sim import memory, pipeline

RAW = np.load("measurements/h200/q_latency/q_latency_h200.npz")


def recorded_memory():
    rec = {}
    load, store = memory.ExactMemory.load, memory.ExactMemory.store

    def rload(self, key, tensor, nbytes, now_s, oob_bytes=0):
        r = load(self, key, tensor, nbytes, now_s, oob_bytes)
        if tensor == "Q":
            rec["Q", *key[1:]] = (now_s, r)
        return r

    def rstore(self, key, tensor, nbytes, reduce, now_s, layout="coalesced"):
        if tensor == "O":
            rec["O", *key[1:]] = now_s
        return store(self, key, tensor, nbytes, reduce, now_s, layout)
    memory.ExactMemory.load, memory.ExactMemory.store = rload, rstore
    return rec, (load, store)


def first_and_later(starts, sms):
    first = np.zeros(len(starts), dtype=bool)
    for sm in np.unique(sms):
        idx = np.where(sms == sm)[0]
        first[idx[np.argmin(starts[idx])]] = True
    return first


def model(d):
    rec, orig = recorded_memory()
    try:
        gpu = load_gpu("h200-calibrated")
        p = AttentionProblem(batch=32, heads_q=16, seq_q=512, seq_kv=512, head_dim=d, dtype="fp16")
        s = build_schedule(p, gpu, "fa3")
        r, _ = sustained_simulation(s, gpu, l2_protocol="ncu", time_protocol="warm", mode="exact")
    finally:
        memory.ExactMemory.load, memory.ExactMemory.store = orig
    df = r.timeline_df()
    k = s.kernels[0]
    rows = []
    for c, st, en in zip(df.cta, df.start_s, df.end_s):
        i, h, b = k.cta_coord(int(c))
        (qi, qr), o = rec["Q", b, h, i], rec["O", b, h, i]
        rows.append((qi - st, qr - qi, o - qr, en - o, en - st))
    rows = np.array(rows) * 1e9
    first = first_and_later(df.start_s.values, df.sm.values)
    return rows, first, r.time_s * 1e9


def measured(d):
    st = RAW[f"fa3_d{d}_B32_H16_ostore1"].astype(float)
    first = first_and_later(st[:, 0], st[:, 7])
    end = np.maximum(st[:, 5], st[:, 6])
    gap = np.full(len(st), np.nan)
    for sm in np.unique(st[:, 7]):
        idx = np.where(st[:, 7] == sm)[0]
        idx = idx[np.argsort(st[idx, 0])]
        gap[idx[:-1]] = st[idx[1:], 0] - end[idx[:-1]]
    rows = np.stack([st[:, 1] - st[:, 0], st[:, 2] - st[:, 1], end - st[:, 2], gap, end - st[:, 0]], 1)
    return rows, first, float(end.max() - st[:, 0].min())


def model_steps(d: int, intra: bool) -> list:
    """Consumer 0's S_j done times (ns) of one CTA alone, differenced: the first three steps."""
    gpu = load_gpu("h200-calibrated")
    nq = 192 if d == 64 else 128
    p = AttentionProblem(batch=1, heads_q=1, seq_q=nq, seq_kv=512, head_dim=d, dtype="fp16")
    s = build_schedule(p, gpu, "fa3")
    if not intra:
        s = replace(s, kernels=tuple(replace(k, pipeline=replace(k.pipeline, intra_overlap=False))
                                     for k in s.kernels))
    done, orig = [], pipeline._Consumers.issue_in_turn

    def recorded(self, c, works, stall):
        finish = yield from orig(self, c, works, stall)
        if c == 0:
            done.append(finish[0])
        return finish
    pipeline._Consumers.issue_in_turn = recorded
    try:
        sustained_simulation(s, gpu, l2_protocol="ncu", time_protocol="warm", mode="exact")
    finally:
        pipeline._Consumers.issue_in_turn = orig
    done = done[len(done) // 2:]                      # the second (sustained-clock) run
    s_done = done[:-1] if intra else done[0::2]       # the S GEMMs (not the P V ones)
    return [round((b - a) * 1e9) for a, b in zip(s_done, s_done[1:4])]


def main():
    names = ("setup", "Q wait", "Q -> end", "turnover/gap", "lifetime")
    print(f"{'':14s}" + "".join(f"{n:>14s}" for n in names) + f"{'first life':>12s}{'span':>10s}")
    for d in (128, 64):
        for label, (rows, first, span) in (("measured", measured(d)), ("model", model(d))):
            later = np.nanmedian(rows[~first], axis=0)
            print(f"d{d:<4d}{label:9s}" + "".join(f"{x:14.0f}" for x in later)
                  + f"{np.median(rows[first, 4]):12.0f}{span / 1e3:9.1f}u")


def steps():
    meas = json.load(open("measurements/h200/q_latency/fa3_steps_h200.json"))
    print("consumer 0's S_j -> S_j+1 steps of a lone CTA, ns (measured | model)")
    for d, nq in ((64, 192), (128, 128)):
        for name, intra in (("full", True), ("no_intra", False)):
            m = meas[f"fa3-d{d}-B1-H1-Nq{nq}-{name}"]["steps_ns"]
            m = [round(x) if x < 1e9 else None for x in m]    # no_intra has no first stamp
            print(f"d{d:<4d}{name:9s} {m} | {model_steps(d, intra)}")


if __name__ == "__main__":
    main()
    steps()
