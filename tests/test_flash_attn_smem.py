"""flash-attention's forward kernel holds one K and one V tile in shared memory
(kernel_traits.h: kSmemQSize + kSmemKVSize), so its d = 256 launch on an H100 / H200, 64 x 64
with 4 warps, takes 96 KB and runs 2 CTAs per SM, as run_mha_fwd_hdim256's comment says."""
import pytest

from iosim import AttentionProblem, load_gpu
from iosim.algorithms import build_schedule
from iosim.sim.launch import ctas_per_sm


def fwd_kernel(gpu, d, bq, bkv, kernel):
    p = AttentionProblem(batch=4, heads_q=8, seq_q=4096, head_dim=d, dtype="fp16")
    return build_schedule(p, gpu, "fa2", block_q=bq, block_kv=bkv, warps=4, kernel=kernel).kernels[0]


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_d256_takes_96_kb_and_two_ctas_per_sm(gpu):
    g = load_gpu(gpu)
    k = fwd_kernel(g, 256, 64, 64, "torch-flash")
    assert k.launch.smem_bytes_per_cta == 96 * 1024
    assert ctas_per_sm(g, k) == 2


@pytest.mark.parametrize("d, bq, bkv", [(64, 128, 128), (128, 128, 64)])
def test_q_plus_one_k_and_one_v_tile(d, bq, bkv):
    k = fwd_kernel(load_gpu("h200"), d, bq, bkv, "flash-attn")
    assert k.launch.smem_bytes_per_cta == (bq + 2 * bkv) * d * 2


def test_the_project_kernel_keeps_its_stages():
    k = fwd_kernel(load_gpu("h200"), 128, 128, 64, "iosim")
    assert k.launch.smem_bytes_per_cta == (128 + 2 * 2 * 64) * 128 * 2
