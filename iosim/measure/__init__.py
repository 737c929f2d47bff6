"""Measurements on a real GPU: CUDA-event timing (timing.py), torch SDPA back ends
(torch_sdpa.py) and Nsight Compute byte counters (ncu.py). GPU libraries are imported lazily:
this package imports on a machine without a GPU."""
