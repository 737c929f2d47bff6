"""Ablation switches: turn one feature of a schedule's pipelines off, to ask what it buys.

- warp_specialization=False: no producer warpgroup; the CTA's warps load and compute in turn
  with the kernel's cp.async-style buffering (FA-3 without TMA warp specialization). Intra-
  warpgroup overlap needs the warp-specialized pipeline, so it goes too.
- intra_overlap=False: a consumer waits for its softmax before issuing the next QKᵀ GEMM.
- pingpong=False: the consumer warpgroups run in lockstep, i.e. as one consumer doing all the
  iteration's work, so no consumer's softmax runs under another's GEMMs.
- stages (FA-2 and every buffered kernel): the tiling option `stages`, passed to the schedule
  builder like the other tiling options.

Kernels are rebuilt with a changed `Pipeline`; programs, bytes and FLOPs are unchanged.
"""
from __future__ import annotations

from dataclasses import replace

SWITCHES = ("warp_specialization", "intra_overlap", "pingpong")


def ablate(schedule, warp_specialization: bool = True, intra_overlap: bool = True,
           pingpong: bool = True):
    """The schedule with the features switched off (True keeps a feature as built)."""
    if warp_specialization and intra_overlap and pingpong:
        return schedule
    kernels = []
    for k in schedule.kernels:
        p = k.pipeline
        if not warp_specialization:
            p = replace(p, warp_specialized=False, intra_overlap=False, consumer_warpgroups=1)
        if not intra_overlap:
            p = replace(p, intra_overlap=False)
        if not pingpong:
            p = replace(p, consumer_warpgroups=1)
        kernels.append(k if p == k.pipeline else replace(k, pipeline=p))
    notes = tuple(schedule.notes) + (
        "ablation: " + ", ".join(f"{n} off" for n, on in
                                 (("warp specialization", warp_specialization),
                                  ("intra-warpgroup overlap", intra_overlap),
                                  ("ping-pong", pingpong)) if not on),)
    return replace(schedule, kernels=tuple(kernels), notes=notes)
