#!/usr/bin/env python3
"""The benchmark models of bench/ in PyTorch, for bench/compare_pytorch.sh.

--model mlp784 (bench/mlp784.kir): MLP 784-512-512-10 with ReLU, batch 128.
--model cnn28 (bench/cnn28.kir): conv2d 3x3 (padding 1) to 32 channels,
ReLU, 2x2 max pool, conv2d 3x3 to 64, ReLU, 2x2 max pool, linear to 10,
on 64 images of 1x28x28.
Both: cross-entropy (mean), f32, plain SGD (lr 0.01, no momentum).
--model softmax (bench/softmax_step.kir): loss = sum(softmax(x*w) * t) over
the last axis of [4096,1024] f32, the param w updated by plain SGD (lr 0.01).
--model gpt (bench/gpt.kir, frontends.Builder.Transformer): token and
learned position embeddings (vocabulary 256, width 256) of 16 sequences of
128 tokens; four pre-norm blocks, each x + attention(layer_norm(x)) then
h + fc2(gelu(fc1(layer_norm(h)))), with layer_norm eps 1e-5, attention of
8 heads through separate q, k, v and o Linear maps 256->256 with biases,
scores q.k^T/sqrt(32), softmax, exact gelu and an MLP 256->1024->256; a
final layer_norm, a Linear head to the 256 logits of every position, and
the mean cross-entropy against random targets; Adam (lr 1e-3, betas 0.9
and 0.999, eps 1e-8). --attention full (default: every position sees
every position, as the builder's attention without a mask) or causal (each
position sees itself and the ones before it); bench/gpt.kir's header names
the one it was generated with.
One training step is forward, backward and the update, on random inputs
with labels in range. It runs WARMUP untimed
steps and STEPS timed ones with THREADS PyTorch threads and BLAS_THREADS
BLAS threads and prints one line

    threads N blas_threads M median_ms T min_ms A max_ms B blas PATH

PATH is the BLAS library the process loaded (from /proc/self/maps, links
resolved; "unknown" where that cannot be read). Debian's reference BLAS
(.../blas/libblas.so.3, no OpenBLAS installed) is about 20x slower than
OpenBLAS and no fair baseline: the script warns on stderr when it finds it.

torch.set_num_threads sets PyTorch's own (OpenMP) threads but not those of
a pthreads OpenBLAS (Debian's libopenblas0-pthread), which fixes its thread
count when it is loaded, one per CPU unless OPENBLAS_NUM_THREADS says
otherwise: a run with torch.set_num_threads(1) alone still multiplies on
every core. So the script sets OPENBLAS_NUM_THREADS to BLAS_THREADS (by
default THREADS) and OMP_NUM_THREADS to THREADS before it imports torch,
and takes one configuration per process.

glibc's malloc serves a large tensor (above 128 KiB at first) with a fresh
mmap and gives it back when the tensor is freed, so every step faults its
large tensors' pages in again. On a virtual machine whose page faults are
slow (a Firecracker guest with free-page reporting: 50 us a page, 200 ms
for a 16 MiB tensor) that cost dwarfs the arithmetic. --malloc keep (the
default) sets glibc's mmap threshold to its maximum (32 MiB) and its trim
threshold to the largest size (never trim) through mallopt before torch
is loaded, so freed
memory is reused as a caching allocator would; --malloc default leaves
glibc as it is.

With --products (mlp784 only) it times instead only the eight matrix
products such a step calls (torch.mm, the BLAS's gemm: three forward, two for each of the
last two layers' gradients, one for the first layer's weight gradient), a
floor for PyTorch's step on these threads.

Usage: python3 bench/pytorch_step.py [--model mlp784|cnn28|softmax|gpt] [--steps 50] [--warmup 10]
           [--threads 1] [--blas-threads N] [--products] [--attention full|causal]
           [--malloc keep|default]
"""
import argparse
import os
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp784", choices=["mlp784", "cnn28", "softmax", "gpt"])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=0, help="default: 128 (mlp784), 64 (cnn28), 4096 (softmax), 16 (gpt)")
    ap.add_argument("--attention", default="full", choices=["full", "causal"], help="gpt: the attention mask")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--blas-threads", type=int, default=0)
    ap.add_argument("--products", action="store_true")
    ap.add_argument("--malloc", default="keep", choices=["keep", "default"],
                    help="keep: glibc keeps freed memory for reuse (see above)")
    args = ap.parse_args()
    if args.blas_threads == 0:
        args.blas_threads = args.threads
    if args.batch == 0:
        args.batch = {"mlp784": 128, "cnn28": 64, "softmax": 4096, "gpt": 16}[args.model]
    if args.products and args.model != "mlp784":
        sys.exit("pytorch_step.py: --products times the MLP's products; use it with --model mlp784")
    for flag, n in (("--threads", args.threads), ("--blas-threads", args.blas_threads)):
        if n < 1:
            sys.exit("pytorch_step.py: %s %d: want 1 or more" % (flag, n))
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.malloc == "keep":
        keep_freed_memory()
    try:
        import torch
    except ImportError:
        sys.exit("pytorch_step.py: PyTorch is not installed for %s "
                 "(apt-get install python3-torch, or pip install torch)" % sys.executable)

    torch.manual_seed(1)
    torch.set_num_threads(args.threads)
    if args.model in ("softmax", "gpt"):
        step = make_step(torch, args)
    elif args.model == "mlp784":
        x = torch.randn(args.batch, 784)
        model = torch.nn.Sequential(
            torch.nn.Linear(784, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 10))
    elif args.model == "cnn28":
        x = torch.randn(args.batch, 1, 28, 28)
        model = torch.nn.Sequential(
            torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(64 * 7 * 7, 10))
    if args.model in ("mlp784", "cnn28"):
        y = torch.randint(0, 10, (args.batch,))
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

    blas = blas_library()
    if "/blas/" in blas:
        print("pytorch_step.py: warning: PyTorch runs on the reference BLAS %s, about 20x slower "
              "than OpenBLAS (apt-get install libopenblas0-pthread)" % blas, file=sys.stderr)
    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    print("%sthreads %d blas_threads %d median_ms %.3f min_ms %.3f max_ms %.3f blas %s" % (
        "products " if args.products else "", torch.get_num_threads(), args.blas_threads, 1e3 * statistics.median(times),
        1e3 * min(times), 1e3 * max(times), blas))


def keep_freed_memory():
    """keep_freed_memory makes glibc's malloc reuse freed large blocks."""
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        ok = libc.mallopt(m_mmap_threshold, 32 << 20) and libc.mallopt(m_trim_threshold, -1)  # -1: SIZE_MAX, never trim
    except (OSError, AttributeError):
        ok = False
    if not ok:
        print("pytorch_step.py: warning: mallopt failed; freed memory goes back to the system", file=sys.stderr)


def blas_library():
    """blas_library returns the path of the BLAS this process loaded."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return "unknown"
    for name in ("libopenblas", "libblas", "libmkl_rt", "libblis"):
        for p in sorted(paths):
            if os.path.basename(p).startswith(name):
                return os.path.realpath(p)
    return "unknown"


def make_step(torch, args):
    """make_step returns the training step of --model softmax or gpt."""
    if args.model == "softmax":
        x = torch.randn(args.batch, 1024)
        t = torch.randn(args.batch, 1024)
        w = torch.nn.Parameter(torch.randn(args.batch, 1024))
        opt = torch.optim.SGD([w], lr=0.01)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = (torch.softmax(x * w, dim=-1) * t).sum()
            loss.backward()
            opt.step()
        return step

    nn = torch.nn
    vocab, seq, width, blocks, heads, hidden = 256, 128, 256, 4, 8, 1024
    causal = args.attention == "causal"

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(width, eps=1e-5)
            self.q, self.k = nn.Linear(width, width), nn.Linear(width, width)
            self.v, self.o = nn.Linear(width, width), nn.Linear(width, width)
            self.ln2 = nn.LayerNorm(width, eps=1e-5)
            self.fc1, self.fc2 = nn.Linear(width, hidden), nn.Linear(hidden, width)
            self.gelu = nn.GELU()  # exact, with erf
            self.scale = 1 / (width // heads) ** 0.5
            if causal:
                self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1))

        def attention(self, x):
            b, n, d = x.shape
            split = lambda h: h.view(b, n, heads, d // heads).transpose(1, 2)  # [B,H,T,dh]
            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
            if causal:
                scores = scores.masked_fill(self.mask, float("-inf"))
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
            return self.o(ctx.transpose(1, 2).reshape(b, n, d))

        def forward(self, x):
            h = x + self.attention(self.ln1(x))
            return h + self.fc2(self.gelu(self.fc1(self.ln2(h))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, width)
            self.pos = nn.Parameter(torch.randn(seq, width) * 0.02)
            self.blocks = nn.Sequential(*[Block() for _ in range(blocks)])
            self.lnf = nn.LayerNorm(width, eps=1e-5)
            self.head = nn.Linear(width, vocab)

        def forward(self, x):
            h = self.lnf(self.blocks(self.tok(x) + self.pos))
            return self.head(h).view(-1, vocab)

    model = GPT()
    x = torch.randint(0, vocab, (args.batch, seq))
    y = torch.randint(0, vocab, (args.batch, seq)).view(-1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return step


if __name__ == "__main__":
    main()
