#!/usr/bin/env python3
"""The MLP of bench/mlp784.kir in PyTorch, for bench/compare_pytorch.sh.

MLP 784-512-512-10 with ReLU, cross-entropy (mean), batch 128, f32, plain
SGD (lr 0.01, no momentum): one training step is forward, backward and the
update, on random inputs with labels in range. For each thread count it
runs WARMUP untimed steps and STEPS timed ones and prints one line

    threads N median_ms M min_ms A max_ms B

Usage: python3 bench/pytorch_mlp.py [--steps 50] [--warmup 10] [--threads 1,2]
"""
import argparse
import statistics
import sys
import time

try:
    import torch
except ImportError:
    sys.exit("pytorch_mlp.py: PyTorch is not installed for %s "
             "(apt-get install python3-torch, or pip install torch)" % sys.executable)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()

    torch.manual_seed(1)
    x = torch.randn(args.batch, 784)
    y = torch.randint(0, 10, (args.batch,))
    for n in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(n)
        model = torch.nn.Sequential(
            torch.nn.Linear(784, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loss_fn = torch.nn.CrossEntropyLoss()

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()

        for _ in range(args.warmup):
            step()
        times = []
        for _ in range(args.steps):
            t = time.perf_counter()
            step()
            times.append(time.perf_counter() - t)
        print("threads %d median_ms %.3f min_ms %.3f max_ms %.3f" % (
            torch.get_num_threads(), 1e3 * statistics.median(times),
            1e3 * min(times), 1e3 * max(times)))


if __name__ == "__main__":
    main()
