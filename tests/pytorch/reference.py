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
