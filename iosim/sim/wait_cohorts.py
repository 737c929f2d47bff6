"""Wait cohorts: a synchronous kernel's CTAs grouped by which tensors their first loads wait
for DRAM on (the replay's per-CTA counts, l2model.KernelCounts.cta_loads), each cohort with
its own miss figures (docs/simulator.md, "Lockstep kernels and wait cohorts")."""
from __future__ import annotations

from dataclasses import dataclass

from .l2model import LoadCounts, miss_figures


def counted_per_cta(kernel) -> bool:
    """Whether the replay counts a kernel's loads per CTA (for WaitCohorts): a synchronous
    loop (stages = 1), whose every iteration waits for its own loads, so what they wait for
    DRAM is on the CTA's path; a pipelined kernel issues them iterations early."""
    return kernel.pipeline.stages == 1 and any(
        it.kind == "loop" for it in kernel.program(kernel.representatives[0]))


COLD_WAIT = 0.5   # a CTA waits on a tensor when its first sampled load of it waited at least
                  # half a tile fetch (a miss or a line in flight counts ~1, a hit 0)


def waits_on(counts: LoadCounts) -> bool:
    """Whether a CTA waits on a tensor: its first sampled load of it waited COLD_WAIT of a
    tile fetch or more, or its loads of it did on average (a first load that hit by chance,
    one re-read in many the L2's residency curve lets hit, does not make a CTA whose every
    other load of the tensor misses one that does not wait on it)."""
    return counts.first() >= COLD_WAIT or counts.wait >= COLD_WAIT * counts.loads


@dataclass(frozen=True)
class WaitCohorts:
    """A kernel's CTAs before its last partial wave grouped by which tensors' loads they wait
    for DRAM on (their first sampled load of the tensor waited COLD_WAIT of a tile fetch or
    more: a miss or a hit on a line still in flight, l2model.LoadCounts.first; the first,
    because the replay places a CTA's later loads by its segments' mean rates, so a CTA a
    little faster than its group drifts ahead there, while exact mode's shared lines hold the
    group together); of: cta → cohort index (1, 2, ...; CTAs not in it keep the kernel's
    figures, cohort 0); miss: each cohort's miss figures, its own CTAs' counts."""

    of: dict
    miss: tuple
    waits: tuple = ()    # per cohort, the tensors its CTAs wait on (() for none)
    keys: tuple = ()     # per cohort, its key in a WaitPoints (default: its index)

    def key(self, index: int):
        """The WaitPoints key of cohort `index` (0: the kernel's other CTAs)."""
        return self.keys[index - 1] if index and self.keys else index

    def by_wave(self, slots: int, waves: int) -> "WaitCohorts":
        """The same cohorts, their CTAs of the first `waves` launch waves (of `slots` CTAs,
        in launch order) split by wave: cohort (c, w), WaitPoints key (c, w); the CTAs of
        later waves keep cohort c."""
        miss, waits = list(self.miss), list(self.waits)
        keys = list(range(1, len(miss) + 1))
        index, of = {}, {}
        for cta, c in self.of.items():
            w = cta // slots
            if w >= waves:
                of[cta] = c
                continue
            ix = index.get((c, w))
            if ix is None:
                ix = index[c, w] = len(miss) + 1
                miss.append(self.miss[c - 1])
                waits.append(self.waits[c - 1])
                keys.append((c, w))
            of[cta] = ix
        return WaitCohorts(of, tuple(miss), tuple(waits), tuple(keys))


def wait_cohorts(cta_loads: dict, tensors, body_miss: dict):
    """WaitCohorts of a kernel's per-CTA sampled loads (KernelCounts.cta_loads; None when
    they are not counted or every CTA waits alike). A tensor with no sampled load in a
    cohort takes the kernel's figures."""
    if not cta_loads:
        return None
    waits = {cta: {t for t, c in loads.items() if c.loads and waits_on(c)}
             for cta, loads in cta_loads.items()}
    # a tensor tells CTAs apart only where some CTAs that load it wait and others do not
    # (a CTA's own tiles, read first by it, are waited on by every CTA whose loads of them
    # were sampled)
    split = set()
    for t in {t for loads in cta_loads.values() for t in loads}:
        w = {t in waits[cta] for cta, loads in cta_loads.items() if t in loads}
        if len(w) == 2:
            split.add(t)
    keys = {cta: tuple(sorted(w & split)) for cta, w in waits.items()}
    distinct = sorted(set(keys.values()))
    if len(distinct) < 2:
        return None
    index = {key: i + 1 for i, key in enumerate(distinct)}
    sums = [dict() for _ in distinct]
    for cta, loads in cta_loads.items():
        acc = sums[index[keys[cta]] - 1]
        for t, c in loads.items():
            acc.setdefault(t, LoadCounts()).add(c)
    return WaitCohorts({cta: index[key] for cta, key in keys.items()},
                       tuple(miss_figures(acc, tensors, lambda t: body_miss[t])
                             for acc in sums), tuple(distinct))
