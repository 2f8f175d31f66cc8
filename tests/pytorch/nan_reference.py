#!/usr/bin/env python3
"""NaN and ±Inf reference values from PyTorch for every kiln op.

Each case below applies one kiln op to inputs that mix NaN, +Inf and -Inf
with ordinary values. This writes, under tests/testdata/pytorch/:
  nan.kirs           every case's graph, one after the other ("graph CASE"
                    starts each); the op's result is %y, and where
                    gradients are checked the loss is sum(y * r)
  nan.safetensors   CASE/in/NAME: every input and param (float64, or i64
                    for indices); CASE/f32/y and CASE/f64/y: the result
                    computed in float32 and in float64; CASE/f32/grad/NAME
                    and CASE/f64/grad/NAME: the gradient of every param
                    (all stored as float64)
tests/nan_test.go runs each graph through kiln in f32 and f64 and compares:
NaN where PyTorch gives NaN, the same infinities, finite values close.

Run it where PyTorch is installed (Debian: apt-get install python3-torch):
  /usr/bin/python3 tests/pytorch/nan_reference.py
Every ordinary value is a short binary fraction, exact in float32, so the
f32 and f64 graphs read the same inputs.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from reference import OUT, b_splines, logic_gate, save  # noqa: E402

nan, inf = math.nan, math.inf

# The special values and a few ordinary ones, in every order the binary
# cases need.
S = [nan, inf, -inf, -1.5, 0.0, 0.5, 2.0]
# U: 21 values, so that the 8-wide SIMD loops see NaN and ±Inf both in
# their blocks and in their tails.
U = [nan, inf, -inf, -1.5, 0.0, 0.5, 2.0, 1.25, -0.75, nan, 3.0, -inf, 0.25, inf, -2.5, 1.0, nan, -0.5, 0.75, -inf, inf]
A2 = [a for a in S for _ in S]  # 49 pairs (a, b): every special against every value
B2 = [b for _ in S for b in S]
# X: rows for reductions and normalizations, each with another mix.
X = [
    [1.0, 2.0, 3.0, -1.0, 0.5],
    [1.0, nan, 3.0, -1.0, 0.5],
    [1.0, inf, 3.0, -1.0, 0.5],
    [1.0, -inf, 3.0, -1.0, 0.5],
    [inf, -inf, 3.0, -1.0, 0.5],
    [-inf, -inf, -inf, -inf, -inf],
    [inf, inf, 1.0, 2.0, 3.0],
    [nan, inf, -inf, 2.0, nan],
]
# R: ordinary weights, the loss is sum(y * r).
R = [0.5, -1.0, 1.5, 0.25, -0.75, 2.0, 1.0, -0.5]


def t(values, shape=None):
    x = torch.tensor(values, dtype=torch.float64)
    return x.reshape(shape) if shape is not None else x


def idx(values, shape=None):
    x = torch.tensor(values, dtype=torch.int64)
    return x.reshape(shape) if shape is not None else x


def weights(shape):
    n = 1
    for d in shape:
        n *= d
    return t([R[i % len(R)] for i in range(n)], list(shape))


def img(n, c, h, w, specials):
    """An [n,c,h,w] image of ordinary values with specials at (flat index, value)."""
    k = n * c * h * w
    vals = [((i * 7) % 11 - 5) * 0.25 for i in range(k)]
    for at, v in specials:
        vals[at] = v
    return t(vals, [n, c, h, w])


CASES = []
KIR_DT = {torch.float64: "f32", torch.int64: "i64", torch.bool: "bool"}


def case(name, line, args, fn, grad=True):
    """One case: line computes %y from the args (name: tensor; float tensors
    are params when grad is set, integer ones inputs); fn computes y in
    PyTorch from the args in order."""
    CASES.append((name, line, args, fn, grad))


def kir_type(x):
    return "%s[%s]" % (KIR_DT[x.dtype], ",".join(str(d) for d in x.shape))


def run(name, line, args, fn, grad):
    """Returns the kir text and the tensors of one case."""
    out = {}
    for k, v in args.items():
        out["%s/in/%s" % (name, k)] = v
    lines = ["graph " + name]
    for k, v in args.items():
        kind = "param" if grad and v.dtype == torch.float64 else "input"
        lines.append("%s %%%s: %s" % (kind, k, kir_type(v)))
    y64 = None
    for dt, tag in ((torch.float32, "f32"), (torch.float64, "f64")):
        xs = [v.to(dt).detach().requires_grad_(grad) if v.dtype == torch.float64 else v for v in args.values()]
        y = fn(*xs)
        if y.dtype in (torch.float32, torch.float64):
            out["%s/%s/y" % (name, tag)] = y.detach().to(torch.float64)
        else:
            out["%s/%s/y" % (name, tag)] = y.detach().to(torch.float64)
        if grad:
            r = weights(y.shape).to(dt)
            params = [(k, x) for k, x in zip(args, xs) if x.dtype == dt]
            gs = torch.autograd.grad(y, [x for _, x in params], grad_outputs=r, allow_unused=True)
            for (k, _), g, x in zip(params, gs, [x for _, x in params]):
                if g is None:
                    g = torch.zeros_like(x)
                out["%s/%s/grad/%s" % (name, tag, k)] = g.detach().to(torch.float64)
        y64 = y
    if grad:
        lines.append("input %%r: f32[%s]" % ",".join(str(d) for d in y64.shape))
        out["%s/in/r" % name] = weights(y64.shape)
    lines.append(line)
    if grad:
        lines += ["%yr = mul %y, %r", "%loss = sum %yr", "output %loss, %y"]
    else:
        lines.append("output %y")
    return "\n".join(lines) + "\n", out


# Elementwise unary.
u = t(U)
for op, fn in [
    ("neg", torch.neg), ("exp", torch.exp), ("log", torch.log), ("sqrt", torch.sqrt), ("tanh", torch.tanh),
    ("sigmoid", torch.sigmoid), ("relu", torch.relu), ("abs", torch.abs), ("sign", torch.sign),
    ("rsqrt", torch.rsqrt), ("square", torch.square), ("reciprocal", torch.reciprocal), ("log2", torch.log2),
    ("log10", torch.log10), ("log1p", torch.log1p), ("expm1", torch.expm1), ("sin", torch.sin),
    ("cos", torch.cos), ("erf", torch.erf), ("floor", torch.floor), ("ceil", torch.ceil), ("round", torch.round),
    ("silu", F.silu), ("softsign", F.softsign),
]:
    case(op, "%%y = %s %%x" % op, {"x": u}, fn)
case("clip", "%y = clip %x {min=-1.0, max=1.0}", {"x": u}, lambda x: torch.clamp(x, -1.0, 1.0))
case("clip_min", "%y = clip %x {min=0.25}", {"x": u}, lambda x: torch.clamp(x, min=0.25))
case("clip_max", "%y = clip %x {max=0.25}", {"x": u}, lambda x: torch.clamp(x, max=0.25))
case("pow_exponent", "%y = pow %x {exponent=2.0}", {"x": u}, lambda x: torch.pow(x, 2.0))
case("pow_half", "%y = pow %x {exponent=0.5}", {"x": u}, lambda x: torch.pow(x, 0.5))
case("leaky_relu", "%y = leaky_relu %x {alpha=0.125}", {"x": u}, lambda x: F.leaky_relu(x, 0.125))
case("elu", "%y = elu %x {alpha=0.75}", {"x": u}, lambda x: F.elu(x, 0.75))
case("gelu", "%y = gelu %x", {"x": u}, F.gelu)
case("gelu_tanh", "%y = gelu %x {approximate=\"tanh\"}", {"x": u}, lambda x: F.gelu(x, approximate="tanh"))
case("softplus", "%y = softplus %x {beta=2.0, threshold=3.0}", {"x": u}, lambda x: F.softplus(x, 2.0, 3.0))
case("prelu", "%y = prelu %x, %w", {"x": t(U, [3, 7]).T.contiguous(), "w": t([0.25, -0.5, 0.125])},
     lambda x, w: F.prelu(x, w))
# The gradient ops, forward only: dy ordinary, x special, and the other way.
dyx = {"dy": t(B2), "x": t(A2)}
case("relu_grad", "%y = relu_grad %dy, %x", dyx, lambda dy, x: torch.ops.aten.threshold_backward(dy, x, 0), grad=False)
case("gelu_grad", "%y = gelu_grad %dy, %x", dyx, lambda dy, x: torch.ops.aten.gelu_backward(dy, x), grad=False)
case("gelu_grad_tanh", "%y = gelu_grad %dy, %x {approximate=\"tanh\"}", dyx,
     lambda dy, x: torch.ops.aten.gelu_backward(dy, x, approximate="tanh"), grad=False)

# Elementwise binary: every special against every value.
ab = {"a": t(A2), "b": t(B2)}
for op, fn in [
    ("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div), ("pow", torch.pow),
    ("maximum", torch.maximum), ("minimum", torch.minimum), ("mod", torch.remainder),
]:
    case(op, "%%y = %s %%a, %%b" % op, ab, fn)
case("floor_div", "%y = floor_div %a, %b", ab, torch.floor_divide, grad=False)
for op, fn in [
    ("greater", torch.gt), ("greater_equal", torch.ge), ("less", torch.lt), ("less_equal", torch.le),
    ("equal", torch.eq), ("not_equal", torch.ne),
]:
    case(op, "%%y = %s %%a, %%b" % op, ab, fn, grad=False)
cond = torch.tensor([i % 3 == 0 for i in range(49)])
case("where", "%y = where %c, %a, %b", {"c": cond, "a": t(A2), "b": t(B2)}, torch.where)

# Linear algebra and movement.
ma = t([1.0, nan, 0.0, 2.0, inf, 0.0, -1.0, 0.5, 0.25, 0.0, -inf, 1.0], [4, 3])
mb = t([0.0, 1.0, 2.0, -1.0, 0.5, 1.0, 0.0, 0.0, 0.0, 0.0, -2.0, 0.25, inf, 1.0, 0.5], [3, 5])
case("matmul", "%y = matmul %a, %b", {"a": ma, "b": mb}, torch.matmul)
x35 = t(U[:15], [3, 5])
case("transpose", "%y = transpose %x", {"x": x35}, lambda x: x.T)
case("reshape", "%y = reshape %x {shape=[5,3]}", {"x": x35}, lambda x: x.reshape(5, 3))
case("broadcast_to", "%y = broadcast_to %x {shape=[2,3,5]}", {"x": x35}, lambda x: x.expand(2, 3, 5))
case("squeeze", "%y = squeeze %x", {"x": t(U[:15], [3, 1, 5])}, lambda x: x.squeeze(1))
case("unsqueeze", "%y = unsqueeze %x {axes=[1]}", {"x": x35}, lambda x: x.unsqueeze(1))
case("concat", "%y = concat %x, %z {axis=1}", {"x": x35, "z": t(U[6:12], [3, 2])}, lambda x, z: torch.cat([x, z], 1))
case("stack", "%y = stack %x, %z {axis=1}", {"x": x35, "z": t(U[3:18], [3, 5])}, lambda x, z: torch.stack([x, z], 1))
case("slice", "%y = slice %x {axis=1, start=1, step=2}", {"x": x35}, lambda x: x[:, 1::2])
case("pad", "%y = pad %x {pads=[1, 2, 0, 1], value=-1.5}", {"x": x35}, lambda x: F.pad(x, (1, 2, 0, 1), value=-1.5))
case("flip", "%y = flip %x {axes=[1]}", {"x": x35}, lambda x: torch.flip(x, [1]))
case("gather", "%y = gather %x, %i {axis=1}", {"x": x35, "i": idx([0, 4, 1, 1, 2, 3, 4, 0, 2], [3, 3])},
     lambda x, i: torch.gather(x, 1, i))
case("index_select", "%y = index_select %x, %i {axis=1}", {"x": x35, "i": idx([4, 1, 1, 0])},
     lambda x, i: torch.index_select(x, 1, i))
case("embedding", "%y = embedding %x, %i", {"x": x35, "i": idx([2, 0, 2, 1], [2, 2])}, lambda x, i: F.embedding(i, x))
case("scatter_add", "%y = scatter_add %x, %i, %s {axis=1}",
     {"x": x35, "i": idx([0, 0, 1, 4, 2, 2], [3, 2]), "s": t(U[5:11], [3, 2])},
     lambda x, i, s: x.scatter_add(1, i, s))
case("index_add", "%y = index_add %x, %i, %s {axis=1}", {"x": x35, "i": idx([3, 0, 3]), "s": t(U[7:16], [3, 3])},
     lambda x, i, s: x.index_add(1, i, s))

# Reductions and normalizations, over the rows of X and over its columns.
xr = t(X)
for axis in (1, 0):
    sfx = "" if axis == 1 else "_axis0"
    for op, fn in [
        ("sum", lambda x, a: x.sum(a)), ("mean", lambda x, a: x.mean(a)), ("max", lambda x, a: torch.amax(x, a)),
        ("min", lambda x, a: torch.amin(x, a)), ("prod", lambda x, a: x.prod(a)),
        ("logsumexp", lambda x, a: torch.logsumexp(x, a)), ("var", lambda x, a: torch.var(x, a)),
        ("std", lambda x, a: torch.std(x, a)),
    ]:
        case(op + sfx, "%%y = %s %%x {axes=[%d]}" % (op, axis), {"x": xr}, (lambda f, a: lambda x: f(x, a))(fn, axis))
    for op, fn in [("argmax", torch.argmax), ("argmin", torch.argmin)]:
        case(op + sfx, "%%y = %s %%x {axes=[%d]}" % (op, axis), {"x": xr}, (lambda f, a: lambda x: f(x, a))(fn, axis),
             grad=False)
    case("softmax" + sfx, "%%y = softmax %%x {axis=%d}" % axis, {"x": xr}, (lambda a: lambda x: torch.softmax(x, a))(axis))
    case("log_softmax" + sfx, "%%y = log_softmax %%x {axis=%d}" % axis, {"x": xr},
         (lambda a: lambda x: torch.log_softmax(x, a))(axis))


def prod_exclusive(x):
    """Each element replaced by the product of the other elements of its row."""
    cols = [torch.cat([x[:, :j], x[:, j + 1:]], 1).prod(1) for j in range(x.shape[1])]
    return torch.stack(cols, 1)


def prod_exclusive_grad(dy, x):
    """out[j] = sum over i != j of dy[i] * prod of x[k], k not in {i, j}, per row."""
    n = x.shape[1]
    cols = []
    for j in range(n):
        acc = torch.zeros_like(x[:, 0])
        for i in range(n):
            if i != j:
                keep = [k for k in range(n) if k not in (i, j)]
                acc = acc + dy[:, i] * x[:, keep].prod(1)
        cols.append(acc)
    return torch.stack(cols, 1)


case("prod_exclusive", "%y = prod_exclusive %x {axes=[1]}", {"x": xr}, prod_exclusive)
case("prod_exclusive_grad", "%y = prod_exclusive_grad %dy, %x {axes=[1]}", {"dy": weights([8, 5]), "x": xr},
     prod_exclusive_grad, grad=False)

# Losses: logits with specials in some rows; targets ordinary.
labels = idx([0, 1, 2, 4, 3, 0, 2, 1])
probs = torch.softmax(t([[(i * 3 + j) % 5 * 0.5 for j in range(5)] for i in range(8)]), 1)
case("softmax_cross_entropy", "%y = softmax_cross_entropy %x, %l {reduction=\"none\"}", {"x": xr, "l": labels},
     lambda x, l: F.cross_entropy(x, l, reduction="none"))
case("softmax_cross_entropy_mean", "%y = softmax_cross_entropy %x, %l", {"x": xr, "l": labels},
     lambda x, l: F.cross_entropy(x, l))
case("softmax_cross_entropy_probs", "%y = softmax_cross_entropy %x, %p {reduction=\"none\"}",
     {"x": xr, "p": probs}, lambda x, p: F.cross_entropy(x, p, reduction="none"))
case("nll_loss", "%y = nll_loss %x, %l {reduction=\"none\"}", {"x": xr, "l": labels},
     lambda x, l: F.nll_loss(x, l, reduction="none"))
case("mse_loss", "%y = mse_loss %a, %b {reduction=\"none\"}", ab, lambda a, b: F.mse_loss(a, b, reduction="none"))
case("mse_loss_mean", "%y = mse_loss %a, %b", ab, F.mse_loss)
case("l1_loss", "%y = l1_loss %a, %b {reduction=\"none\"}", ab, lambda a, b: F.l1_loss(a, b, reduction="none"))
case("huber_loss", "%y = huber_loss %a, %b {delta=0.75, reduction=\"none\"}", ab,
     lambda a, b: F.huber_loss(a, b, reduction="none", delta=0.75))
# bce_loss has no case: PyTorch refuses an input outside [0, 1], NaN
# included, and kiln refuses NaN in the input or the target with an error.
# bce_with_logits: any logit against targets in [0, 1] or NaN.
tg = [nan, 0.0, 0.25, 1.0, 0.5, nan, 0.75]
case("bce_with_logits", "%y = bce_with_logits %a, %b {reduction=\"none\"}", {"a": t(A2), "b": t([tg[i % 7] for i in range(49)])},
     lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="none"))

# Neural-network layers.
x1 = img(1, 2, 1, 9, [(1, nan), (5, inf), (12, -inf)]).reshape(1, 2, 9)
w1 = t([0.5, 0.0, -1.0, 0.25, 1.0, 0.0, 0.0, 0.5, -0.5, 1.0, 0.25, 0.0], [2, 2, 3])
case("conv1d", "%y = conv1d %x, %w {padding=[1]}", {"x": x1, "w": w1}, lambda x, w: F.conv1d(x, w, padding=1))
x2 = img(1, 2, 5, 5, [(6, nan), (18, inf), (32, -inf)])
w2 = t([(i % 5 - 2) * 0.25 for i in range(36)], [2, 2, 3, 3])
bias2 = t([0.5, -0.25])
case("conv2d", "%y = conv2d %x, %w, %b {padding=[1, 1]}", {"x": x2, "w": w2, "b": bias2},
     lambda x, w, b: F.conv2d(x, w, b, padding=1))
dyc = img(1, 2, 5, 5, [(3, nan), (20, inf), (41, -inf)])
case("conv_input_grad", "%y = conv_input_grad %dy, %w {input_shape=[1, 2, 5, 5], padding=[1, 1]}",
     {"dy": dyc, "w": w2}, lambda dy, w: torch.nn.grad.conv2d_input([1, 2, 5, 5], w, dy, padding=1))
case("conv_weight_grad", "%y = conv_weight_grad %x, %dy {weight_shape=[2, 2, 3, 3], padding=[1, 1]}",
     {"x": x2, "dy": img(1, 2, 5, 5, [])}, lambda x, dy: torch.nn.grad.conv2d_weight(x, [2, 2, 3, 3], dy, padding=1))
xp = img(1, 2, 6, 6, [(0, nan), (8, inf), (15, -inf), (21, nan), (22, inf), (44, -inf), (45, -inf), (50, -inf),
                      (51, -inf), (66, inf), (70, nan)])
case("max_pool2d", "%y = max_pool2d %x {kernel=[2, 2]}", {"x": xp}, lambda x: F.max_pool2d(x, 2))
case("max_pool2d_pad", "%y = max_pool2d %x {kernel=[3, 3], stride=[2, 2], padding=[1, 1]}", {"x": xp},
     lambda x: F.max_pool2d(x, 3, 2, 1))
case("avg_pool2d", "%y = avg_pool2d %x {kernel=[2, 2]}", {"x": xp}, lambda x: F.avg_pool2d(x, 2))
case("avg_pool2d_pad", "%y = avg_pool2d %x {kernel=[3, 3], stride=[2, 2], padding=[1, 1], count_include_pad=false}",
     {"x": xp}, lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False))


def max_pool_grad(dy, x):
    x = x.detach().requires_grad_()
    y = F.max_pool2d(x, 2)
    return torch.autograd.grad(y, x, dy)[0]


case("max_pool2d_grad", "%y = max_pool2d_grad %dy, %x {kernel=[2, 2]}", {"dy": img(1, 2, 3, 3, []), "x": xp},
     max_pool_grad, grad=False)
case("max_pool2d_select", "%y = max_pool2d_select %g, %x {kernel=[2, 2]}",
     {"g": img(1, 2, 6, 6, [(3, nan), (30, inf)]), "x": xp},
     lambda g, x: g.flatten(2).gather(2, F.max_pool2d(x, 2, return_indices=True)[1].flatten(2)).reshape(1, 2, 3, 3),
     grad=False)
case("avg_pool2d_grad", "%y = avg_pool2d_grad %dy {kernel=[2, 2], input_shape=[1, 2, 6, 6]}",
     {"dy": img(1, 2, 3, 3, [(1, nan), (9, inf), (13, -inf)])},
     lambda dy: torch.ops.aten.avg_pool2d_backward(dy, torch.zeros(1, 2, 6, 6, dtype=dy.dtype), [2, 2], [2, 2],
                                                   [0, 0], False, True, None), grad=False)
case("layer_norm", "%y = layer_norm %x, %w, %b", {"x": xr, "w": t([0.5, 1.0, 1.5, -1.0, 2.0]),
                                                   "b": t([0.0, 0.25, -0.5, 1.0, 0.125])},
     lambda x, w, b: F.layer_norm(x, (5,), w, b))
xb = img(2, 3, 2, 2, [(1, nan), (6, inf), (17, -inf), (18, inf)])
case("batch_norm", "%y = batch_norm %x, %w, %b", {"x": xb, "w": t([0.5, 1.0, 1.5]), "b": t([0.0, 0.25, -0.5])},
     lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True))
case("dropout_p0", "%y = dropout %x {p=0.0}", {"x": u}, lambda x: F.dropout(x, 0.0))

# Kolmogorov-Arnold and logic-gate layers.
xk = t([nan, inf, -inf, -0.75, 0.0, 0.5, 2.0, -1.5], [4, 2])
case("bspline", "%y = bspline %x", {"x": xk}, lambda x: b_splines(x, -1.0, 1.0, 5, 3))
# a and b are probabilities (NaN among them); an infinite logit makes its
# gate NaN, through softmax.
ga = t([nan, 0.25, 0.5, 1.0, 0.125, 0.0, 0.75, 0.375], [2, 4])
gb = t([0.5, nan, 0.25, 1.0])
glog = t([[((g * 5 + i) % 7 - 3) * 0.5 for i in range(16)] for g in range(4)])
glog[2, 3] = inf
case("logic_gate", "%y = logic_gate %a, %b, %l", {"a": ga, "b": gb, "l": glog}, logic_gate)


# Array ops (ir/ops_array.go).
case("cast_f32", "%y = cast %x {dtype=\"f32\"}", {"x": u}, lambda x: x.to(torch.float32), grad=False)
case("cast_bool", "%y = cast %x {dtype=\"bool\"}", {"x": u}, lambda x: x.bool(), grad=False)
case("cumsum", "%y = cumsum %x {axis=1}", {"x": x35}, lambda x: torch.cumsum(x, 1))
case("cumsum_reverse_exclusive", "%y = cumsum %x {axis=1, reverse=true, exclusive=true}", {"x": x35},
     lambda x: torch.cat([torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1])[:, 1:], torch.zeros_like(x[:, :1])], 1))
case("trilu", "%y = trilu %x {k=1}", {"x": x35}, lambda x: torch.triu(x, 1))
case("trilu_lower", "%y = trilu %x {upper=false, k=-1}", {"x": x35}, lambda x: torch.tril(x, -1))

def main():
    os.makedirs(OUT, exist_ok=True)
    texts, tensors = [], {}
    for name, line, args, fn, grad in CASES:
        text, out = run(name, line, args, fn, grad)
        texts.append(text)
        tensors.update(out)
    header = ("# Generated by tests/pytorch/nan_reference.py; do not edit by hand.\n"
              "# One graph per case; nan.safetensors holds the inputs and PyTorch's results.\n\n")
    with open(os.path.join(OUT, "nan.kirs"), "w") as f:
        f.write(header + "\n".join(texts))
    save(os.path.join(OUT, "nan.safetensors"), tensors)
    print(len(CASES), "cases")


if __name__ == "__main__":
    main()
