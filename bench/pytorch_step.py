#!/usr/bin/env python3
"""The benchmark models of bench/ in PyTorch, for bench/compare_pytorch.sh.

--model mlp784 (bench/mlp784.kir): MLP 784-512-512-10 with ReLU, batch 128.
--model cnn28 (bench/cnn28.kir): conv2d 3x3 (padding 1) to 32 channels,
ReLU, 2x2 max pool, conv2d 3x3 to 64, ReLU, 2x2 max pool, linear to 10,
on 64 images of 1x28x28.
Both: cross-entropy (mean), f32, plain SGD (lr 0.01, no momentum); one
training step is forward, backward and the update, on random inputs with
labels in range. It runs WARMUP untimed
steps and STEPS timed ones with THREADS PyTorch threads and BLAS_THREADS
BLAS threads and prints one line

    threads N blas_threads M median_ms T min_ms A max_ms B

torch.set_num_threads sets PyTorch's own (OpenMP) threads but not those of
a pthreads OpenBLAS (Debian's libopenblas0-pthread), which fixes its thread
count when it is loaded, one per CPU unless OPENBLAS_NUM_THREADS says
otherwise: a run with torch.set_num_threads(1) alone still multiplies on
every core. So the script sets OPENBLAS_NUM_THREADS to BLAS_THREADS (by
default THREADS) and OMP_NUM_THREADS to THREADS before it imports torch,
and takes one configuration per process.

With --products (mlp784 only) it times instead only the eight matrix
products such a step calls (torch.mm, the BLAS's gemm: three forward, two for each of the
last two layers' gradients, one for the first layer's weight gradient), a
floor for PyTorch's step on these threads.

Usage: python3 bench/pytorch_step.py [--model mlp784] [--steps 50] [--warmup 10] [--threads 1] [--blas-threads N] [--products]
"""
import argparse
import os
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp784", choices=["mlp784", "cnn28"])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=0, help="default: 128 (mlp784), 64 (cnn28)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--blas-threads", type=int, default=0)
    ap.add_argument("--products", action="store_true")
    args = ap.parse_args()
    if args.blas_threads == 0:
        args.blas_threads = args.threads
    if args.batch == 0:
        args.batch = 128 if args.model == "mlp784" else 64
    if args.products and args.model != "mlp784":
        sys.exit("pytorch_step.py: --products times the MLP's products; use it with --model mlp784")
    for flag, n in (("--threads", args.threads), ("--blas-threads", args.blas_threads)):
        if n < 1:
            sys.exit("pytorch_step.py: %s %d: want 1 or more" % (flag, n))
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    try:
        import torch
    except ImportError:
        sys.exit("pytorch_step.py: PyTorch is not installed for %s "
                 "(apt-get install python3-torch, or pip install torch)" % sys.executable)

    torch.manual_seed(1)
    if args.model == "mlp784":
        x = torch.randn(args.batch, 784)
        model = torch.nn.Sequential(
            torch.nn.Linear(784, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 10))
    else:
        x = torch.randn(args.batch, 1, 28, 28)
        model = torch.nn.Sequential(
            torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(64 * 7 * 7, 10))
    y = torch.randint(0, 10, (args.batch,))
    torch.set_num_threads(args.threads)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    if args.products:
        b = args.batch
        w1, w2, w3 = torch.randn(512, 784), torch.randn(512, 512), torch.randn(10, 512)
        h1, h2, g3 = torch.randn(b, 512), torch.randn(b, 512), torch.randn(b, 10)
        g2, g1 = torch.randn(b, 512), torch.randn(b, 512)

        def step():
            torch.mm(x, w1.t())    # forward
            torch.mm(h1, w2.t())
            torch.mm(h2, w3.t())
            torch.mm(g3.t(), h2)   # layer 3: weight gradient, input gradient
            torch.mm(g3, w3)
            torch.mm(g2.t(), h1)   # layer 2
            torch.mm(g2, w2)
            torch.mm(g1.t(), x)    # layer 1: weight gradient only

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    print("%sthreads %d blas_threads %d median_ms %.3f min_ms %.3f max_ms %.3f" % (
        "products " if args.products else "", torch.get_num_threads(), args.blas_threads, 1e3 * statistics.median(times),
        1e3 * min(times), 1e3 * max(times)))


if __name__ == "__main__":
    main()
