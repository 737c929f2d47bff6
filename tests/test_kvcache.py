"""Paged KV, per-request lengths, shared prefixes and the cascade schedule: counts against
closed forms, block tables against hand-worked allocations, bad input as one line, exit 2."""
import pytest
from click.testing import CliRunner

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.algorithms.kvcache import block_table, footprint
from iosim.cli import main

H100 = load_gpu("h100")


def loads_of(schedule, tensor):
    """(bytes, number of load operations) of `tensor`, from every CTA's expanded program."""
    from iosim.schedule import expand
    n = b = 0
    for k in schedule.kernels:
        for cta in range(k.num_ctas):
            for op in expand(k.program(cta)):
                if op.kind == "load" and op.tensor == tensor:
                    n, b = n + 1, b + op.bytes
    return b, n


@pytest.mark.parametrize("algorithm", ["fa2", "flash-decoding"])
def test_pages_smaller_than_a_tile_split_its_load_without_changing_bytes(algorithm):
    # 1,000 keys in 128-key tiles: 7 full tiles (8 pages of 16 each) and a 104-key tile (7 pages)
    p = AttentionProblem(heads_q=4, heads_kv=1, seq_q=1, seq_kv=1000, head_dim=64)
    flat = build_schedule(p, H100, algorithm, block_kv=128, **({"splits": 1} if "flash" in algorithm else {}))
    paged = build_schedule(p.with_(page_size=16), H100, algorithm, block_kv=128,
                           **({"splits": 1} if "flash" in algorithm else {}))
    heads_reading = 4 if algorithm == "fa2" else 1      # fa2: one CTA per query head
    assert loads_of(paged, "K")[0] == loads_of(flat, "K")[0] == heads_reading * 1000 * 64 * 2
    assert loads_of(paged, "K")[1] == heads_reading * (7 * 8 + 7)
    assert loads_of(flat, "K")[1] == heads_reading * 8


def test_pages_larger_than_a_tile_leave_its_loads_whole():
    p = AttentionProblem(heads_q=4, heads_kv=1, seq_q=1, seq_kv=1000, head_dim=64,
                         page_size=256)
    s = build_schedule(p, H100, "flash-decoding", block_kv=128, splits=1)
    assert loads_of(s, "K")[1] == 8


def test_block_tables_by_layout():
    p = AttentionProblem(batch=2, heads_q=1, seq_q=1, seq_kv=64, page_size=16)
    assert block_table(p) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # continuous batching: both requests grow a token per step, taking the next free page
    assert block_table(p.with_(page_layout="fragmented")) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    shuffled = block_table(p.with_(page_layout="shuffled"))
    assert sorted(shuffled[0] + shuffled[1]) == list(range(8))
    assert shuffled == block_table(p.with_(page_layout="shuffled"))     # deterministic


def test_shared_prefix_pages_appear_once_in_every_table():
    p = AttentionProblem(batch=3, heads_q=1, seq_q=1, seq_kv=80, page_size=16, prefix_len=32)
    tables = block_table(p)
    assert all(t[:2] == [0, 1] for t in tables)
    assert footprint(p).pages == 2 + 3 * 3


def test_footprint_counts_the_unused_tail_of_last_pages():
    # 100 keys in pages of 16: 7 pages, 12 unused slots of 2 (K, V) × 2 heads × 64 × 2 B
    p = AttentionProblem(heads_q=2, seq_q=1, seq_kv=100, head_dim=64, page_size=16)
    f = footprint(p)
    assert (f.pages, f.unused_bytes, f.runs) == (7, 12 * 2 * 2 * 64 * 2, 1)


def test_per_request_lengths_read_each_requests_own_kv():
    p = AttentionProblem(batch=3, heads_q=8, heads_kv=2, seq_q=1, seq_kv_list=(100, 2000, 37))
    t = build_schedule(p, H100, "flash-decoding").totals()
    assert t.load_bytes["K"] == 2 * (100 + 2000 + 37) * 128 * 2
    assert p.useful_flops() == 4 * 128 * (100 + 2000 + 37) * 8


def test_without_cascade_every_request_reads_the_prefix():
    p = AttentionProblem(batch=8, heads_q=8, heads_kv=2, seq_q=1, seq_kv=1000, prefix_len=512,
                         head_dim=64)
    t = build_schedule(p, H100, "flash-decoding").totals()
    assert t.load_bytes["K_prefix"] == 8 * 2 * 512 * 64 * 2
    assert t.load_bytes["K"] == 8 * 2 * 488 * 64 * 2


def test_cascade_reads_the_prefix_once_per_group_of_requests():
    # 4 packed rows per request (g = 4, one token): 64-row prefix tiles hold 16 requests,
    # so 8 requests are one group and the prefix is read once per KV head
    p = AttentionProblem(batch=8, heads_q=8, heads_kv=2, seq_q=1, seq_kv=1000, prefix_len=512,
                         head_dim=64)
    s = build_schedule(p, H100, "flash-decoding-cascade")
    t = s.totals()
    assert [k.name for k in s.kernels] == ["fd_prefix", "fd_split", "fd_combine"]
    assert t.load_bytes["K_prefix"] == 2 * 512 * 64 * 2
    assert t.load_bytes["K"] == 8 * 2 * 488 * 64 * 2
    s_p = s.kernels[0].launch.grid[0]
    assert t.store_bytes["ML_prefix"] == t.load_bytes["ML_prefix"] == 8 * 2 * s_p * 4 * 2 * 4
    assert t.store_bytes["O"] == 8 * 8 * 64 * 2


def test_cascade_groups_at_most_a_tile_of_rows():
    # 40 requests × 4 rows: 16 per 64-row tile → 3 groups, prefix read 3× per KV head
    p = AttentionProblem(batch=40, heads_q=8, heads_kv=2, seq_q=1, seq_kv=600, prefix_len=256,
                         head_dim=64)
    s = build_schedule(p, H100, "flash-decoding-cascade")
    assert s.totals().load_bytes["K_prefix"] == 3 * 2 * 256 * 64 * 2
    k = s.kernels[0]
    a, b = k.totals(), k.totals_by_enumeration()
    assert (a.load_bytes, a.store_bytes, a.mma_flops) == (b.load_bytes, b.store_bytes, b.mma_flops)


BASE = ["run", "--algo", "flash-decoding", "--heads", "8", "--kv-heads", "2", "--seq", "1",
        "--model", "roofline"]


@pytest.mark.parametrize("extra,fragment", [
    (["--seq-kv", "4096", "--page-size", "48"], "page-size must be a power of two"),
    (["--seq-kv", "4096", "--page-size", "8192"], "larger than the KV length"),
    (["--seq-kv", "4096", "--splits", "0"], "'--splits': 0 is not in the range x>=1"),
    (["--seq-kv", "4096", "--splits", "33"], "more than the 32 KV blocks"),
    (["--seq-kv", "4096", "--prefix-len", "5000"], "longer than the KV length"),
    (["--batch", "3", "--seq-kv-list", "100,200"], "2 length(s) but batch is 3"),
    (["--batch", "2", "--seq-kv-list", "100,x"], "comma-separated integers"),
])
def test_bad_kv_cache_input_is_one_line_and_exit_2(extra, fragment):
    r = CliRunner().invoke(main, BASE + extra)
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0]


def test_paged_run_reports_the_page_split():
    r = CliRunner().invoke(main, BASE + ["--seq-kv", "4096", "--page-size", "16", "--format",
                                         "json"])
    assert r.exit_code == 0, r.output
    import json
    d = json.loads(r.output)
    assert d["problem"]["page_size"] == 16
    assert any("each 128-row K/V tile loaded as 8 page loads" in n for n in d["notes"])


@pytest.mark.parametrize("name,group,batch", [("llama3-8b-decode-128k", 4, 1),
                                              ("llama3-70b-decode-batch64", 8, 64),
                                              ("serving-shared-prompt-2k", 4, 32)])
def test_decode_scenarios_run_at_or_above_the_bound(name, group, batch):
    from iosim.analysis.analyze import analyze
    from iosim.cli import resolve
    r = resolve({"scenario": name})
    problem, gpu, scen, tiling = r.problem, r.gpu, r.scenario, r.tiling
    assert (problem.group_size, problem.batch, problem.seq_q) == (group, batch, 1)
    a = analyze(problem, gpu, scen["algorithm"], model="roofline", **tiling)
    assert a.bound_ratio >= 1


def test_serving_scenario_stores_the_system_prompt_once():
    from iosim.cli import resolve
    p = resolve({"scenario": "serving-shared-prompt-2k"}).problem
    assert p.prefix_len == 2048 and len(p.seq_kv_list) == 32
    assert p.kv_tokens_stored() == sum(p.seq_kv_list) - 31 * 2048


def test_a_huge_uniform_batch_costs_one_length_not_one_per_request():
    # 65,535 requests (the batch limit) of 1,024 keys: the problem, its floor and FA-1's bound
    # are sums over the distinct KV lengths (one pair), not over the requests
    from iosim.analysis.bounds import io_bounds
    n = 65_535
    p = AttentionProblem(batch=n, heads_q=1, seq_q=1, seq_kv=1024, head_dim=64)
    assert p.kv_length_counts == ((1024, n),)
    assert p.kv_tokens_stored() == 1024 * n
    b = io_bounds(p, 233_472)
    # floor: Q (1 row) + K + V (1,024 rows each) + O (1 row), 64 fp16 elements per row
    assert b.compulsory_bytes == n * (1 + 2 * 1024 + 1) * 64 * 2
