"""torch.nn.functional.scaled_dot_product_attention on one back end (flash or cuDNN), forward
or backward, as a callable for timing.py (torch imported lazily)."""
from __future__ import annotations

BACKENDS = {"torch_flash": "FLASH_ATTENTION", "torch_cudnn": "CUDNN_ATTENTION"}


def make_op(problem, backend: str, n_sets: int, seed: int = 0):
    """op(k) running the problem's direction on input set k; None if the back end refuses."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if problem.seq_q != problem.seq_kv and problem.causal:
        return None   # torch's is_causal is top-left aligned; ours is bottom-right
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[problem.dtype]
    g = torch.Generator(device="cuda").manual_seed(seed)
    b, hq, hkv, nq, nkv, d = (problem.batch, problem.heads_q, problem.heads_kv, problem.seq_q,
                              problem.seq_kv, problem.head_dim)
    bwd = problem.direction != "fwd"
    sets = []
    for _ in range(n_sets):
        q = torch.randn(b, hq, nq, d, device="cuda", dtype=dt, generator=g, requires_grad=bwd)
        k = torch.randn(b, hkv, nkv, d, device="cuda", dtype=dt, generator=g, requires_grad=bwd)
        v = torch.randn(b, hkv, nkv, d, device="cuda", dtype=dt, generator=g, requires_grad=bwd)
        sets.append([q, k, v])
    be = getattr(SDPBackend, BACKENDS[backend])
    gqa = {"enable_gqa": True} if hkv != hq else {}

    def fwd(k):
        q, kk, v = sets[k][:3]
        with sdpa_kernel([be]):
            return F.scaled_dot_product_attention(q, kk, v, is_causal=problem.causal, **gqa)

    try:
        with torch.no_grad():
            fwd(0)
        if bwd:
            for s in sets:
                out = fwd(sets.index(s))
                s.append(out)
                s.append(torch.randn_like(out))
    except RuntimeError:
        return None
    if not bwd:
        def op(k):
            with torch.no_grad():
                fwd(k)
        return op

    def op(k):
        q, kk, v, out, do = sets[k]
        torch.autograd.grad(out, (q, kk, v), do, retain_graph=True)
    return op
