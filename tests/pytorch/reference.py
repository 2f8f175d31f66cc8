#!/usr/bin/env python3
"""Reference values from PyTorch for kiln's cross-checks.

For every case below this writes, under tests/testdata/pytorch/:
  CASE.inputs.safetensors    a value for every input and param of CASE.kir
  CASE.expected.safetensors  every output of the graph and grad/PARAM
The graphs themselves are the hand-written CASE.kir files beside them;
tests/pytorch_test.go runs them through kiln and compares.

Run it where PyTorch is installed (Debian: apt-get install python3-torch):
  /usr/bin/python3 tests/pytorch/reference.py
Everything is float64 (int64 labels), seeded, so the files are reproducible.
"""
import json
import math
import os
import struct

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(__file__), "..", "testdata", "pytorch")
DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.int64: "I64", torch.int32: "I32", torch.bool: "BOOL"}


def save(path, tensors):
    """Writes a safetensors file: header length, JSON header, raw data."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        data = t.numpy().tobytes()  # little-endian on the machines we run on
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def uniform(g, *shape, lo=-1.0, hi=1.0):
    return (lo + (hi - lo) * torch.rand(*shape, generator=g, dtype=torch.float64))


@case
def core_mlp(g):
    """matmul (batched, broadcast), add, tanh, sigmoid, softmax, log_softmax,
    transpose, reshape, sum, mean, mse_loss, softmax_cross_entropy."""
    x = uniform(g, 2, 4, 3)
    y = torch.randint(0, 5, (8,), generator=g)
    t = uniform(g, 5)
    w1 = uniform(g, 3, 6).requires_grad_()
    b1 = uniform(g, 6).requires_grad_()
    w2 = uniform(g, 6, 5).requires_grad_()
    h = torch.tanh(torch.matmul(x, w1) + b1)            # [2,4,6]
    z = torch.matmul(torch.sigmoid(h), w2)               # [2,4,5]
    logits = z.reshape(8, 5)
    ce = F.cross_entropy(logits, y)
    p = torch.softmax(logits, dim=-1)
    ls = torch.log_softmax(z.transpose(0, 1), dim=0)     # [4,2,5]
    m = F.mse_loss(p.mean(dim=0), t)
    loss = ce + m + ls.sum(dim=(0, 2)).mean() * 0.01
    return {"x": x, "y": y, "t": t}, {"w1": w1, "b1": b1, "w2": w2}, {"loss": loss, "p": p}


@case
def elementwise_zoo(g):
    """The elementwise math and activations: abs clip pow maximum minimum
    where greater sin cos erf log1p expm1 rsqrt square reciprocal log2 log10
    mod floor_div softplus elu leaky_relu gelu (both forms) silu."""
    r = uniform(g, 3, 4)
    a = uniform(g, 3, 4).requires_grad_()
    b = uniform(g, 4, lo=0.5, hi=1.5).requires_grad_()
    c = uniform(g, 3, 1).requires_grad_()
    t1 = torch.abs(a) * torch.clamp(c, min=-0.5, max=0.5)
    t2 = torch.pow(b, a) + torch.pow(a, 2.0) + torch.pow(b, 0.5)
    t3 = torch.maximum(a, c) - torch.minimum(a, b * 0.3)
    t4 = torch.where(a > 0, torch.sin(a), torch.cos(c))
    t5 = (torch.erf(a) + torch.log1p(torch.abs(a)) + torch.expm1(c) + torch.rsqrt(b) + torch.square(a)
          + torch.reciprocal(b) + torch.log2(b) + torch.log10(b))
    t6 = (F.softplus(a, beta=2.0, threshold=1.5) + F.elu(a, alpha=0.7) + F.leaky_relu(a, 0.05)
          + F.gelu(a) + F.gelu(a, approximate="tanh") + F.silu(a))
    t7 = torch.remainder(a, b) + torch.floor_divide(a.detach(), b.detach())
    y = t1 + t2 + t3 + t4 + t5 + t6 + t7
    loss = (y * r).sum()
    return {"r": r}, {"a": a, "b": b, "c": c}, {"loss": loss, "y": y}


@case
def losses_mix(g):
    """Every loss and reduction: mse (sum, none), l1, huber, bce, bce_with_logits,
    nll after log_softmax, cross-entropy with labels and with probabilities
    (gradient to the target too), and prelu."""
    t = uniform(g, 4, 3)
    w = uniform(g, 4, 3)
    y = torch.randint(0, 3, (4,), generator=g)
    x = uniform(g, 4, 3).requires_grad_()
    q = uniform(g, 4, 3).requires_grad_()
    slope = uniform(g, 3).requires_grad_()
    st = torch.sigmoid(t)
    px = F.prelu(x, slope)
    loss = (F.mse_loss(px, t, reduction="sum") + F.l1_loss(x, t) + F.huber_loss(x, t, delta=0.5)
            + F.binary_cross_entropy_with_logits(x, st) + F.binary_cross_entropy(torch.sigmoid(x), st)
            + F.nll_loss(F.log_softmax(x, dim=1), y) + F.cross_entropy(x, y)
            + F.cross_entropy(x, torch.softmax(q, dim=1)) + (F.mse_loss(x, t, reduction="none") * w).sum())
    return {"t": t, "w": w, "y": y}, {"x": x, "q": q, "slope": slope}, {"loss": loss}


@case
def reduce_move(g):
    """Reductions and data movement: amax amin prod logsumexp var std, cat
    stack slice pad gather index_select embedding flip squeeze unsqueeze
    scatter_add index_add."""
    gidx = torch.randint(0, 4, (2, 3, 2), generator=g)
    iidx = torch.tensor([2, 0, 2, 1])
    eidx = torch.tensor([[1, 5], [5, 0]])
    sidx = torch.tensor([[0, 2, 1, 2], [1, 1, 0, 2]])
    x = uniform(g, 2, 3, 4).requires_grad_()
    table = uniform(g, 6, 3).requires_grad_()
    terms = [
        torch.amax(x, dim=(0, 2)),
        torch.amin(x, dim=1, keepdim=True),
        torch.prod(x, dim=2),
        torch.logsumexp(x, dim=(1, 2)),
        torch.var(x, dim=1, unbiased=True),
        torch.std(x, dim=(0, 2), unbiased=False),
        torch.cat([x, x * 2], dim=1)[:, 1::2, :],
        torch.stack([x, torch.flip(x, dims=[2])], dim=0),
        F.pad(x, (1, 2, -1, 0), value=0.5),
        torch.gather(x, 2, gidx),
        torch.index_select(x, 1, iidx),
        F.embedding(eidx, table),
        x[:, :1, :].squeeze(1).unsqueeze(0),
        torch.zeros(3, 4, dtype=torch.float64).scatter_add(0, sidx, x[0, :2, :]),
        torch.zeros(2, 3, 4, dtype=torch.float64).index_add(1, iidx[:2], x[:, :2, :]),
    ]
    loss = sum(((t * t).sum() * (k + 1)) for k, t in enumerate(terms))
    return {"gidx": gidx, "iidx": iidx, "eidx": eidx, "sidx": sidx}, {"x": x, "table": table}, {"loss": loss}


def b_splines(x, grid_min, grid_max, grid_size, order):
    """efficient-kan's KANLinear.b_splines on a fixed uniform grid."""
    h = (grid_max - grid_min) / grid_size
    grid = torch.arange(-order, grid_size + order + 1, dtype=x.dtype) * h + grid_min
    x = x.unsqueeze(-1)
    bases = ((x >= grid[:-1]) & (x < grid[1:])).to(x.dtype)
    for k in range(1, order + 1):
        bases = ((x - grid[: -(k + 1)]) / (grid[k:-1] - grid[: -(k + 1)]) * bases[..., :-1]
                 + (grid[k + 1:] - x) / (grid[k + 1:] - grid[1:(-k)]) * bases[..., 1:])
    return bases


def logic_gate(a, b, logits):
    """difflogic's bin_op_s: the 16 relaxed gates weighted by softmax(logits)."""
    p = torch.softmax(logits, dim=-1)
    ab = a * b
    ops = [torch.zeros_like(ab), ab, a - ab, a + 0 * b, b - ab + 0 * a, b + 0 * a, a + b - 2 * ab, a + b - ab,
           1 - (a + b - ab), 1 - (a + b - 2 * ab), 1 - b + 0 * a, 1 - b + ab, 1 - a + 0 * b, 1 - a + ab, 1 - ab,
           torch.ones_like(ab)]
    return sum(p[:, i] * op for i, op in enumerate(ops))


@case
def kan_logic(g):
    """A KAN layer (bspline basis of order 3 and 4 times coefficients, plus a
    silu base weight) and a layer of logic gates."""
    x = uniform(g, 3, 2, lo=-0.95, hi=0.95).requires_grad_()
    coef = uniform(g, 2, 8).requires_grad_()
    coef4 = uniform(g, 2, 10).requires_grad_()
    base = uniform(g, 2).requires_grad_()
    pa = uniform(g, 3, 4).requires_grad_()
    pb = uniform(g, 4).requires_grad_()
    logits = uniform(g, 4, 16, lo=-2, hi=2).requires_grad_()
    kan = (b_splines(x, -1.0, 1.0, 5, 3) * coef).sum(-1) + (b_splines(x, -1.0, 1.0, 6, 4) * coef4).sum(-1) + F.silu(x) * base
    gates = logic_gate(torch.sigmoid(pa), torch.sigmoid(pb), logits)
    loss = (kan * kan).sum() + (gates * gates).sum()
    return {}, {"x": x, "coef": coef, "coef4": coef4, "base": base, "pa": pa, "pb": pb, "logits": logits}, {"loss": loss, "kan": kan, "gates": gates}


@case
def cnn(g):
    """A small CNN: conv2d (stride, padding, dilation, groups, bias),
    batch_norm in training mode, relu, max_pool2d with padding, avg_pool2d
    without counting padding, conv1d, layer_norm, log_softmax and nll."""
    x = uniform(g, 2, 4, 7, 7)
    y = torch.randint(0, 3, (2,), generator=g)
    w1 = uniform(g, 6, 2, 3, 3).requires_grad_()
    b1 = uniform(g, 6).requires_grad_()
    bnw = uniform(g, 6, lo=0.5, hi=1.5).requires_grad_()
    bnb = uniform(g, 6).requires_grad_()
    w2 = uniform(g, 5, 6, 2).requires_grad_()
    lnw = uniform(g, 5, lo=0.5, hi=1.5).requires_grad_()
    lnb = uniform(g, 5).requires_grad_()
    wo = uniform(g, 5, 3).requires_grad_()
    h = F.conv2d(x, w1, b1, stride=2, padding=1, dilation=1, groups=2)       # [2,6,4,4]
    h = F.batch_norm(h, None, None, bnw, bnb, training=True, eps=1e-5)
    h = torch.relu(h)
    h = F.max_pool2d(h, kernel_size=2, stride=1, padding=1)                   # [2,6,5,5]
    h = F.avg_pool2d(h, kernel_size=3, stride=2, padding=1, count_include_pad=False)  # [2,6,3,3]
    h = h.reshape(2, 6, 9)
    h = F.conv1d(h, w2, None, stride=2, dilation=3)                           # [2,5,3]
    h = h.transpose(1, 2)                                                     # [2,3,5]
    h = F.layer_norm(h, (5,), lnw, lnb, eps=1e-5)
    z = torch.matmul(h, wo).mean(dim=1)                                       # [2,3]
    loss = F.nll_loss(F.log_softmax(z, dim=1), y)
    return {"x": x, "y": y}, {"w1": w1, "b1": b1, "bnw": bnw, "bnb": bnb, "w2": w2, "lnw": lnw, "lnb": lnb, "wo": wo}, {"loss": loss, "z": z}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, fn in CASES.items():
        g = torch.Generator().manual_seed(1234)
        inputs, params, outputs = fn(g)
        loss = next(iter(outputs.values()))
        grads = torch.autograd.grad(loss, list(params.values()))
        save(os.path.join(OUT, name + ".inputs.safetensors"), {**inputs, **params})
        expected = dict(outputs)
        expected.update({"grad/" + k: v for k, v in zip(params, grads)})
        save(os.path.join(OUT, name + ".expected.safetensors"), expected)
        print(name, "loss", float(loss))


if __name__ == "__main__":
    main()
