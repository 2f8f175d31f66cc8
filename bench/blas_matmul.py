"""Times n×n×n matmuls through NumPy, which calls the system BLAS (OpenBLAS
when Debian's libopenblas0 provides libblas.so.3), and prints one line per
case: dtype n threads GFLOP/s (best of 7). The thread count is set by
bench/compare_blas.sh through OPENBLAS_NUM_THREADS before Python starts."""
import sys
import time

import numpy as np

threads = sys.argv[1]
for dt in (np.float32, np.float64):
    for n in (256, 512, 1024):
        rng = np.random.default_rng(5)
        a = rng.random((n, n)).astype(dt)
        b = rng.random((n, n)).astype(dt)
        a @ b
        best = float("inf")
        for _ in range(7):
            t = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t)
        print(np.dtype(dt).name, n, threads, "%.2f" % (2 * n**3 / best / 1e9))
