"""The decode kernels on the H200, everything in one process tree, results under $OUT.

    python3 scripts/decode_h200.py [STEP,...]     steps: env, compile, tests, traces, bench,
                                                  vtime, vncu, validation (= vtime,vncu), smstream
                                                  (default: env,compile,tests,traces,bench,validation)

compile     fill CuPy's kernel cache for every decode kernel variant the later steps use
            (parallel NVRTC)
tests       pytest -m gpu tests/test_kernels_decode_gpu.py            -> $OUT/pytest.txt
traces      capture TRACE_CASES, check them against the schedule     -> $OUT/traces.tar.gz
            (unpack into tests/data/traces/)
bench       benchmarks/decode_vs_torch.py                             -> $OUT/decode_vs_torch_h200.txt
validation  vtime then vncu over iosim/data/validation/sweep_decode.yaml:
  vtime     iosim.measure.sweep time                                  -> $OUT/decode_times.csv
  vncu      iosim.measure.sweep ncu on those rows
            -> $OUT/measured_h200_decode.csv, measured_h200_decode_kernels.csv, ncu_decode_raw.txt.gz
smstream    scripts/sm_stream_h200.py: pointer-chase latency, one-SM stream rate vs bytes in flight
                                                                      -> $OUT/sm_stream_h200.json
Step time limits (seconds) from the environment: DECODE_TESTS_S, DECODE_BENCH_S, DECODE_NCU_S.
"""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = Path(os.environ.get("OUT", "out"))
SWEEP = ROOT / "iosim" / "data" / "validation" / "sweep_decode.yaml"

TILE = dict(block_q=16, block_kv=64, stages=3, warps=4)
TRACE_CASES = [  # (file stem, problem kwargs, schedule overrides)
    ("flash-decoding_b2_gqa4_ragged_s3", dict(batch=2, heads_q=8, heads_kv=2, seq_q=1, seq_kv=1000,
                                              seq_kv_list=(1000, 200)), dict(TILE, splits=3)),
    ("flash-decoding_b2_gqa4_ragged_page16_shuffled", dict(batch=2, heads_q=8, heads_kv=2, seq_q=1, seq_kv=1000,
                                                           seq_kv_list=(1000, 200), page_size=16,
                                                           page_layout="shuffled"), dict(TILE, splits=3)),
    ("flash-decoding_b2_gqa8_page256", dict(batch=2, heads_q=16, heads_kv=2, seq_q=1, seq_kv=700,
                                            seq_kv_list=(700, 300), page_size=256), dict(TILE, splits=2)),
    ("flash-decoding_b1_mha_nosplit", dict(batch=1, heads_q=4, heads_kv=4, seq_q=1, seq_kv=300),
     dict(TILE, splits=1)),
    ("flash-decoding_b2_q4_causal", dict(batch=2, heads_q=8, heads_kv=2, seq_q=4, seq_kv=500,
                                         seq_kv_list=(500, 77), causal=True), dict(TILE, splits=2)),
    ("flash-decoding_b3_prefix130", dict(batch=3, heads_q=8, heads_kv=2, seq_q=1, seq_kv=600,
                                         seq_kv_list=(600, 300, 450), prefix_len=130), dict(TILE, splits=3)),
    ("flash-decoding_b1_gqa4_default_tiling", dict(batch=1, heads_q=8, heads_kv=2, seq_q=1, seq_kv=2000), {}),
    ("flash-decoding_b2_gqa4_page16_default_tiling", dict(batch=2, heads_q=8, heads_kv=2, seq_q=1, seq_kv=1500,
                                                          seq_kv_list=(1500, 700), page_size=16,
                                                          page_layout="shuffled"), dict(splits=3)),
]


def sh(cmd, timeout=None) -> int:
    print(f"$ {cmd}", flush=True)
    t = time.time()
    try:
        r = subprocess.run(cmd, shell=True, timeout=timeout)
        rc = r.returncode
    except subprocess.TimeoutExpired:
        rc = 124
    print(f"  (rc {rc}, {time.time() - t:.1f}s)", flush=True)
    return rc


def step_env():
    sh("nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv")
    sh("python3 -c 'import cupy, torch; print(cupy.__version__, torch.__version__, torch.backends.cudnn.version())'")


def _variants() -> list:
    """(defines, dtype, trace) of every decode kernel build the steps use."""
    from iosim import AttentionProblem, build_schedule
    from iosim.kernels.decode import DecodeLaunch
    sys.path.insert(0, str(ROOT / "tests"))
    import test_kernels_decode_gpu as t
    out = set()

    def add(L, trace=False):
        out.add((tuple(sorted(L.defines().items())), L.dtype, trace))
    for hq, hkv, sq, lens, page, splits, causal, d, dtype, extra in t.CASES:
        add(DecodeLaunch(batch=len(lens), heads_q=hq, heads_kv=hkv, seq_q=sq, seqlens=lens, head_dim=d,
                         dtype=dtype, causal=causal, splits=splits, page_size=page, **extra))
    for _, kw, over in TRACE_CASES:
        try:
            add(DecodeLaunch.from_schedule(build_schedule(AttentionProblem(**kw), "h200", "flash-decoding", **over)), True)
        except Exception as exc:
            print("variant skipped:", exc)
    import yaml
    for c in yaml.safe_load(SWEEP.read_text())["configs"]:
        if c["algorithm"] != "flash-decoding":
            continue
        kw = {k: v for k, v in c.items() if k not in ("id", "impl", "algorithm")}
        try:
            add(DecodeLaunch.from_schedule(build_schedule(AttentionProblem(**kw), "h200", "flash-decoding")))
        except Exception as exc:
            print("variant skipped:", c["id"], exc)
    for til in ({"block_kv": 128, "stages": 2},):
        for page in (0, 16, 64, 256):
            add(DecodeLaunch(batch=1, heads_q=32, heads_kv=8, seq_q=1, seqlens=(4096,), page_size=page, **til))
            add(DecodeLaunch(batch=1, heads_q=32, heads_kv=32, seq_q=1, seqlens=(4096,), page_size=page, **til))
    return sorted(out)


def _compile(v):
    defs, dtype, trace = v
    from iosim.kernels.build import get_kernel
    t = time.time()
    try:
        for fn in ("fd_split", "fd_combine"):
            get_kernel("decode.cu", fn, dict(defs), dtype, trace)
        return f"{dict(defs)} {dtype} trace={trace}: {time.time() - t:.1f}s"
    except Exception as exc:
        return f"{dict(defs)} {dtype} trace={trace}: FAILED {exc}"


def step_compile():
    from multiprocessing import Pool
    vs = _variants()
    print(f"compiling {len(vs)} variants", flush=True)
    with Pool(min(14, len(vs))) as pool:
        for line in pool.imap_unordered(_compile, vs):
            print("  " + line, flush=True)


def step_tests():
    sh(f"python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_kernels_decode_gpu.py "
       f"> {OUT}/pytest.txt 2>&1", timeout=int(os.environ.get("DECODE_TESTS_S", 120)))
    print(Path(OUT / "pytest.txt").read_text()[-3000:], flush=True)


def step_traces():
    from iosim import AttentionProblem, build_schedule
    from iosim.kernels.run import capture
    from iosim.kernels.trace import compare_trace, trace_stats
    tdir = OUT / "traces"
    tdir.mkdir(parents=True, exist_ok=True)
    for stem, kw, over in TRACE_CASES:
        try:
            p = AttentionProblem(**kw)
            sched = build_schedule(p, "h200", "flash-decoding", **over)
            tr = capture(p, "flash-decoding", **over)
            tr.tiling = {k: dict(v) for k, v in tr.tiling.items()}
            tr.tiling["fwd"]["splits"] = next(k for k in sched.kernels if k.name == "fd_split").launch.grid[0]
            tr.device = "NVIDIA H200"
            tr.command = "python3 scripts/decode_h200.py traces"
            diffs = compare_trace(sched, tr)
            print(f"{stem}: {len(diffs)} difference(s) {diffs[:3]} stats {trace_stats(sched, tr)}", flush=True)
            tr.save(tdir / f"{stem}.json")
        except Exception as exc:
            print(f"{stem}: FAILED {type(exc).__name__}: {exc}", flush=True)
    with tarfile.open(OUT / "traces.tar.gz", "w:gz") as tf:
        for f in sorted(tdir.glob("*.json")):
            tf.add(f, arcname=f.name)
    for f in tdir.glob("*.json"):
        f.unlink()
    tdir.rmdir()


def step_bench():
    sh(f"python3 benchmarks/decode_vs_torch.py --out {OUT}/decode_vs_torch_h200.txt",
       timeout=int(os.environ.get("DECODE_BENCH_S", 170)))


def step_vtime():
    sh(f"IOSIM_SWEEP={SWEEP} python3 -m iosim.measure.sweep time {OUT / 'decode_times.csv'}", timeout=80)


def step_vncu():
    times = OUT / "decode_times.csv"
    raw = OUT / "ncu_decode_raw.txt"
    sh(f"IOSIM_SWEEP={SWEEP} python3 -m iosim.measure.sweep ncu {times} {OUT}/measured_h200_decode.csv {raw} "
       f"{OUT}/measured_h200_decode_kernels.csv", timeout=int(os.environ.get("DECODE_NCU_S", 150)))
    if raw.exists():
        with open(raw, "rb") as f, gzip.open(str(raw) + ".gz", "wb") as g:
            g.write(f.read())
        raw.unlink()


def step_smstream():
    sh(f"python3 {ROOT / 'scripts' / 'sm_stream_h200.py'} {OUT / 'sm_stream_h200.json'}",
       timeout=int(os.environ.get("DECODE_SMSTREAM_S", 60)))


def step_validation():
    step_vtime()
    step_vncu()


STEPS = {"env": step_env, "compile": step_compile, "tests": step_tests, "traces": step_traces,
         "bench": step_bench, "vtime": step_vtime, "vncu": step_vncu, "validation": step_validation,
         "smstream": step_smstream}

if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    steps = sys.argv[1].split(",") if len(sys.argv) > 1 else ["env", "compile", "tests", "traces", "bench",
                                                             "validation"]
    t0 = time.time()
    for s in steps:
        print(f"==== {s} ({time.time() - t0:.0f}s)", flush=True)
        try:
            STEPS[s]()
        except Exception as exc:
            print(f"step {s} FAILED: {type(exc).__name__}: {exc}", flush=True)
    print(f"==== done ({time.time() - t0:.0f}s)", flush=True)
