package wgsl

import (
	"fmt"
	"math"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Reductions beyond sum and mean: max, min, prod (f32 and i32), logsumexp,
// var, std (f32), argmax and argmin (i64 results), prod's gradient ops
// prod_exclusive and prod_exclusive_grad, and max_grad (the gradient of max
// and min in gather form).
//
// They fold as sum does (newReduction, folder in reduce.go): a slice of at
// most reduceSerialMax elements is one thread folding it in index order
// (the CPU's order, so prod gives the CPU's bits), a longer one a workgroup
// whose threads fold strided parts that a tree in workgroup memory then
// combines, in a fixed order either way. prod_exclusive and
// prod_exclusive_grad are one thread per slice (prefix and suffix passes,
// as the CPU).

// reductionOf checks n's dtypes and returns the reduction of n's argument
// arg over n's axes, and whether the kernel is empty: no results, or (where
// slices counts) no elements in a slice.
func reductionOf(n *kernels.Node, arg int, slices bool) (reduction, bool, error) {
	if err := checkDTypes(n); err != nil {
		return reduction{}, false, err
	}
	xs := n.Args[arg].Shape
	axes, err := ir.ReduceAxes(n.Attrs, len(xs))
	if err != nil {
		return reduction{}, false, err
	}
	r := newReduction(xs, axes)
	return r, r.out == 0 || (slices && r.count == 0), nil
}

// emptyOr returns err, or where it is nil the empty kernel (nothing to
// compute).
func emptyOr(err error) (*Kernel, error) {
	if err != nil {
		return nil, err
	}
	return &Kernel{}, nil
}

// oneDispatch returns the kernel of a single dispatch of src on groups
// binding bind.
func oneDispatch(src string, groups [3]uint32, bind []Operand) *Kernel {
	return &Kernel{Dispatches: []Dispatch{{Source: src, Groups: groups, Bind: bind}}}
}

// sliceThread writes the declaration of index (element r of slice o) and
// the start of main for one thread per slice o, returning the workgroup
// counts.
func sliceThread(b *strings.Builder, r reduction) [3]uint32 {
	fmt.Fprintf(b, "fn index(o: u32, r: u32) -> u32 { return %s; }\n", r.index)
	groups, idx := Grid(r.out)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(b, "  let o = %s;\n  if (o >= %du) { return; }\n", idx, r.out)
	return groups
}

const (
	negInf = "bitcast<f32>(0xff800000u)"
	posInf = "bitcast<f32>(0x7f800000u)"
)

// buildFold builds max, min and prod {axes, keepdims} of f32 or i32. max
// and min propagate NaN (k_maximum, k_minimum).
func buildFold(n *kernels.Node) (*Kernel, error) {
	r, empty, err := reductionOf(n, 0, false)
	if err != nil || empty {
		return emptyOr(err)
	}
	dt := n.Out.DType
	typ, _ := ValueType(dt)
	var init, combine string
	helpers := map[string]bool{}
	switch {
	case n.Op == ir.OpProd && dt == ir.F32:
		init, combine = "1.0", "a * b"
	case n.Op == ir.OpProd:
		init, combine = "1", "a * b"
	case n.Op == ir.OpMax && dt == ir.F32:
		init, combine = negInf, "k_maximum(a, b)"
		helpers["k_maximum"] = true
	case n.Op == ir.OpMax:
		init, combine = "bitcast<i32>(0x80000000u)", "max(a, b)"
	case n.Op == ir.OpMin && dt == ir.F32:
		init, combine = posInf, "k_minimum(a, b)"
		helpers["k_minimum"] = true
	default:
		init, combine = "bitcast<i32>(0x7fffffffu)", "min(a, b)"
	}
	f := newFolder(r)
	body := f.fold("s", typ, init, combine, "ld_x(q)")
	src, groups := f.kernel(Decl(0, "x", dt)+Decl(1, "out", dt)+helperSource(helpers), body, "  out[o] = s;\n")
	return oneDispatch(src, groups, []Operand{{Arg, 0}, {Out, 0}}), nil
}

// buildLogSumExp builds logsumexp {axes, keepdims}: m = the slice's
// maximum (NaN wins), 0 where infinite, then m + log(sum(exp(x - m))).
func buildLogSumExp(n *kernels.Node) (*Kernel, error) {
	r, empty, err := reductionOf(n, 0, false)
	if err != nil || empty {
		return emptyOr(err)
	}
	f := newFolder(r)
	body := f.fold("mx", "f32", negInf, "k_maximum(a, b)", "ld_x(q)")
	body += "  var m = mx;\n  if (m == " + posInf + " || m == " + negInf + ") { m = 0.0; }\n"
	body += f.fold("se", "f32", "0.0", "a + b", "exp(ld_x(q) - m)")
	decls := Decl(0, "x", ir.F32) + Decl(1, "out", ir.F32) + helperSource(map[string]bool{"k_maximum": true, "k_log": true})
	src, groups := f.kernel(decls, body, "  out[o] = k_log(se) + m;\n")
	return oneDispatch(src, groups, []Operand{{Arg, 0}, {Out, 0}}), nil
}

// buildVar builds var and std {axes, keepdims, correction}: the mean, then
// the sum of squared differences, divided by max(0, N - correction) (a
// divisor of 0 gives inf, or NaN where the sum is 0).
func buildVar(n *kernels.Node) (*Kernel, error) {
	r, empty, err := reductionOf(n, 0, false)
	if err != nil || empty {
		return emptyOr(err)
	}
	f := newFolder(r)
	body := f.fold("sm", "f32", "0.0", "a + b", "ld_x(q)")
	body += fmt.Sprintf("  let mean = sm / %s;\n", F32(float64(r.count)))
	body += f.fold("ss", "f32", "0.0", "a + b", "(ld_x(q) - mean) * (ld_x(q) - mean)")
	div := math.Max(0, float64(r.count)-n.Attrs.Float("correction", 1))
	v := fmt.Sprintf("ss / %s", F32(div))
	if div == 0 {
		v = "ss * " + posInf // inf, or NaN (0 * inf) where the sum is 0
	}
	if n.Op == ir.OpStd {
		v = fmt.Sprintf("sqrt(%s)", v)
	}
	src, groups := f.kernel(Decl(0, "x", ir.F32)+Decl(1, "out", ir.F32), body, fmt.Sprintf("  out[o] = %s;\n", v))
	return oneDispatch(src, groups, []Operand{{Arg, 0}, {Out, 0}}), nil
}

// buildArg builds argmax and argmin {axes, keepdims} of f32, i32 or i64
// (values fitting in i32) into i64: the position (row-major over the
// reduced axes) of the first element no other beats, a NaN beating every
// number. Each thread keeps its strided part's first best; the tree keeps
// the better of two, or the lower position on a tie, so the result does
// not depend on the order.
func buildArg(n *kernels.Node) (*Kernel, error) {
	r, empty, err := reductionOf(n, 0, false)
	if err != nil || empty {
		return emptyOr(err)
	}
	xt := n.Args[0].DType
	typ, _ := ValueType(xt)
	cmp := ">"
	if n.Op == ir.OpArgmin {
		cmp = "<"
	}
	var b strings.Builder
	b.WriteString(Decl(0, "x", xt))
	b.WriteString("@group(0) @binding(1) var<storage, read_write> out: array<u32>;\n")
	if typ == "f32" {
		b.WriteString(helperSource(map[string]bool{"k_isnan": true}))
		fmt.Fprintf(&b, "fn beats(v: f32, w: f32) -> bool { return (k_isnan(v) && !k_isnan(w)) || v %s w; }\n", cmp)
	} else {
		fmt.Fprintf(&b, "fn beats(v: i32, w: i32) -> bool { return v %s w; }\n", cmp)
	}
	if r.count <= reduceSerialMax {
		groups := sliceThread(&b, r)
		b.WriteString("  var best = ld_x(index(o, 0u));\n  var at = 0u;\n")
		fmt.Fprintf(&b, "  for (var r = 1u; r < %du; r++) { let v = ld_x(index(o, r)); if (beats(v, best)) { best = v; at = r; } }\n", r.count)
		b.WriteString("  out[2u * o] = at;\n  out[2u * o + 1u] = 0u;\n}\n")
		return oneDispatch(b.String(), groups, []Operand{{Arg, 0}, {Out, 0}}), nil
	}
	fmt.Fprintf(&b, "fn index(o: u32, r: u32) -> u32 { return %s; }\n", r.index)
	groups, idx := Groups2(r.out)
	fmt.Fprintf(&b, "var<workgroup> wb: array<%s, %d>;\nvar<workgroup> wp: array<u32, %d>;\n", typ, WorkgroupSize, WorkgroupSize)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&b, "  let o = %s;\n  let t = lid.x;\n  let oo = min(o, %du);\n  var at = min(t, %du);\n  var best = ld_x(index(oo, at));\n", idx, r.out-1, r.count-1)
	fmt.Fprintf(&b, "  for (var r = t + %du; r < %du; r += %du) { let v = ld_x(index(oo, r)); if (beats(v, best)) { best = v; at = r; } }\n", WorkgroupSize, r.count, WorkgroupSize)
	fmt.Fprintf(&b, "  wb[t] = best;\n  wp[t] = at;\n  workgroupBarrier();\n  for (var w = %du; w > 0u; w = w >> 1u) {\n", WorkgroupSize/2)
	b.WriteString("    if (t < w) {\n      let v = wb[t + w];\n      let p = wp[t + w];\n      if (beats(v, wb[t]) || (!beats(wb[t], v) && p < wp[t])) { wb[t] = v; wp[t] = p; }\n    }\n    workgroupBarrier();\n  }\n")
	fmt.Fprintf(&b, "  if (t == 0u && o < %du) { out[2u * o] = wp[0]; out[2u * o + 1u] = 0u; }\n}\n", r.out)
	return oneDispatch(b.String(), groups, []Operand{{Arg, 0}, {Out, 0}}), nil
}

// buildProdExclusive builds prod_exclusive {axes}: one thread per slice
// writes the prefix products in index order, then multiplies them by the
// suffix products from the end (no division: exact at zeros), as the CPU.
func buildProdExclusive(n *kernels.Node) (*Kernel, error) {
	r, empty, err := reductionOf(n, 0, true)
	if err != nil || empty {
		return emptyOr(err)
	}
	var b strings.Builder
	b.WriteString(Decl(0, "x", ir.F32))
	b.WriteString(Decl(1, "out", ir.F32))
	groups := sliceThread(&b, r)
	fmt.Fprintf(&b, "  var p = 1.0;\n  for (var r = 0u; r < %du; r++) { let e = index(o, r); out[e] = p; p = p * x[e]; }\n", r.count)
	fmt.Fprintf(&b, "  var s = 1.0;\n  for (var r = %du; r > 0u; r--) { let e = index(o, r - 1u); out[e] = out[e] * s; s = s * x[e]; }\n}\n", r.count)
	return oneDispatch(b.String(), groups, []Operand{{Arg, 0}, {Out, 0}}), nil
}

// buildProdExclusiveGrad builds prod_exclusive_grad(dy, x) {axes}: one
// thread per slice runs the CPU's prefix and suffix products of the dual
// numbers x + t·dy, the prefixes' value parts kept in the result and their
// t parts in a scratch buffer until the suffix pass combines them.
func buildProdExclusiveGrad(n *kernels.Node) (*Kernel, error) {
	r, empty, err := reductionOf(n, 1, true)
	if err != nil || empty {
		return emptyOr(err)
	}
	var b strings.Builder
	b.WriteString(Decl(0, "dy", ir.F32))
	b.WriteString(Decl(1, "x", ir.F32))
	b.WriteString(Decl(2, "out", ir.F32))
	b.WriteString(Decl(3, "pb", ir.F32))
	groups := sliceThread(&b, r)
	fmt.Fprintf(&b, "  var a = 1.0;\n  var d = 0.0;\n  for (var r = 0u; r < %du; r++) {\n    let e = index(o, r);\n    out[e] = a;\n    pb[e] = d;\n    let xv = x[e];\n    let dv = dy[e];\n    d = a * dv + d * xv;\n    a = a * xv;\n  }\n", r.count)
	fmt.Fprintf(&b, "  a = 1.0;\n  d = 0.0;\n  for (var r = %du; r > 0u; r--) {\n    let e = index(o, r - 1u);\n    out[e] = out[e] * d + pb[e] * a;\n    let xv = x[e];\n    let dv = dy[e];\n    d = a * dv + d * xv;\n    a = a * xv;\n  }\n}\n", r.count)
	return &Kernel{
		Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: []Operand{{Arg, 0}, {Arg, 1}, {Out, 0}, {Scratch, 0}}}},
		Scratch:    []int64{int64(4 * n.Args[1].Shape.NumElements())},
	}, nil
}

// buildMaxGrad builds max_grad(dy, x, y) {axes, keepdims, min}: per slice,
// the count n of elements equal to y (1.0 added per tie, exact), then
// (dy/n)*1 where x == y and (dy/n)*0 elsewhere, so a NaN slice (y NaN,
// equal to nothing) gives NaN as the unfused rule.
func buildMaxGrad(n *kernels.Node) (*Kernel, error) {
	r, empty, err := reductionOf(n, 1, true)
	if err != nil || empty {
		return emptyOr(err)
	}
	dyAt := "o"
	if len(n.Args[0].Shape) == 0 && len(n.Args[2].Shape) != 0 {
		dyAt = "0u"
	}
	f := newFolder(r)
	body := "  let yv = y[min(o, " + fmt.Sprint(r.out-1) + "u)];\n"
	body += f.fold("cnt", "f32", "0.0", "a + b", "select(0.0, 1.0, ld_x(q) == yv)")
	body += fmt.Sprintf("  let qv = dy[min(%s, %du)] / cnt;\n", dyAt, r.out-1)
	// Elsewhere qv*0: 0, or NaN where qv is not finite (no element equals a
	// NaN result, so cnt is 0); written out, since drivers fold qv * 0.0.
	body += "  let qz = select(qv * 0.0, bitcast<f32>(0x7fc00000u), (bitcast<u32>(qv) & 0x7fffffffu) >= 0x7f800000u);\n"
	write := "out[q] = select(qz, qv * 1.0, ld_x(q) == yv);"
	if f.serial {
		body += fmt.Sprintf("  for (var r = 0u; r < %du; r++) { let q = index(o, r); %s }\n", r.count, write)
	} else {
		body += fmt.Sprintf("  if (o < %du) {\n    for (var r = t; r < %du; r += %du) { let q = index(o, r); %s }\n  }\n", r.out, r.count, WorkgroupSize, write)
	}
	decls := Decl(0, "dy", ir.F32) + Decl(1, "x", ir.F32) + Decl(2, "y", ir.F32) + Decl(3, "out", ir.F32)
	src, groups := f.kernel(decls, body, "")
	return oneDispatch(src, groups, []Operand{{Arg, 0}, {Arg, 1}, {Arg, 2}, {Out, 0}}), nil
}

func init() {
	for _, op := range []ir.Op{ir.OpMax, ir.OpMin, ir.OpProd} {
		register(op, ir.F32, buildFold)
		register(op, ir.I32, buildFold)
	}
	register(ir.OpLogSumExp, ir.F32, buildLogSumExp)
	register(ir.OpVar, ir.F32, buildVar)
	register(ir.OpStd, ir.F32, buildVar)
	register(ir.OpArgmax, ir.I64, buildArg)
	register(ir.OpArgmin, ir.I64, buildArg)
	register(ir.OpProdExclusive, ir.F32, buildProdExclusive)
	register(ir.OpProdExclusiveGrad, ir.F32, buildProdExclusiveGrad)
	register(ir.OpMaxGrad, ir.F32, buildMaxGrad)
}
