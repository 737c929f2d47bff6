"""Python's full (generation-2) garbage collections held off while a step allocates many
long-lived objects.

CPython starts a full collection when the survivors of the younger generations pass a
quarter of the objects already in the oldest one (the gc module's thresholds); each walks
every container the process holds. The fast mode's L2 replay keeps tens of thousands of
sampled accesses, walked CTAs and timeline rows alive while it builds them: on standard
attention at N = 65,536 (H100) the process ran 4-5 full collections, 0.23 and 0.30 s of
its 1.6-2.3 CPU-seconds in two runs (gc.callbacks; the younger generations' ~640
collections: 0.07-0.12 s), and they freed nothing (0 objects collected). Inside `full_collections_deferred()` the
younger generations are collected as usual (short-lived cycles are freed), only the full
collections wait until the step is done; the thresholds the caller had are restored. Results
do not depend on it: collection frees unreachable objects only.

(iosim.sweep.dispatch.heap_frozen is the other tool the project uses: gc.freeze, so that
full collections skip what existed before a sweep, for forked workers.)
"""
from __future__ import annotations

import gc
from contextlib import contextmanager

# generation-1 collections between two full ones: 2**30 never comes within one simulation
# (~50 happen in the largest fast-mode run above)
DEFERRED_THRESHOLD = 1 << 30


@contextmanager
def full_collections_deferred():
    """Within the block, no full collection starts on its own (an explicit gc.collect()
    still runs); the previous thresholds come back on exit, exceptions included."""
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1] if len(before) > 1 else 10, DEFERRED_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*before)
