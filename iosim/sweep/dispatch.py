"""Many points: serially in this process, or on Dask in chunks, the costliest first, each to
whichever worker is free; a local cluster's workers forked from this process (Linux) with the
pre-sweep heap frozen for the garbage collector."""
from __future__ import annotations

import logging
from contextlib import contextmanager

from ..errors import IosimError
from .point import evaluate, evaluate_chunk

# A point takes 3 ms to 1 s (fast simulator; the 200-point benchmark grid: seq 256 fa2 ~3 ms,
# seq 4096 standard ~0.8 s). Sent one by one, each point would cost a few messages between the
# client, the scheduler and a worker, and on a busy machine each message waits for its process
# to be scheduled; sent as a few fixed batches, one slow batch sets the wall time. So points go
# in chunks, largest first by an estimate of their cost, and the scheduler hands the next
# chunk to whichever worker has a free slot (Dask's task queuing, in priority order): the
# longest-processing-time-first rule with dynamic dispatch (Graham 1969: within 4/3 of the
# optimal makespan when the costs are known; here they are estimated, and a wrong estimate
# costs balance, never a result). Chunk sizes follow guided self-scheduling (Polychronopoulos
# & Kuck 1987): a chunk takes at most 1/(CHUNKS_PER_SLOT x slots) of the points still to deal
# and of their estimated cost, so the expensive points go one by one and the last chunks are
# single cheap points, which bounds the idle tail. CHUNKS_PER_SLOT sets the granularity: 4
# chunks per worker slot at the start, fewer messages than one task per point.
CHUNKS_PER_SLOT = 4


def chunks(tasks: list, costs: list, slots: int) -> list:
    """tasks (any items) dealt into chunks, most expensive first (by `costs`, stable: equal
    costs keep grid order, so a chunk holds neighbouring points as serial runs them)."""
    if not tasks:
        return []
    share = CHUNKS_PER_SLOT * max(1, slots)
    order = sorted(range(len(tasks)), key=lambda k: -costs[k])
    left_n, left_cost = len(tasks), float(sum(costs))
    out, cur, cur_cost = [], [], 0.0
    for k in order:
        if cur and (len(cur) >= -(-left_n // share) or cur_cost + costs[k] > left_cost / share):
            out.append(cur)
            left_n -= len(cur)
            left_cost -= cur_cost
            cur, cur_cost = [], 0.0
        cur.append(tasks[k])
        cur_cost += costs[k]
    out.append(cur)
    return out


# A local cluster's workers run CPU-bound points and nothing else: no 10 ms stack sampling
# (the profiler behind the dashboard's profile page), no work stealing (queued tasks already go
# to whichever worker is free), and slower health monitors, whose wake-ups otherwise take CPU
# from the points on a small machine (Dask's configuration keys; an existing cluster keeps its
# own).
LOCAL_CLUSTER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.scheduler.work-stealing": False,
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.admin.tick.interval": "200ms",
}


def start_method() -> str:
    """How a local cluster starts its worker processes. On Linux, fork: a worker is a copy of
    this process with numpy, pydantic, Dask and iosim already imported, where spawn starts a
    fresh interpreter that imports them again. Measured for 2 workers (start, a first task
    each, close; 2-core machine at load average ~7): spawn 3.4 s wall and 1.4 CPU-s in the
    workers, fork 0.4 s and 0.1 CPU-s. The fork happens in Dask's event-loop thread while the
    calling thread waits; a worker runs only Dask's worker code and iosim's pure-Python points
    (never CUDA, which a forked child could not use). Elsewhere (macOS, where fork is unsafe with the
    system's frameworks; Windows, which has no fork), spawn, Dask's default."""
    import multiprocessing
    import sys
    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


@contextmanager
def heap_frozen():
    """Python's full (generation 2) garbage collections skip the objects that existed before
    the sweep (the imported modules and whatever the caller holds: not garbage the sweep
    makes), serially and in every worker: gc.freeze moves them to a permanent generation and
    forked workers inherit it (the fork recipe of the gc module's documentation, which also
    keeps collections from writing to, and so copying, pages shared with the parent). Without
    it, each full collection walks every object the process holds: a worker forked from a
    process with Dask and pandas imported inherits ~140,000, and on 24 points of the benchmark
    grid (seq 1024-2048) its 5 full collections took 0.44-0.55 of 2.7-3.3 CPU-seconds, 0.10-0.12
    frozen (gc callbacks, one worker, the same points serially: 0.47 of 2.84). Left alone when
    the caller froze objects itself."""
    import gc
    mine = gc.get_freeze_count() == 0
    if mine:
        gc.freeze()
    try:
        yield mine
    finally:
        if mine:
            gc.unfreeze()


def run_serial(tasks, on_result):
    for i, point, gpu in tasks:
        on_result(i, evaluate(point, gpu))


def local_cluster(workers: int, freeze: bool):
    import gc

    import dask
    from dask.distributed import LocalCluster
    config = {**LOCAL_CLUSTER_CONFIG, "distributed.worker.multiprocessing-method": start_method()}
    if freeze:
        gc.freeze()   # what was imported since the sweep began (Dask), before the fork
    with dask.config.set(config):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                            dashboard_address=":0", silence_logs=logging.CRITICAL)


def run_dask(tasks, costs, on_result, workers: int, scheduler: str | None, freeze: bool = False):
    try:
        from dask.distributed import Client, as_completed
    except ImportError as exc:
        raise IosimError(f"sweeping on Dask needs dask[distributed]: {exc}") from None
    cluster = None
    try:
        if scheduler:
            try:
                client = Client(scheduler, timeout="15s")
            except (OSError, TimeoutError) as exc:
                raise IosimError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") \
                    from None
        else:
            cluster = local_cluster(workers, freeze)
            client = Client(cluster)
        with client:
            slots = sum(client.nthreads().values()) or workers or 1
            dealt = chunks(tasks, costs, slots)
            futures = [client.submit(evaluate_chunk, chunk, pure=False, priority=len(dealt) - r)
                       for r, chunk in enumerate(dealt)]
            for _fut, results in as_completed(futures, with_results=True):
                for i, record in results:
                    on_result(i, record)
    finally:
        if cluster is not None:
            cluster.close()
