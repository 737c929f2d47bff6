"""The decode page: figures present, numbers taken from the analyses it runs."""
from iosim import AttentionProblem, load_gpu
from iosim.report.decode import build_decode_report, group_records, page_records

H100 = load_gpu("h100")
P = AttentionProblem(heads_q=32, heads_kv=8)


def test_decode_page_has_its_three_figures_and_the_speed_up():
    page = build_decode_report(P, H100, model="roofline", seq_kvs=(1024, 8192))
    for fid in ("iosim-decode-time", "iosim-decode-gqa", "iosim-decode-pages"):
        assert f'id="{fid}"' in page
    assert "faster at 8,192 keys" in page


def test_fa2_kv_reads_grow_with_the_group_and_flash_decodings_do_not():
    rs = {(r["algorithm"], r["group"]): r for r in group_records(P, H100, groups=(1, 8),
                                                                 seq_kv=4096)}
    cache = 2 * 8 * 4096 * 128 * 2
    assert rs[("fa2", 8)]["kv_load_bytes"] == 8 * cache        # one pass per query head
    assert rs[("flash-decoding", 8)]["kv_load_bytes"] == cache  # one pass per KV head


def test_smaller_pages_mean_more_kv_loads_for_the_same_bytes():
    rs = page_records(P, H100, pages=(16, 128), seq_kv=8192)    # tiles of 128 keys
    assert rs[0]["kv_load_bytes"] == rs[1]["kv_load_bytes"]
    lens = [8192 - 997 * i for i in range(8)]                  # the page records' 8 requests
    kv_heads_times_kv = 8 * 2
    assert rs[0]["kv_loads"] == kv_heads_times_kv * sum(-(-n // 16) for n in lens)
    assert rs[1]["kv_loads"] == kv_heads_times_kv * sum(-(-n // 128) for n in lens)  # one per tile
    assert rs[0]["unused_bytes"] < rs[1]["unused_bytes"]
