#!/usr/bin/python3
"""Writes the ONNX import fixtures under tests/testdata/onnx/.

Each model is exported by torch.onnx.export at opset 17 in training mode,
without constant folding, with its loss inside the forward, so the first
output is the loss. Beside MODEL.onnx go MODEL.inputs.safetensors (the graph
inputs) and MODEL.expected.safetensors: PyTorch's loss, grad/NAME for every
param (named as the ONNX initializer) and sgd_losses, the losses of SGD
steps (lr 0.1) from the exported weights on the same batch.

Rerun with /usr/bin/python3 tests/onnx/export.py from the repository root;
the output is deterministic (fixed seeds, one thread). CI only reads the
committed files.
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn as nn

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "onnx")
SGD_STEPS = 3
SGD_LR = 0.1

torch.set_num_threads(1)


def write_safetensors(path, tensors):
    """Writes a dict name -> numpy array as safetensors (sorted by name)."""
    dtypes = {np.dtype("float32"): "F32", np.dtype("float64"): "F64",
              np.dtype("int64"): "I64", np.dtype("int32"): "I32"}
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtypes[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, labels):
        h = torch.relu(self.fc1(x))
        return self.loss(self.fc2(h), labels)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.pool2 = nn.AvgPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(8 * 2 * 2, 10)

    def forward(self, x, labels):
        h = self.pool1(torch.relu(self.conv1(x)))
        h = self.pool2(torch.tanh(self.conv2(h)))
        logits = self.fc(self.flatten(h))
        return nn.functional.nll_loss(torch.log_softmax(logits, dim=1), labels)


class Mixed(nn.Module):
    """Ops the MLP and CNN do not reach: training-mode BatchNorm, global
    pooling, a view built from the input's shape, MatMul, Softmax, Log and
    NegativeLogLikelihoodLoss."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1, bias=False)  # BatchNorm cancels a bias
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(p=0.0)
        self.W = nn.Parameter(torch.randn(4, 10) * 0.5)
        self.b = nn.Parameter(torch.zeros(10))

    def forward(self, x, labels):
        h = torch.sigmoid(self.bn(self.conv(x))) * 2 - 1
        g = self.pool(h)
        g = g.view(g.size(0), -1)
        logits = torch.matmul(self.drop(g), self.W) / 2 + self.b
        logits = logits.transpose(0, 1).transpose(0, 1)
        p = torch.softmax(logits, dim=1)
        return nn.functional.nll_loss(torch.log(p), labels)


class Shapes(nn.Module):
    """Shape arithmetic that import folds (Shape, Gather, Unsqueeze, Concat,
    ConstantOfShape), movement ops on graph values and LogSoftmax with
    NegativeLogLikelihoodLoss."""

    def __init__(self):
        super().__init__()
        self.W = nn.Parameter(torch.randn(12, 10) * 0.3)
        self.b = nn.Parameter(torch.zeros(10))

    def forward(self, x, labels):
        n = torch._shape_as_tensor(x)[0]
        y = x.reshape(n, 2, 3).transpose(1, 2)
        y = y.unsqueeze(1).squeeze(1)
        y = torch.cat([y, torch.zeros_like(y) + 0.5], dim=2)
        h = torch.tanh(torch.flatten(y, 1) @ self.W + self.b)
        return nn.functional.nll_loss(torch.log_softmax(h, dim=1) - 0.0, labels)


class Dynamic(nn.Module):
    """Exported with a symbolic batch dim, so x.view(x.size(0), -1) becomes
    Shape, Gather, Unsqueeze, Concat and Reshape; import takes the batch
    size from onnx.Options.Shapes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.fc = nn.Linear(2 * 6 * 6, 10)

    def forward(self, x, labels):
        h = torch.relu(self.conv(x))
        return nn.functional.cross_entropy(self.fc(h.view(h.size(0), -1)), labels)


class MLP64(nn.Module):
    """The MLP in float64: params, inputs, loss and gradients are all double."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 12)
        self.fc2 = nn.Linear(12, 5)

    def forward(self, x, labels):
        return nn.functional.cross_entropy(self.fc2(torch.tanh(self.fc1(x))), labels)


class BasicBlock(nn.Module):
    """A ResNet basic block that halves the resolution: two 3x3 convs with
    training-mode BatchNorm, and a strided 1x1 conv with BatchNorm as the
    shortcut (torchvision's downsample), then a pooled linear head."""

    def __init__(self, cin=4, cout=8):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=2, bias=False), nn.BatchNorm2d(cout))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cout, 10)

    def forward(self, x, labels):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = torch.relu(out + self.downsample(x))
        logits = self.fc(torch.flatten(self.pool(out), 1))
        return nn.functional.cross_entropy(logits, labels)


class DepthwiseSeparable(nn.Module):
    """A MobileNet block: a depthwise 3x3 conv (groups = channels), BatchNorm,
    ReLU6 (exported as Clip with constant min and max), a pointwise 1x1 conv,
    BatchNorm, ReLU6, then a pooled linear head."""

    def __init__(self, cin=4, cout=8):
        super().__init__()
        self.dw = nn.Conv2d(cin, cin, 3, padding=1, groups=cin, bias=False)
        self.bn1 = nn.BatchNorm2d(cin)
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.act = nn.ReLU6()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cout, 10)

    def forward(self, x, labels):
        h = self.act(self.bn1(self.dw(x)))
        h = self.act(self.bn2(self.pw(h)))
        return nn.functional.cross_entropy(self.fc(torch.flatten(self.pool(h), 1)), labels)


class LSTMNet(nn.Module):
    """A two-layer nn.LSTM over batch-first sequences (exported as two LSTM
    nodes between Transposes, the weights re-ordered by Slice and Concat),
    classified from the last step's output."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(5, 6, num_layers=2, batch_first=True)
        self.fc = nn.Linear(6, 4)

    def forward(self, x, labels):
        out, _ = self.lstm(x)
        return nn.functional.cross_entropy(self.fc(out[:, -1]), labels)


class GRUNet(nn.Module):
    """A bidirectional nn.GRU over batch-first sequences (linear_before_reset
    as PyTorch computes it) from a learned initial state expanded over the
    batch, classified from the mean over time."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(5, 6, batch_first=True, bidirectional=True)
        self.h0 = nn.Parameter(torch.randn(2, 1, 6) * 0.1)
        self.fc = nn.Linear(12, 4)

    def forward(self, x, labels):
        out, _ = self.gru(x, self.h0.expand(2, x.size(0), 6).contiguous())
        return nn.functional.cross_entropy(self.fc(out.mean(1)), labels)


class RNNNet(nn.Module):
    """A one-layer nn.RNN with ReLU over batch-first sequences (an RNN node
    with activations [Relu]), classified from the final hidden state."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(5, 6, nonlinearity="relu", batch_first=True)
        self.fc = nn.Linear(6, 4)

    def forward(self, x, labels):
        _, h = self.rnn(x)
        return nn.functional.cross_entropy(self.fc(h[-1]), labels)


class NanoGPT(nn.Module):
    """A nanoGPT-style language model: token and position embeddings, one
    pre-LayerNorm block (causal self-attention masked by a registered tril
    buffer, a GELU MLP, residuals), a final LayerNorm and an lm_head tied to
    the token embedding, with cross-entropy over every position. The sequence
    is shorter than the block size, so the mask is sliced as nanoGPT does."""

    def __init__(self, vocab=16, block=8, n_embd=16, n_head=2):
        super().__init__()
        self.n_head, self.n_embd = n_head, n_embd
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.ln_1 = nn.LayerNorm(n_embd)
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.mlp_proj = nn.Linear(4 * n_embd, n_embd)
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))
        for m in self.modules():  # nanoGPT's initialization
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        C = self.n_embd
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = nn.functional.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.c_proj(y)
        x = x + self.mlp_proj(nn.functional.gelu(self.c_fc(self.ln_2(x))))
        logits = self.lm_head(self.ln_f(x))
        return nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class EncoderLayer(nn.Module):
    """nn.TransformerEncoderLayer (batch_first, post-norm, ReLU) with a
    mean-pooled linear head. Its dropout is 0: exported in training mode, each
    Dropout node has ratio 0 and training_mode true, which import reads as
    the identity, so the losses can match PyTorch's (with p > 0 kiln would
    draw its own masks, never PyTorch's)."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x, labels):
        return nn.functional.cross_entropy(self.fc(self.layer(x).mean(1)), labels)


def fixture(name, model, x, labels, dynamic_axes=None):
    model.train()
    names = [n for n, _ in model.named_parameters()]
    path = os.path.join(OUT, name + ".onnx")
    torch.onnx.export(model, (x, labels), path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False,
                      input_names=["x", "labels"], output_names=["loss"],
                      dynamic_axes=dynamic_axes)
    write_safetensors(os.path.join(OUT, name + ".inputs.safetensors"),
                      {"x": x.numpy(), "labels": labels.numpy()})
    expected = {}
    loss = model(x, labels)
    model.zero_grad()
    loss.backward()
    expected["loss"] = loss.detach().numpy().reshape(())
    for n, p in model.named_parameters():
        expected["grad/" + n] = p.grad.numpy().copy()
    opt = torch.optim.SGD(model.parameters(), lr=SGD_LR)
    losses = []
    for _ in range(SGD_STEPS):
        opt.zero_grad()
        l = model(x, labels)
        l.backward()
        opt.step()
        losses.append(l.item())
    expected["sgd_losses"] = np.array(losses, dtype=expected["loss"].dtype)
    write_safetensors(os.path.join(OUT, name + ".expected.safetensors"), expected)
    print(name, "loss", float(expected["loss"]), "params", names)


class Finetune(nn.Module):
    """A model exported without a loss, for fine-tuning: a body and a head
    over 64 features and 10 classes (the digits data's); kiln appends the
    loss (-loss ce) and freezes the body (-freeze 'body[.]')."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.body(x))


DIGITS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "frontends", "dataset", "digits", "digits.csv.gz")


def finetune():
    """Writes finetune.onnx (batch 32, output "logits", no loss) with its
    inputs and PyTorch's logits. The body is trained on the digits 0 to 4
    only (features standardized over all rows, as kiln train does with its
    training rows); the head is new, so a model that tells all ten digits
    apart needs the head trained on them."""
    import gzip
    with gzip.open(DIGITS, "rt") as f:
        rows = np.array([[float(v) for v in line.split(",")] for line in f if line.strip()])
    x_all, y_all = rows[:, :64], rows[:, 64].astype(np.int64)
    std = x_all.std(axis=0)
    x_all = (x_all - x_all.mean(axis=0)) / np.where(std > 0, std, 1)
    keep = y_all < 5
    xs = torch.tensor(x_all[keep], dtype=torch.float32)
    ys = torch.tensor(y_all[keep])
    torch.manual_seed(5)
    model = Finetune()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(30):
        perm = torch.randperm(len(xs))
        for i in range(0, len(xs) - 31, 32):
            b = perm[i:i + 32]
            opt.zero_grad()
            nn.functional.cross_entropy(model(xs[b]), ys[b]).backward()
            opt.step()
    model.head.reset_parameters()
    x = torch.randn(32, 64)
    model.train()
    torch.onnx.export(model, (x,), os.path.join(OUT, "finetune.onnx"), opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False,
                      input_names=["x"], output_names=["logits"])
    write_safetensors(os.path.join(OUT, "finetune.inputs.safetensors"), {"x": x.numpy()})
    with torch.no_grad():
        write_safetensors(os.path.join(OUT, "finetune.expected.safetensors"),
                          {"logits": model(x).numpy()})
    print("finetune", "params", [n for n, _ in model.named_parameters()])


class BNStats(nn.Module):
    """Training-mode BatchNorm2d and BatchNorm1d (momentum 0.3) over the
    digits' 64 features seen as 1x8x8 images, with the loss inside."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.fc1 = nn.Linear(4 * 8 * 8, 16)
        self.bn2 = nn.BatchNorm1d(16, momentum=0.3)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x, labels):
        h = torch.relu(self.bn1(self.conv(x.view(-1, 1, 8, 8))))
        h = torch.relu(self.bn2(self.fc1(h.flatten(1))))
        return nn.functional.cross_entropy(self.fc2(h), labels)


def bnstats():
    """Writes bnstats.onnx (batch 32) with its inputs and, beside PyTorch's
    loss and sgd_losses (as fixture), running/NAME: each running statistic
    after the SGD steps, which training-mode BatchNorm updates. The running
    statistics start from random values, and PyTorch starts from the values
    the ONNX file holds (tracing the export runs the forward once)."""
    torch.manual_seed(6)
    model = BNStats()
    with torch.no_grad():
        for bn in (model.bn1, model.bn2):
            bn.running_mean.copy_(torch.randn_like(bn.running_mean))
            bn.running_var.copy_(torch.rand_like(bn.running_var) + 0.5)
    x, labels = torch.randn(32, 64), torch.randint(0, 10, (32,))
    model.train()
    path = os.path.join(OUT, "bnstats.onnx")
    torch.onnx.export(model, (x, labels), path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False,
                      input_names=["x", "labels"], output_names=["loss"])
    import onnx
    from onnx import numpy_helper
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name in inits:
                buf.copy_(torch.from_numpy(inits[name].copy()))
    write_safetensors(os.path.join(OUT, "bnstats.inputs.safetensors"),
                      {"x": x.numpy(), "labels": labels.numpy()})
    opt = torch.optim.SGD(model.parameters(), lr=SGD_LR)
    losses = []
    for _ in range(SGD_STEPS):
        opt.zero_grad()
        l = model(x, labels)
        l.backward()
        opt.step()
        losses.append(l.item())
    expected = {"sgd_losses": np.array(losses, dtype=np.float32)}
    for name, buf in model.named_buffers():
        if "running" in name:
            expected["running/" + name] = buf.numpy().copy()
    write_safetensors(os.path.join(OUT, "bnstats.expected.safetensors"), expected)
    print("bnstats", "losses", losses)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    fixture("mlp", MLP(), torch.randn(8, 64), torch.randint(0, 10, (8,)))
    torch.manual_seed(1)
    fixture("cnn", CNN(), torch.randn(4, 1, 8, 8), torch.randint(0, 10, (4,)))
    torch.manual_seed(2)
    fixture("mixed", Mixed(), torch.randn(4, 1, 8, 8), torch.randint(0, 10, (4,)))
    torch.manual_seed(3)
    fixture("shapes", Shapes(), torch.randn(4, 6), torch.randint(0, 10, (4,)))
    torch.manual_seed(4)
    fixture("dynamic", Dynamic(), torch.randn(4, 1, 8, 8), torch.randint(0, 10, (4,)),
            dynamic_axes={"x": {0: "batch"}, "labels": {0: "batch"}})
    torch.manual_seed(5)
    fixture("mlp64", MLP64().double(), torch.randn(6, 16, dtype=torch.float64), torch.randint(0, 5, (6,)))
    torch.manual_seed(6)
    fixture("resnet_block", BasicBlock(), torch.randn(4, 4, 8, 8), torch.randint(0, 10, (4,)))
    torch.manual_seed(7)
    fixture("mobilenet_block", DepthwiseSeparable(), torch.randn(4, 4, 8, 8), torch.randint(0, 10, (4,)))
    torch.manual_seed(8)
    fixture("lstm", LSTMNet(), torch.randn(3, 7, 5), torch.randint(0, 4, (3,)))
    torch.manual_seed(9)
    fixture("gru", GRUNet(), torch.randn(3, 7, 5), torch.randint(0, 4, (3,)))
    torch.manual_seed(12)
    fixture("rnn", RNNNet(), torch.randn(3, 7, 5), torch.randint(0, 4, (3,)))
    torch.manual_seed(10)
    fixture("nanogpt", NanoGPT(), torch.randint(0, 16, (2, 6)), torch.randint(0, 16, (2, 6)))
    torch.manual_seed(11)
    fixture("transformer_encoder", EncoderLayer(), torch.randn(3, 5, 16), torch.randint(0, 4, (3,)))
    finetune()
    bnstats()


if __name__ == "__main__":
    main()
