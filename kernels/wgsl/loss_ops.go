package wgsl

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Losses beyond softmax_cross_entropy (mse_loss, l1_loss, huber_loss,
// bce_loss, bce_with_logits, nll_loss), and the row-wise gradients
// softmax_grad and log_softmax_grad.
//
// A loss is a WGSL function value(p) of its p-th unreduced loss; "none"
// writes one per thread, "sum" and "mean" reduce them with sum's kernel
// (reduceSource: a thread in index order up to 64 losses, else a workgroup
// with a fixed tree).

// lossKernel returns the kernel of a loss whose WGSL decls declare its
// bindings 0 .. len(bind)-1 (the result comes next, then the status words
// if status) and fn value(p: u32) -> f32 over count losses.
func lossKernel(n *kernels.Node, decls string, bind []Operand, count int, status bool, checks []Check) (*Kernel, error) {
	red := n.Attrs.Str("reduction", "mean")
	switch red {
	case "mean", "sum", "none":
	default:
		return nil, fmt.Errorf(`reduction must be "mean", "sum" or "none", found %q`, red)
	}
	var b strings.Builder
	b.WriteString(decls)
	o := len(bind)
	b.WriteString(Decl(o, "out", ir.F32))
	bind = append(bind, Operand{Out, 0})
	if status {
		b.WriteString(StatusDecl(o + 1))
		bind = append(bind, Operand{Status, 0})
	}
	var groups [3]uint32
	if red == "none" {
		if count == 0 {
			return &Kernel{}, nil
		}
		var idx string
		groups, idx = Grid(count)
		b.WriteString(header(WorkgroupSize))
		fmt.Fprintf(&b, "  let p = %s;\n  if (p >= %du) { return; }\n  out[p] = value(p);\n}\n", idx, count)
	} else {
		var src string
		src, groups = reduceSource(newReduction(ir.Shape{count}, []int{0}), red == "mean")
		b.WriteString(src)
	}
	return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: bind}}, Checks: checks}, nil
}

// buildElemLoss builds mse_loss, l1_loss and huber_loss {delta} of
// d = a - b over the broadcast shape.
func buildElemLoss(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	as, bs := n.Args[0].Shape, n.Args[1].Shape
	shape, ok := ir.BroadcastShapes(as, bs)
	if !ok {
		return nil, fmt.Errorf("%s and %s do not broadcast", n.Args[0], n.Args[1])
	}
	var b strings.Builder
	b.WriteString(Decl(0, "a", ir.F32))
	b.WriteString(Decl(1, "b", ir.F32))
	fmt.Fprintf(&b, "fn value(p: u32) -> f32 {\n  let d = ld_a(%s) - ld_b(%s);\n",
		offsetExpr("p", shape, broadcastStrides(as, shape)), offsetExpr("p", shape, broadcastStrides(bs, shape)))
	switch n.Op {
	case ir.OpMSELoss:
		b.WriteString("  return d * d;\n}\n")
	case ir.OpL1Loss:
		b.WriteString("  return abs(d);\n}\n")
	default:
		delta := n.Attrs.Float("delta", 1)
		fmt.Fprintf(&b, "  let z = abs(d);\n  if (z < %s) { return (0.5 * z) * z; }\n  return %s * (z - %s);\n}\n", F32(delta), F32(delta), F32(0.5*float64(float32(delta))))
	}
	return lossKernel(n, b.String(), []Operand{{Arg, 0}, {Arg, 1}}, shape.NumElements(), false, nil)
}

// buildBCE builds bce_loss (logs clamped at -100; an input or target
// outside [0,1] is an error) and bce_with_logits ((1 - t)*x + max(-x, 0) +
// log1p(exp(-|x|)), PyTorch's form, as the CPU kernel).
func buildBCE(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(Decl(0, "x", ir.F32))
	b.WriteString(Decl(1, "tg", ir.F32))
	b.WriteString(helperSource(map[string]bool{"k_log": true, "k_log1p": true}))
	b.WriteString("fn value(p: u32) -> f32 {\n  let xv = ld_x(p);\n  let tv = ld_tg(p);\n")
	var checks []Check
	logits := n.Op == ir.OpBCEWithLogits
	if logits {
		b.WriteString("  return (1.0 - tv) * xv + max(-xv, 0.0) + k_log1p(exp(-abs(xv)));\n}\n")
	} else {
		b.WriteString("  if (!(xv >= 0.0 && xv <= 1.0) || !(tv >= 0.0 && tv <= 1.0)) { atomicMax(&status[0], 1u); atomicMin(&status[1], p); }\n")
		b.WriteString("  let lx = max(k_log(xv), -100.0);\n  let l1x = max(k_log1p(-xv), -100.0);\n  return (tv - 1.0) * l1x - tv * lx;\n}\n")
		checks = []Check{{Arg: -1, Message: func(_, i int64) string {
			return fmt.Sprintf("input or target at element %d is outside [0,1]", i)
		}}}
	}
	return lossKernel(n, b.String(), []Operand{{Arg, 0}, {Arg, 1}}, n.Args[0].Shape.NumElements(), !logits, checks)
}

// buildNLL builds nll_loss(input [N,C], labels [N]): -input[n, labels[n]];
// a label outside [0,C) is an error naming it and its row.
func buildNLL(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	rows, classes := n.Args[0].Shape[0], n.Args[0].Shape[1]
	dt := n.Args[1].DType
	var b strings.Builder
	b.WriteString(Decl(0, "x", ir.F32))
	b.WriteString(Decl(1, "lab", dt))
	bad := fmt.Sprintf("l < 0 || l >= %d", classes)
	if dt == ir.I64 {
		bad += " || hi_lab(p) != 0"
	}
	fmt.Fprintf(&b, "fn value(p: u32) -> f32 {\n  var l = ld_lab(p);\n  if (%s) { atomicMax(&status[0], 1u); atomicMin(&status[1], p); return 0.0; }\n  return -ld_x(p * %du + u32(l));\n}\n", bad, classes)
	return lossKernel(n, b.String(), []Operand{{Arg, 0}, {Arg, 1}}, rows, true, []Check{labelCheck(1, classes)})
}

// buildSoftmaxGrad builds softmax_grad(dy, y) {axis}, y * (dy - sum(dy*y)),
// and log_softmax_grad(dy, y) {axis}, dy - exp(y) * sum(dy): one workgroup
// per slice, the sum by a tree in workgroup memory.
func buildSoftmaxGrad(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	shape := n.Out.Shape
	axis, err := ir.Axis(n.Attrs, len(shape))
	if err != nil {
		return nil, err
	}
	count, length, index := slices(shape, axis)
	if count == 0 || length == 0 {
		return &Kernel{}, nil
	}
	var b strings.Builder
	b.WriteString(Decl(0, "dy", ir.F32))
	b.WriteString(Decl(1, "y", ir.F32))
	b.WriteString(Decl(2, "out", ir.F32))
	groups := softmaxGradSource(&b, count, length, index, n.Op == ir.OpLogSoftmaxGrad, "")
	return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: []Operand{{Arg, 0}, {Arg, 1}, {Out, 0}}}}}, nil
}

// softmaxGradSource writes the rest of a softmax_grad (or
// log_softmax_grad) kernel over count slices of length from slices, after
// the declarations of dy, y and out: the row declarations and main. With
// epi, element e of the result is epi(e, g) of the gradient g instead of
// g. It returns the workgroup counts.
func softmaxGradSource(b *strings.Builder, count, length int, index string, logGrad bool, epi string) [3]uint32 {
	rowDecls(b, index)
	groups := rowStart(b, count)
	b.WriteString("  var acc = 0.0;\n")
	term, write := "dy[e] * y[e]", "y[e] * (dy[e] - sm)"
	if logGrad {
		term, write = "dy[e]", "dy[e] - exp(y[e]) * sm"
	}
	if epi != "" {
		write = fmt.Sprintf("%s(e, %s)", epi, write)
	}
	fmt.Fprintf(b, "  for (var j = t; j < %du; j += %du) { let e = idx(s, j); acc = acc + %s; }\n", length, WorkgroupSize, term)
	b.WriteString(treeSum("acc", "red"))
	fmt.Fprintf(b, "  let sm = red[0];\n  for (var j = t; j < %du; j += %du) { let e = idx(s, j); out[e] = %s; }\n}\n", length, WorkgroupSize, write)
	return groups
}

func init() {
	for _, op := range []ir.Op{ir.OpMSELoss, ir.OpL1Loss, ir.OpHuberLoss} {
		register(op, ir.F32, buildElemLoss)
	}
	register(ir.OpBCELoss, ir.F32, buildBCE)
	register(ir.OpBCEWithLogits, ir.F32, buildBCE)
	register(ir.OpNLLLoss, ir.F32, buildNLL)
	register(ir.OpSoftmaxGrad, ir.F32, buildSoftmaxGrad)
	register(ir.OpLogSoftmaxGrad, ir.F32, buildSoftmaxGrad)
}
