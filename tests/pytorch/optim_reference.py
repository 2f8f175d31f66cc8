#!/usr/bin/env python3
"""Reference training runs of torch.optim for kiln step's cross-checks.

Writes, under tests/testdata/pytorch/optim/:
  mlp.kir                    a 2-layer MLP with tanh and an MSE loss
  mlp.inputs.safetensors     its batch (x, t) and initial params
  CASE.expected.safetensors  for every case below (the learning-rate
                             schedules too, with T = STEPS): the params after STEPS
                             training steps on that batch and "loss", the
                             STEPS losses, each before its update; the
                             metadata "args" holds kiln step's optimizer
                             flags for the same run
cmd/kiln/optim_pytorch_test.go runs kiln step on each case and compares.

Run it where PyTorch is installed (Debian: apt-get install python3-torch):
  /usr/bin/python3 tests/pytorch/optim_reference.py
Everything is float64 and seeded, so the files are reproducible.
"""
import json
import math
import os
import struct

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(__file__), "..", "testdata", "pytorch", "optim")
STEPS = 6

MODEL = """# A 2-layer MLP with tanh and an MSE loss, as tests/pytorch/optim_reference.py
# computes it.
graph mlp
input %x: f64[8,3]
input %t: f64[8,2]
param %w1: f64[3,5]
param %b1: f64[5]
param %w2: f64[5,2]
param %b2: f64[2]
%xw = matmul %x, %w1
%hb = add %xw, %b1
%h = tanh %hb
%hw = matmul %h, %w2
%y = add %hw, %b2
%loss = mse_loss %y, %t
output %loss
"""


def save(path, tensors, metadata=None):
    """Writes a safetensors file: header length, JSON header, raw data."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        assert t.dtype == torch.float64
        data = t.numpy().tobytes()  # little-endian on the machines we run on
        header[name] = {"dtype": "F64", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def forward(x, p):
    h = torch.tanh(x @ p["w1"] + p["b1"])
    return F.mse_loss(h @ p["w2"] + p["b2"], t_)


# Each case: kiln step's flags, and the torch.optim optimizer of the same
# run (CLIP, CLIP_NORM: the gradient clipping before each step).
O = torch.optim
CASES = {
    "sgd": ("-optimizer sgd -lr 0.1", lambda ps: O.SGD(ps, lr=0.1)),
    "sgd_wd": ("-optimizer sgd -lr 0.1 -weight-decay 0.05", lambda ps: O.SGD(ps, lr=0.1, weight_decay=0.05)),
    "sgd_momentum": ("-optimizer sgd -lr 0.1 -momentum 0.9", lambda ps: O.SGD(ps, lr=0.1, momentum=0.9)),
    "sgd_dampening_wd": ("-optimizer sgd -lr 0.1 -momentum 0.8 -dampening 0.3 -weight-decay 0.02",
                         lambda ps: O.SGD(ps, lr=0.1, momentum=0.8, dampening=0.3, weight_decay=0.02)),
    "sgd_nesterov": ("-optimizer sgd -lr 0.1 -momentum 0.9 -nesterov", lambda ps: O.SGD(ps, lr=0.1, momentum=0.9, nesterov=True)),
    "sgd_nesterov_wd": ("-optimizer sgd -lr 0.1 -momentum 0.7 -nesterov -weight-decay 0.05",
                        lambda ps: O.SGD(ps, lr=0.1, momentum=0.7, nesterov=True, weight_decay=0.05)),
    "adam": ("-optimizer adam -lr 0.05", lambda ps: O.Adam(ps, lr=0.05, foreach=False)),
    "adam_wd": ("-optimizer adam -lr 0.05 -weight-decay 0.1", lambda ps: O.Adam(ps, lr=0.05, weight_decay=0.1, foreach=False)),
    "adam_amsgrad": ("-optimizer adam -lr 0.05 -amsgrad -beta1 0.8 -beta2 0.9",
                     lambda ps: O.Adam(ps, lr=0.05, betas=(0.8, 0.9), amsgrad=True, foreach=False)),
    "adam_amsgrad_wd": ("-optimizer adam -lr 0.05 -amsgrad -weight-decay 0.1 -eps 1e-6",
                        lambda ps: O.Adam(ps, lr=0.05, amsgrad=True, weight_decay=0.1, eps=1e-6, foreach=False)),
    "adam_clip": ("-optimizer adam -lr 0.05 -clip-grad 0.05", lambda ps: O.Adam(ps, lr=0.05, foreach=False)),
    "adamw": ("-optimizer adamw -lr 0.05", lambda ps: O.AdamW(ps, lr=0.05, foreach=False)),
    "adamw_no_wd": ("-optimizer adamw -lr 0.05 -weight-decay 0", lambda ps: O.AdamW(ps, lr=0.05, weight_decay=0, foreach=False)),
    "adamw_wd": ("-optimizer adamw -lr 0.05 -weight-decay 0.5", lambda ps: O.AdamW(ps, lr=0.05, weight_decay=0.5, foreach=False)),
    "adamw_amsgrad": ("-optimizer adamw -lr 0.05 -weight-decay 0.5 -amsgrad -beta2 0.9",
                      lambda ps: O.AdamW(ps, lr=0.05, weight_decay=0.5, amsgrad=True, betas=(0.9, 0.9), foreach=False)),
    "rmsprop": ("-optimizer rmsprop -lr 0.01", lambda ps: O.RMSprop(ps, lr=0.01, foreach=False)),
    "rmsprop_wd": ("-optimizer rmsprop -lr 0.01 -weight-decay 0.1 -alpha 0.9",
                   lambda ps: O.RMSprop(ps, lr=0.01, weight_decay=0.1, alpha=0.9, foreach=False)),
    "rmsprop_centered_momentum": ("-optimizer rmsprop -lr 0.01 -centered -momentum 0.5 -eps 1e-6",
                                  lambda ps: O.RMSprop(ps, lr=0.01, centered=True, momentum=0.5, eps=1e-6, foreach=False)),
    # Global-norm clipping: the norm exceeds the bound at some steps
    # (asserted below), or at none ("_loose").
    "sgd_clip_norm": ("-optimizer sgd -lr 0.1 -momentum 0.9 -weight-decay 0.05 -clip-norm 0.5",
                      lambda ps: O.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.05)),
    "sgd_clip_norm_loose": ("-optimizer sgd -lr 0.1 -clip-norm 10", lambda ps: O.SGD(ps, lr=0.1)),
    "adam_clip_norm": ("-optimizer adam -lr 0.05 -clip-norm 0.3", lambda ps: O.Adam(ps, lr=0.05, foreach=False)),
    "adam_clip_norm_loose": ("-optimizer adam -lr 0.05 -clip-norm 5", lambda ps: O.Adam(ps, lr=0.05, foreach=False)),
    "adamw_clip_grad_norm": ("-optimizer adamw -lr 0.05 -weight-decay 0.1 -clip-grad 0.2 -clip-norm 0.3",
                             lambda ps: O.AdamW(ps, lr=0.05, weight_decay=0.1, foreach=False)),
}
# Frozen params (-freeze / -train): no gradient, left out of the optimizer.
CASES["adamw_freeze_w1"] = ("-optimizer adamw -lr 0.05 -weight-decay 0.1 -freeze ^w1$",
                            lambda ps: O.AdamW(ps, lr=0.05, weight_decay=0.1, foreach=False))
CASES["sgd_train_layer2_clip_norm"] = ("-optimizer sgd -lr 0.1 -momentum 0.9 -train 2$ -clip-norm 0.3",
                                       lambda ps: O.SGD(ps, lr=0.1, momentum=0.9))
FROZEN = {"adamw_freeze_w1": {"w1"}, "sgd_train_layer2_clip_norm": {"w1", "b1"}}
CLIP = {"adam_clip": 0.05, "adamw_clip_grad_norm": 0.2}
# torch.nn.utils.clip_grad_norm_ after any clip_grad_value_, before each step.
CLIP_NORM = {"sgd_clip_norm": 0.5, "sgd_clip_norm_loose": 10, "adam_clip_norm": 0.3,
             "adam_clip_norm_loose": 5, "adamw_clip_grad_norm": 0.3, "sgd_train_layer2_clip_norm": 0.3}


def schedule(kind, W, T=STEPS, S=1, gamma=1.0):
    """λ(t) of kiln's -lr-schedule kind with -warmup W: for cosine and linear
    the functions of transformers' get_cosine_schedule_with_warmup and
    get_linear_schedule_with_warmup; for step, torch's StepLR after the
    warmup."""
    def lam(t):
        if t < W:
            return float(t) / float(max(1, W))
        if kind == "cosine":
            progress = float(t - W) / float(max(1, T - W))
            return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))
        if kind == "linear":
            return max(0.0, float(T - t) / float(max(1, T - W)))
        if kind == "step":
            return gamma ** ((t - W) // S)
        return 1.0
    return lam


# Runs with a learning-rate schedule (torch.optim.lr_scheduler.LambdaLR).
SCHEDULED = {
    "adamw_cosine_warmup": ("-optimizer adamw -lr 0.05 -weight-decay 0.1 -lr-schedule cosine -warmup 2",
                            lambda ps: O.AdamW(ps, lr=0.05, weight_decay=0.1, foreach=False), schedule("cosine", 2)),
    "sgd_cosine": ("-optimizer sgd -lr 0.1 -momentum 0.9 -lr-schedule cosine",
                   lambda ps: O.SGD(ps, lr=0.1, momentum=0.9), schedule("cosine", 0)),
    "adam_linear_warmup": ("-optimizer adam -lr 0.05 -lr-schedule linear -warmup 2",
                           lambda ps: O.Adam(ps, lr=0.05, foreach=False), schedule("linear", 2)),
    "sgd_step_warmup": ("-optimizer sgd -lr 0.2 -lr-schedule step -warmup 1 -lr-step-size 2 -lr-gamma 0.5",
                        lambda ps: O.SGD(ps, lr=0.2), schedule("step", 1, S=2, gamma=0.5)),
    "rmsprop_constant_warmup": ("-optimizer rmsprop -lr 0.01 -lr-schedule constant -warmup 3",
                                lambda ps: O.RMSprop(ps, lr=0.01, foreach=False), schedule("constant", 3)),
}


def uniform(g, *shape):
    return -1 + 2 * torch.rand(*shape, generator=g, dtype=torch.float64)


def main():
    global t_
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "mlp.kir"), "w") as f:
        f.write(MODEL)
    g = torch.Generator().manual_seed(15)
    x, t_ = uniform(g, 8, 3), uniform(g, 8, 2)
    init = {"w1": uniform(g, 3, 5), "b1": uniform(g, 5) * 0.5, "w2": uniform(g, 5, 2), "b2": uniform(g, 2) * 0.5}
    save(os.path.join(OUT, "mlp.inputs.safetensors"), {"x": x, "t": t_, **init})
    runs = {name: (args, make, None) for name, (args, make) in CASES.items()}
    runs.update(SCHEDULED)
    for name, (args, make, lam) in runs.items():
        frozen = FROZEN.get(name, set())
        p = {k: v.clone().requires_grad_(k not in frozen) for k, v in init.items()}
        trained = [v for k, v in p.items() if k not in frozen]
        opt = make(trained)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lam) if lam else None
        losses, norms = [], []
        for _ in range(STEPS):
            opt.zero_grad()
            loss = forward(x, p)
            loss.backward()
            if name in CLIP:
                torch.nn.utils.clip_grad_value_(trained, CLIP[name])
            if name in CLIP_NORM:
                norms.append(torch.nn.utils.clip_grad_norm_(trained, CLIP_NORM[name]).item())
            opt.step()
            if sched:
                sched.step()
            losses.append(loss.item())
        assert losses[-1] < losses[0], (name, losses)
        if name in CLIP_NORM:
            clipped = any(n > CLIP_NORM[name] for n in norms)
            assert clipped == (not name.endswith("_loose")), (name, norms)
        for k in frozen:
            assert torch.equal(p[k], init[k]), (name, k)
        save(os.path.join(OUT, name + ".expected.safetensors"),
             {**p, "loss": torch.tensor(losses, dtype=torch.float64)}, {"args": args, "steps": str(STEPS)})


if __name__ == "__main__":
    main()
