#!/usr/bin/python3
"""Writes the ONNX fixtures of the array and normalization ops under
tests/testdata/onnx/, as tests/onnx/export.py does for the models (same
export settings, same files beside each model).

ops_norm: InstanceNorm2d, GroupNorm and LayerNorm (exported as
InstanceNormalization, reshapes around it, and LayerNormalization), a causal
mask from torch.arange (Range, comparisons of i64, Where), torch.triu
(Trilu), torch.cumsum (CumSum) and a cast of a computed value.
ops_einsum: torch.einsum (Einsum) in the forms models use.
ops_convt: ConvTranspose2d and ConvTranspose1d (ConvTranspose) with stride,
padding, output_padding, groups and dilation.
ops_pad: F.pad in modes reflect and replicate (Pad modes reflect, edge).
ops_3d: Conv3d, MaxPool3d, AvgPool3d and ConvTranspose3d.
ops_act: activations and shape ops that import composes (see OpsAct).
ops_resize: F.interpolate in modes nearest, bilinear, bicubic, trilinear (Resize).
ops_loss: cross-entropy and NLL with class weights, ignore_index, [N,C,d].
ops_topk: torch.topk, largest and smallest (TopK).
ops_grid: F.grid_sample at a computed grid (GridSample), every padding mode.

Rerun with /usr/bin/python3 tests/onnx/export_ops.py from the repository
root; the output is deterministic. CI only reads the committed files.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export import fixture  # noqa: E402

torch.set_num_threads(1)


class OpsNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.inorm = nn.InstanceNorm2d(4, affine=True)
        self.gnorm = nn.GroupNorm(2, 4)
        self.lnorm = nn.LayerNorm(8)
        self.fc = nn.Linear(4 * 64, 10)

    def forward(self, x, labels):
        h = self.inorm(self.conv(x))
        h = self.lnorm(torch.tanh(self.gnorm(h)))       # [N,4,8,8]
        s = h.flatten(2)                                 # [N,4,64]
        att = torch.matmul(s, s.transpose(1, 2)) / 8.0  # [N,4,4]
        pos = torch.arange(4)
        att = att.masked_fill(pos[None, :] > pos[:, None], -1e9)
        att = torch.softmax(att, dim=-1) + 0.1 * torch.triu(att.clamp(-5, 5), 1)
        pooled = torch.matmul(att, s)                    # [N,4,64]
        c = torch.cumsum(pooled, dim=-1) * 0.05
        keep = (c > -0.5).to(torch.float32)              # a cast of a computed value
        logits = self.fc((c * keep).flatten(1))
        return nn.functional.cross_entropy(logits, labels)


class OpsEinsum(nn.Module):
    """Einsum in the forms models use: batched matmul, attention scores
    with heads, a contraction over two letters, an outer product, a matrix
    times a vector, a trace-free sum, an ellipsis and an implicit output."""

    def __init__(self):
        super().__init__()
        self.wq = nn.Parameter(torch.randn(6, 2, 4) * 0.3)
        self.wk = nn.Parameter(torch.randn(6, 2, 4) * 0.3)
        self.u = nn.Parameter(torch.randn(5) * 0.5)
        self.fc = nn.Linear(2 * 5 * 5 + 5 + 1, 10)

    def forward(self, x, labels):
        # x [N,5,6]
        q = torch.einsum("nsd,dhe->nhse", x, self.wq)
        k = torch.einsum("nsd,dhe->nhse", x, self.wk)
        att = torch.einsum("nhqe,nhke->nhqk", q, k)           # [N,2,5,5]
        both = torch.einsum("nhqk,nhqk->n", att, att)         # contraction over three letters
        outer = torch.einsum("i,j->ij", self.u, self.u)       # [5,5]
        mv = torch.einsum("nij,j->ni", att.sum(1), self.u)    # [N,5]
        ell = torch.einsum("...ij,jk->...ik", att, outer)     # [N,2,5,5]
        imp = torch.einsum("nsd,nsd", x, x)                   # implicit output: a scalar
        feat = torch.cat([ell.flatten(1), mv, (both * 0.01 + imp * 0.001)[:, None]], 1)
        return nn.functional.cross_entropy(self.fc(feat), labels)


class OpsConvT(nn.Module):
    """ConvTranspose2d with stride, padding, output_padding, groups and
    dilation, and ConvTranspose1d, as decoders and upsamplers use them."""

    def __init__(self):
        super().__init__()
        self.up1 = nn.ConvTranspose2d(2, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.up2 = nn.ConvTranspose2d(4, 3, 2, stride=1, padding=0, dilation=2, bias=False)
        self.up3 = nn.ConvTranspose1d(3, 2, 4, stride=3, padding=1)
        self.fc = nn.Linear(2 * 29, 10)

    def forward(self, x, labels):
        h = torch.tanh(self.up1(x))      # [N,4,8,8]
        h = torch.tanh(self.up2(h))      # [N,3,10,10]
        h = self.up3(h.mean(3))          # [N,2,29]
        return nn.functional.cross_entropy(self.fc(h.flatten(1)), labels)


class OpsPad(nn.Module):
    """Padding modes: reflect and replicate (ONNX Pad modes reflect and
    edge) around convolutions, as image models pad."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 3, 3)
        self.conv2 = nn.Conv2d(3, 2, 3)
        self.fc = nn.Linear(2 * 6 * 7, 10)

    def forward(self, x, labels):
        h = torch.tanh(self.conv1(nn.functional.pad(x, (2, 1, 1, 2), mode="reflect")))  # [N,3,7,8]
        h = self.conv2(nn.functional.pad(h, (0, 1, 1, 0), mode="replicate"))          # [N,2,6,7]
        h = nn.functional.pad(h.flatten(2), (3, 1), mode="reflect")[..., 2:-2]         # 3-D input: one axis
        return nn.functional.cross_entropy(self.fc(h.flatten(1)), labels)


class Ops3d(nn.Module):
    """Conv3d, MaxPool3d, AvgPool3d and ConvTranspose3d (Conv, MaxPool,
    AveragePool and ConvTranspose with 3-D kernels) with stride, padding,
    output_padding, groups and dilation."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv3d(2, 4, (3, 3, 2), stride=(2, 1, 1), padding=(1, 1, 0), groups=2)
        self.pool1 = nn.MaxPool3d(2, stride=(1, 2, 2), padding=1)
        self.conv2 = nn.Conv3d(4, 3, 2, dilation=(2, 1, 1))
        self.pool2 = nn.AvgPool3d((2, 2, 2), stride=1, padding=(1, 0, 1))
        self.up = nn.ConvTranspose3d(3, 2, (3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1),
                                     output_padding=(1, 0, 1), dilation=(1, 2, 1))
        self.fc = nn.Linear(54 + 240, 10)

    def forward(self, x, labels):
        h = self.pool1(torch.tanh(self.conv1(x)))   # x [N,2,5,6,5] -> [N,4,3,6,4] -> [N,4,4,4,3]
        h = self.pool2(torch.tanh(self.conv2(h)))   # [N,3,2,3,2] -> [N,3,3,2,3]
        u = self.up(h)                              # [N,2,6,4,5]
        return nn.functional.cross_entropy(self.fc(torch.cat([h.flatten(1), u.flatten(1)], 1)), labels)


class OpsAct(nn.Module):
    """Activations and shape ops exported as ONNX ops that import composes
    from kiln ops: HardSigmoid, HardSwish, Selu, Celu, Softsign, PRelu (per
    channel and shared), Tile, DepthToSpace, GlobalMaxPool, ReduceL2,
    ReduceL1."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 8, 3, padding=1)
        self.prelu_c = nn.PReLU(8)
        self.prelu_1 = nn.PReLU()
        self.fc = nn.Linear(2 * 8 * 8 + 8 + 4 + 4, 10)

    def forward(self, x, labels):
        h = self.prelu_c(self.conv(x))                                       # [N,8,4,4]
        h = nn.functional.hardswish(h) + nn.functional.hardsigmoid(h) + nn.functional.selu(h)
        h = nn.functional.celu(h, 0.7) + nn.functional.softsign(h) + self.prelu_1(h)
        up = nn.functional.pixel_shuffle(h, 2)                               # [N,2,8,8]
        g = nn.functional.adaptive_max_pool2d(h, 1).flatten(1)               # [N,8]
        rows = torch.norm(x.flatten(2), p=2, dim=2).repeat(1, 2)             # [N,4]
        l1 = torch.norm(h.flatten(2), p=1, dim=2)[:, :4] * 0.1               # [N,4]
        feat = torch.cat([up.flatten(1), g, rows, l1], 1)
        return nn.functional.cross_entropy(self.fc(feat), labels)


class OpsResize(nn.Module):
    """F.interpolate as decoders and detectors use it (Resize): nearest by 2
    and to a size, bilinear with and without align_corners, bicubic, and
    trilinear on a volume."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.fc = nn.Linear(3 * (8 * 10 + 7 * 9 + 6 * 5 + 9 * 11 + 5 * 6) + 2 * 4 * 6 * 6, 10)

    def forward(self, x, labels):
        h = torch.tanh(self.conv(x))                                                    # [N,3,4,5]
        a = nn.functional.interpolate(h, scale_factor=2, mode="nearest")                # [N,3,8,10]
        b = nn.functional.interpolate(h, size=(7, 9), mode="bilinear", align_corners=False)
        c = nn.functional.interpolate(h, size=(6, 5), mode="bilinear", align_corners=True)
        d = nn.functional.interpolate(h, size=(9, 11), mode="bicubic", align_corners=False)
        e = nn.functional.interpolate(h, size=(5, 6), mode="nearest")
        v = nn.functional.interpolate(x[:, :, None], size=(4, 6, 6), mode="trilinear", align_corners=False)
        feat = torch.cat([t.flatten(1) for t in (a, b, c, d, e, v)], 1)
        return nn.functional.cross_entropy(self.fc(feat), labels)


class OpsLoss(nn.Module):
    """Cross-entropy over [N,C,d] scores with class weights and an
    ignore_index that is a class (SoftmaxCrossEntropyLoss with weights), and
    NLL over [N,C] with weights (NegativeLogLikelihoodLoss)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5 * 4)

    def forward(self, x, labels):
        s = self.fc(x).view(-1, 5, 4)                            # [N,5,4]
        w = torch.tensor([1.0, 0.5, 2.0, 1.5, 0.25])
        ce = nn.functional.cross_entropy(s, labels, weight=w, ignore_index=1)
        nll = nn.functional.nll_loss(torch.log_softmax(s[:, :, 0], 1), labels[:, 0], weight=w)
        return ce + 0.5 * nll


class OpsTopK(nn.Module):
    """torch.topk, largest and smallest, along the last and a middle axis
    (TopK), the values carrying the gradient."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4 * 5)
        self.out = nn.Linear(4 * 3 + 2 * 5, 10)

    def forward(self, x, labels):
        h = self.fc(x).view(-1, 4, 5)
        a = torch.topk(h, 3, dim=2).values                    # [N,4,3]
        b = torch.topk(h, 2, dim=1, largest=False).values     # [N,2,5]
        return nn.functional.cross_entropy(self.out(torch.cat([a.flatten(1), b.flatten(1)], 1)), labels)


class OpsGrid(nn.Module):
    """F.grid_sample (GridSample) at a grid the model computes, bilinear with
    zeros, border and reflection padding and nearest with reflection, so
    gradients reach both the image and the grid."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.loc = nn.Linear(25, 4 * 3 * 2)
        self.fc = nn.Linear(2 * 12 * 4, 10)

    def forward(self, x, labels):
        img = self.conv(x)                                               # [N,2,5,5]
        grid = 0.6 * self.loc(x.flatten(1)).view(-1, 4, 3, 2)            # some points outside
        a = nn.functional.grid_sample(img, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        b = nn.functional.grid_sample(img, grid, mode="bilinear", padding_mode="border", align_corners=True)
        r = nn.functional.grid_sample(img, grid, mode="bilinear", padding_mode="reflection", align_corners=True)
        m = nn.functional.grid_sample(img, grid, mode="nearest", padding_mode="reflection", align_corners=False)
        feat = torch.cat([a.flatten(1), b.flatten(1), r.flatten(1), m.flatten(1)], 1)
        return nn.functional.cross_entropy(self.fc(feat), labels)


def main():
    torch.manual_seed(10)
    fixture("ops_norm", OpsNorm(), torch.randn(3, 1, 8, 8), torch.randint(0, 10, (3,)))
    torch.manual_seed(11)
    fixture("ops_einsum", OpsEinsum(), torch.randn(3, 5, 6), torch.randint(0, 10, (3,)))
    torch.manual_seed(12)
    fixture("ops_convt", OpsConvT(), torch.randn(3, 2, 4, 4), torch.randint(0, 10, (3,)))
    torch.manual_seed(13)
    fixture("ops_pad", OpsPad(), torch.randn(3, 2, 6, 7), torch.randint(0, 10, (3,)))
    torch.manual_seed(14)
    fixture("ops_3d", Ops3d(), torch.randn(3, 2, 5, 6, 5), torch.randint(0, 10, (3,)))
    torch.manual_seed(15)
    fixture("ops_act", OpsAct(), torch.randn(3, 2, 4, 4), torch.randint(0, 10, (3,)))
    torch.manual_seed(16)
    fixture("ops_resize", OpsResize(), torch.randn(3, 2, 4, 5), torch.randint(0, 10, (3,)))
    torch.manual_seed(17)
    fixture("ops_loss", OpsLoss(), torch.randn(3, 6), torch.randint(0, 5, (3, 4)))
    torch.manual_seed(18)
    fixture("ops_topk", OpsTopK(), torch.randn(3, 6), torch.randint(0, 10, (3,)))
    torch.manual_seed(19)
    fixture("ops_grid", OpsGrid(), torch.randn(3, 1, 5, 5), torch.randint(0, 10, (3,)))


if __name__ == "__main__":
    main()
