"""Two questions about what the H200's L2 does with stores, for the DRAM-byte and the odd-N
budgets (none of the shapes is a validation row):

  flash   torch's flash back end (FlashAttention-2 forward, d 128, H 16, non-causal) at
          N 1024 with B 2 / 4 / 8 / 16 (O = 8.4 / 16.8 / 33.6 / 67.1 MB) and N 4096 with
          B 1 / 2 / 4: how much of O the L2 still holds dirty at the kernel's end (O minus
          Nsight Compute's DRAM writes), against the 27.4 MiB dirty cap and the interleaved
          probe's min(28, 40 x store share) MiB (measurements/h200/l2_sharing/)
  qk      cuBLAS's S = Q K^T (torch.matmul, fp16, d 64) at N 2992 / 3000 / 3008 (z 16) and
          4992 / 5000 / 5008 (z 9): the L2's write sectors and requests where S's pitch is on
          and off the 32-byte sector grid (N % 16 = 8: every odd row starts mid-sector)

    python3 scripts/experiments/l2_write_paths_h200.py --one flash 1024 16   # one call (ncu)
"""
from __future__ import annotations

import sys


def run(form: str, n: int, z: int) -> None:
    import torch
    r = lambda *s: torch.randn(*s, device="cuda", dtype=torch.float16)  # noqa: E731
    if form == "flash":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q, k, v = r(z, 16, n, 128), r(z, 16, n, 128), r(z, 16, n, 128)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(q, k, v)
    else:
        q, k = r(z, n, 64), r(z, n, 64)
        torch.matmul(q, k.transpose(-1, -2))
    torch.cuda.synchronize()


if __name__ == "__main__":
    run(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
