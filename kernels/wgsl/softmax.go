package wgsl

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Row-wise kernels: one workgroup per slice along an axis, its threads
// taking the slice's elements strided by WorkgroupSize, with the maximum
// and the sum of exponentials reduced by trees in workgroup memory.

// slices returns the number of slices of shape along axis, the slice
// length, and the WGSL of the flat index of element j of slice s.
func slices(shape ir.Shape, axis int) (count, length int, index string) {
	outer, inner := 1, 1
	for i, d := range shape {
		switch {
		case i < axis:
			outer *= d
		case i > axis:
			inner *= d
		}
	}
	length = shape[axis]
	if inner == 1 {
		return outer, length, fmt.Sprintf("(s * %du + j)", length)
	}
	return outer * inner, length, fmt.Sprintf("((s / %du) * %du + j * %du + s %% %du)", inner, length*inner, inner, inner)
}

// rowStats is the WGSL, run by every thread of a slice's workgroup, that
// leaves in m the slice's maximum (NaN wins) and in e the sum of exp(x - m)
// over the slice, reading x with ld_x(idx(s, j)).
func rowStats(length int) string {
	return fmt.Sprintf(`  var mx = bitcast<f32>(0xff800000u);
  for (var j = t; j < %[1]du; j += %[2]du) { mx = k_maxnan(mx, ld_x(idx(s, j))); }
%[3]s  let m = red[0];
  workgroupBarrier();
  var se = 0.0;
  for (var j = t; j < %[1]du; j += %[2]du) { se = se + exp(ld_x(idx(s, j)) - m); }
%[4]s  let e = red[0];
  workgroupBarrier();
`, length, WorkgroupSize, treeMax("mx", "red"), treeSum("se", "red"))
}

// rowDecls writes the workgroup array red of a row kernel (one workgroup
// per row) and idx(s, j), the flat index (WGSL index) of row s's element j.
func rowDecls(b *strings.Builder, index string) {
	fmt.Fprintf(b, "var<workgroup> red: array<f32, %d>;\n", WorkgroupSize)
	fmt.Fprintf(b, "fn idx(s: u32, j: u32) -> u32 { return %s; }\n", index)
}

// rowPrelude is rowDecls with the helpers rowStats uses.
func rowPrelude(b *strings.Builder, index string) {
	rowDecls(b, index)
	b.WriteString(helperSource(map[string]bool{"k_maxnan": true, "k_log": true}))
}

// rowStart writes the start of main of a row kernel: workgroup s runs row
// s of count, its threads t. It returns the workgroup counts.
func rowStart(b *strings.Builder, count int) [3]uint32 {
	groups, sidx := Groups2(count)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(b, "  let s = %s;\n  let t = lid.x;\n  if (s >= %du) { return; }\n", sidx, count)
	return groups
}

// labelRows writes rowPrelude and rowStart for the rows of the [rows,
// classes] logits n.Args[0] and, where the targets n.Args[1] are labels,
// the load of row s's label lab. It returns the workgroup counts.
func labelRows(b *strings.Builder, n *kernels.Node, rows, classes int, labels bool) [3]uint32 {
	_, _, index := slices(n.Args[0].Shape, 1)
	rowPrelude(b, index)
	groups := rowStart(b, rows)
	if labels {
		b.WriteString(labelLoad(n.Args[1].DType, classes))
	}
	return groups
}

// buildSoftmax builds softmax and log_softmax {axis}.
func buildSoftmax(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	shape := n.Args[0].Shape
	axis := n.Attrs.Int("axis", -1)
	if axis < 0 {
		axis += len(shape)
	}
	if axis < 0 || axis >= len(shape) {
		return nil, fmt.Errorf("axis %d is out of range for %s", n.Attrs.Int("axis", -1), n.Args[0])
	}
	count, length, index := slices(shape, axis)
	if count == 0 || length == 0 {
		return &Kernel{}, nil
	}
	var b strings.Builder
	b.WriteString(Decl(0, "x", ir.F32))
	b.WriteString(Decl(1, "out", ir.F32))
	groups := softmaxSource(&b, count, length, index, n.Op == ir.OpLogSoftmax, map[string]bool{})
	return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: []Operand{{Arg, 0}, {Out, 0}}}}}, nil
}

// softmaxSource writes the rest of a softmax (or log_softmax) kernel over
// count slices of length from slices, after the declaration of ld_x, the
// load of the input, and of out: the row declarations, the helpers
// (those named in helpers and those the rows use) and main. It returns
// the workgroup counts.
func softmaxSource(b *strings.Builder, count, length int, index string, logOut bool, helpers map[string]bool) [3]uint32 {
	rowDecls(b, index)
	helpers["k_maxnan"], helpers["k_log"] = true, true
	b.WriteString(helperSource(helpers))
	groups := rowStart(b, count)
	b.WriteString(rowStats(length))
	write := "exp(v - m) / e"
	if logOut {
		write = "v - m - k_log(e)"
	}
	fmt.Fprintf(b, "  for (var j = t; j < %du; j += %du) { let v = ld_x(idx(s, j)); out[idx(s, j)] = %s; }\n}\n", length, WorkgroupSize, write)
	return groups
}

// labelCheck is the data error of a label outside [0, classes), quoting
// the label of the given argument, as the CPU kernels word it.
func labelCheck(arg, classes int) Check {
	return Check{Arg: arg, Message: func(v, row int64) string {
		return fmt.Sprintf("label %d at row %d is outside [0,%d)", v, row, classes)
	}}
}

// labelLoad returns the WGSL that sets lab to row s's label and reports a
// label outside [0, classes) through the status words (i64 labels must
// also fit in i32).
func labelLoad(dt ir.DType, classes int) string {
	bad := fmt.Sprintf("lab < 0 || lab >= %d", classes)
	if dt == ir.I64 {
		bad += " || hi_lab(s) != 0"
	}
	return fmt.Sprintf(`  var lab = ld_lab(s);
  if (%s) {
    if (t == 0u) { atomicMax(&status[0], 1u); atomicMin(&status[1], s); }
    lab = 0;
  }
`, bad)
}

// buildSoftmaxCE builds softmax_cross_entropy(logits [N,C], target)
// {reduction}: one workgroup per row writes the row's loss (into the
// result for "none", else into a scratch row that one more workgroup then
// adds in a fixed order).
func buildSoftmaxCE(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	rows, classes := n.Args[0].Shape[0], n.Args[0].Shape[1]
	red := n.Attrs.Str("reduction", "mean")
	switch red {
	case "mean", "sum", "none":
	default:
		return nil, fmt.Errorf(`reduction must be "mean", "sum" or "none", found %q`, red)
	}
	k := &Kernel{}
	var b strings.Builder
	b.WriteString(Decl(0, "x", ir.F32))
	labels := n.Args[1].DType != ir.F32
	bind := []Operand{{Arg, 0}, {Arg, 1}}
	if labels {
		b.WriteString(Decl(1, "lab", n.Args[1].DType))
	} else {
		b.WriteString(Decl(1, "tgt", ir.F32))
	}
	dst := Operand{Out, 0}
	if red != "none" {
		dst = Operand{Scratch, 0}
		k.Scratch = []int64{int64(4 * max(rows, 1))}
	}
	b.WriteString(Decl(2, "loss", ir.F32))
	bind = append(bind, dst)
	if labels {
		b.WriteString(StatusDecl(3))
		bind = append(bind, Operand{Status, 0})
		k.Checks = []Check{labelCheck(1, classes)}
	}
	groups := labelRows(&b, n, rows, classes, labels)
	if classes == 0 {
		b.WriteString("  if (t == 0u) { loss[s] = 0.0; }\n}\n")
	} else {
		b.WriteString(rowStats(classes))
		b.WriteString("  let ls = k_log(e);\n")
		if labels {
			b.WriteString("  if (t == 0u) { loss[s] = ls - (ld_x(idx(s, u32(lab))) - m); }\n}\n")
		} else {
			fmt.Fprintf(&b, "  var acc = 0.0;\n  for (var j = t; j < %du; j += %du) { acc = acc + tgt[idx(s, j)] * (ld_x(idx(s, j)) - m - ls); }\n", classes, WorkgroupSize)
			b.WriteString(treeSum("acc", "red"))
			b.WriteString("  if (t == 0u) { loss[s] = -red[0]; }\n}\n")
		}
	}
	k.Dispatches = append(k.Dispatches, Dispatch{Source: b.String(), Groups: groups, Bind: bind})
	if red == "none" {
		return k, nil
	}
	finish := "red[0]"
	if red == "mean" {
		finish = fmt.Sprintf("red[0] / %s", F32(float64(rows)))
	}
	var s strings.Builder
	s.WriteString(Decl(0, "loss", ir.F32))
	s.WriteString(Decl(1, "out", ir.F32))
	fmt.Fprintf(&s, "var<workgroup> red: array<f32, %d>;\n", WorkgroupSize)
	s.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&s, "  let t = lid.x;\n  var acc = 0.0;\n  for (var r = t; r < %du; r += %du) { acc = acc + loss[r]; }\n", rows, WorkgroupSize)
	s.WriteString(treeSum("acc", "red"))
	fmt.Fprintf(&s, "  if (t == 0u) { out[0] = %s; }\n}\n", finish)
	k.Dispatches = append(k.Dispatches, Dispatch{Source: s.String(), Groups: [3]uint32{1, 1, 1}, Bind: []Operand{{Scratch, 0}, {Out, 0}}})
	return k, nil
}

// buildSoftmaxCEGrad builds softmax_ce_grad(logits [N,C], target[, dy])
// {reduction}: one workgroup per row, (softmax - onehot(label))·scale or
// (softmax·sum(target) - target)·scale, scale = dy·(1/N) (mean), dy (sum),
// dy[n] (none) or 1 without dy.
func buildSoftmaxCEGrad(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	rows, classes := n.Args[0].Shape[0], n.Args[0].Shape[1]
	red := n.Attrs.Str("reduction", "mean")
	scale := "1.0"
	switch red {
	case "mean":
		scale = fmt.Sprintf("dy[0] * %s", F32(1/float64(max(rows, 1))))
	case "sum":
		scale = "dy[0]"
	case "none":
		scale = "dy[s]"
	default:
		return nil, fmt.Errorf(`reduction must be "mean", "sum" or "none", found %q`, red)
	}
	if len(n.Args) == 2 {
		scale = "1.0"
	}
	if rows == 0 || classes == 0 {
		return &Kernel{}, nil
	}
	k := &Kernel{}
	var b strings.Builder
	b.WriteString(Decl(0, "x", ir.F32))
	labels := n.Args[1].DType != ir.F32
	if labels {
		b.WriteString(Decl(1, "lab", n.Args[1].DType))
	} else {
		b.WriteString(Decl(1, "tgt", ir.F32))
	}
	bind := []Operand{{Arg, 0}, {Arg, 1}}
	if len(n.Args) > 2 {
		b.WriteString(Decl(len(bind), "dy", ir.F32))
		bind = append(bind, Operand{Arg, 2})
	}
	b.WriteString(Decl(len(bind), "out", ir.F32))
	bind = append(bind, Operand{Out, 0})
	if labels {
		b.WriteString(StatusDecl(len(bind)))
		bind = append(bind, Operand{Status, 0})
		k.Checks = []Check{labelCheck(1, classes)}
	}
	groups := labelRows(&b, n, rows, classes, labels)
	b.WriteString(rowStats(classes))
	fmt.Fprintf(&b, "  let sc = %s;\n", scale)
	if labels {
		fmt.Fprintf(&b, "  for (var j = t; j < %du; j += %du) { let p = exp(ld_x(idx(s, j)) - m) / e; out[idx(s, j)] = (p - select(0.0, 1.0, j == u32(lab))) * sc; }\n}\n", classes, WorkgroupSize)
	} else {
		fmt.Fprintf(&b, "  var st = 0.0;\n  for (var j = t; j < %du; j += %du) { st = st + tgt[idx(s, j)]; }\n", classes, WorkgroupSize)
		b.WriteString(treeSum("st", "red"))
		b.WriteString("  let sumt = red[0];\n")
		fmt.Fprintf(&b, "  for (var j = t; j < %du; j += %du) { let p = exp(ld_x(idx(s, j)) - m) / e; out[idx(s, j)] = (p * sumt - tgt[idx(s, j)]) * sc; }\n}\n", classes, WorkgroupSize)
	}
	k.Dispatches = []Dispatch{{Source: b.String(), Groups: groups, Bind: bind}}
	return k, nil
}

func init() {
	register(ir.OpSoftmax, ir.F32, buildSoftmax)
	register(ir.OpLogSoftmax, ir.F32, buildSoftmax)
	register(ir.OpSoftmaxCrossEntropy, ir.F32, buildSoftmaxCE)
	register(ir.OpSoftmaxCEGrad, ir.F32, buildSoftmaxCEGrad)
}
