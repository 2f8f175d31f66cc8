package wgsl

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Kernels on integer and bool elements: cast (between f32, i32, i64 and
// bool), the comparisons of i32 and i64 operands, where over i32, i64
// and bool, and bool transpose and broadcast_to (masks). Each is a move (moveDispatch): one thread per result element
// (per word for bool) that reads its operands as raw words at their
// broadcast offsets. WGSL has no 64-bit integers, so i64 is two u32 words
// here, and these kernels use both: a cast into i64 writes the whole value
// (f32 to i64 exactly, saturated), a cast from i64 reads it (to f32 rounded
// once, to i32 the low word, which is the CPU's wrap), the comparisons
// compare the signed high words and then the unsigned low ones, and where
// moves both words. The results equal the CPU's bit for bit.

// castHelpers are the WGSL conversions whose rules need more than a
// builtin: f32 to i32 and to i64 (truncated, NaN 0, saturated, as
// ir.CastFloatToInt), i64 to f32 (rounded once to nearest even), and the
// ordering of two i64 values.
const castHelpers = `fn k_isnan_c(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn k_f2i32(x: f32) -> u32 {
  if (k_isnan_c(x)) { return 0u; }
  if (x >= 2147483648.0) { return 0x7fffffffu; }
  if (x <= -2147483648.0) { return 0x80000000u; }
  return bitcast<u32>(i32(trunc(x)));
}
fn k_f2i64(x: f32) -> vec2<u32> {
  if (k_isnan_c(x)) { return vec2<u32>(0u, 0u); }
  if (x >= 9223372036854775808.0) { return vec2<u32>(0xffffffffu, 0x7fffffffu); }
  if (x <= -9223372036854775808.0) { return vec2<u32>(0u, 0x80000000u); }
  let a = abs(trunc(x));
  let hf = floor(a / 4294967296.0);
  var h = u32(hf);
  var l = u32(a - hf * 4294967296.0);
  if (x < 0.0) {
    l = ~l + 1u;
    h = ~h + select(0u, 1u, l == 0u);
  }
  return vec2<u32>(l, h);
}
fn k_i64f(v: vec2<u32>) -> f32 {
  let neg = (v.y & 0x80000000u) != 0u;
  var l = v.x;
  var h = v.y;
  if (neg) {
    l = ~l + 1u;
    h = ~h + select(0u, 1u, l == 0u);
  }
  var m: f32;
  if (h == 0u) {
    m = f32(l);
  } else {
    // The top 32 bits of the magnitude, with a sticky bit for the ones
    // shifted out, convert rounded once; then the exact power of two.
    let z = countLeadingZeros(h);
    var top = h << z;
    if (z > 0u) { top = top | (l >> (32u - z)); }
    let rest = select(l, l << z, z > 0u);
    if (z == 0u && l != 0u) { top = top | 1u; }
    if (z > 0u && rest != 0u) { top = top | 1u; }
    m = ldexp(f32(top), i32(32u - z));
  }
  return select(m, -m, neg);
}
fn k_lt64(a: vec2<u32>, b: vec2<u32>) -> bool {
  let ah = bitcast<i32>(a.y);
  let bh = bitcast<i32>(b.y);
  return ah < bh || (ah == bh && a.x < b.x);
}
`

// castExpr returns the WGSL of the raw result element of cast from dtype
// from into to, given the raw argument element r.
func castExpr(from, to ir.DType) string {
	switch from {
	case ir.F32:
		switch to {
		case ir.F32:
			return "r"
		case ir.I32:
			return "k_f2i32(bitcast<f32>(r))"
		case ir.I64:
			return "k_f2i64(bitcast<f32>(r))"
		case ir.Bool:
			return "select(0u, 1u, !(bitcast<f32>(r) == 0.0))" // NaN is true
		}
	case ir.I32:
		switch to {
		case ir.F32:
			return "bitcast<u32>(f32(bitcast<i32>(r)))"
		case ir.I32:
			return "r"
		case ir.I64:
			return "vec2<u32>(r, select(0u, 0xffffffffu, bitcast<i32>(r) < 0))"
		case ir.Bool:
			return "select(0u, 1u, r != 0u)"
		}
	case ir.I64:
		switch to {
		case ir.F32:
			return "bitcast<u32>(k_i64f(r))"
		case ir.I32:
			return "r.x"
		case ir.I64:
			return "r"
		case ir.Bool:
			return "select(0u, 1u, r.x != 0u || r.y != 0u)"
		}
	case ir.Bool:
		switch to {
		case ir.F32:
			return "bitcast<u32>(f32(r))"
		case ir.I32, ir.Bool:
			return "r"
		case ir.I64:
			return "vec2<u32>(r, 0u)"
		}
	}
	return ""
}

// buildCast builds cast {dtype} between f32, i32, i64 and bool.
func buildCast(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	if n.Out.Shape.NumElements() == 0 {
		return &Kernel{}, nil
	}
	var b strings.Builder
	b.WriteString(rawDecl(0, "x", n.Args[0].DType))
	b.WriteString(castHelpers)
	b.WriteString(ownAll)
	fmt.Fprintf(&b, "fn elem(p: u32) -> %s {\n  let r = rw_x(p);\n  return %s;\n}\n", rawType(n.Out.DType), castExpr(n.Args[0].DType, n.Out.DType))
	return &Kernel{Dispatches: []Dispatch{moveDispatch(n.Out, b.String(), []Operand{{Arg, 0}}, false)}}, nil
}

// intCompare is the WGSL of comparison op on raw elements a and b of
// integer dtype dt.
func intCompare(op ir.Op, dt ir.DType) string {
	if dt == ir.I64 {
		switch op {
		case ir.OpGreater:
			return "k_lt64(b, a)"
		case ir.OpGreaterEqual:
			return "!k_lt64(a, b)"
		case ir.OpLess:
			return "k_lt64(a, b)"
		case ir.OpLessEqual:
			return "!k_lt64(b, a)"
		case ir.OpEqual:
			return "all(a == b)"
		case ir.OpNotEqual:
			return "any(a != b)"
		}
		return ""
	}
	sym := map[ir.Op]string{ir.OpGreater: ">", ir.OpGreaterEqual: ">=", ir.OpLess: "<", ir.OpLessEqual: "<=", ir.OpEqual: "==", ir.OpNotEqual: "!="}[op]
	return fmt.Sprintf("bitcast<i32>(a) %s bitcast<i32>(b)", sym)
}

// buildIntElementwise builds a comparison of i32 or i64 operands, or where
// over i32, i64 or bool values, with NumPy broadcasting.
func buildIntElementwise(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	os := n.Out.Shape
	if os.NumElements() == 0 {
		return &Kernel{}, nil
	}
	var b strings.Builder
	names := []string{"a", "b"}
	if n.Op == ir.OpWhere {
		names = []string{"c", "a", "b"}
	}
	bind := make([]Operand, len(n.Args))
	for i, t := range n.Args {
		b.WriteString(rawDecl(i, names[i], t.DType))
		bind[i] = Operand{Arg, i}
	}
	b.WriteString(castHelpers)
	b.WriteString(ownAll)
	fmt.Fprintf(&b, "fn elem(p: u32) -> %s {\n", rawType(n.Out.DType))
	for i, t := range n.Args {
		fmt.Fprintf(&b, "  let %s = rw_%s(%s);\n", names[i], names[i], offsetExpr("p", os, broadcastStrides(t.Shape, os)))
	}
	if n.Op == ir.OpWhere {
		b.WriteString("  return select(b, a, c != 0u);\n}\n")
	} else {
		expr := intCompare(n.Op, n.Args[0].DType)
		if expr == "" {
			return nil, fmt.Errorf("%s is not a comparison", n.Op)
		}
		fmt.Fprintf(&b, "  return select(0u, 1u, %s);\n}\n", expr)
	}
	return &Kernel{Dispatches: []Dispatch{moveDispatch(n.Out, b.String(), bind, false)}}, nil
}

// boolGather is gatherKernel for bool elements (transpose and
// broadcast_to of masks): a move whose element p reads the argument's
// byte at offset, the WGSL of p.
func boolGather(n *kernels.Node, offset string) (*Kernel, error) {
	if n.Out.Shape.NumElements() == 0 {
		return &Kernel{}, nil
	}
	var b strings.Builder
	elemStart(&b, ir.Bool, "")
	fmt.Fprintf(&b, "  return rw_x(%s);\n}\n", offset)
	return &Kernel{Dispatches: []Dispatch{moveDispatch(n.Out, b.String(), []Operand{{Arg, 0}}, false)}}, nil
}

func init() {
	for _, dt := range []ir.DType{ir.F32, ir.I32, ir.I64, ir.Bool} {
		register(ir.OpCast, dt, buildCast)
	}
	for _, dt := range []ir.DType{ir.I32, ir.I64, ir.Bool} {
		register(ir.OpWhere, dt, buildIntElementwise)
	}
}
