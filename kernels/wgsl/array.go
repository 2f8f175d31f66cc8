package wgsl

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// cumsum and trilu (ir/ops_array.go). cumsum is one thread per line along
// its axis, adding in the CPU's order, so the two agree bit for bit; trilu
// is a move that writes zero off the triangle.

// buildCumsum builds cumsum {axis, exclusive, reverse} of f32 or i32.
func buildCumsum(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	s := n.Out.Shape
	axis, err := ir.Axis(n.Attrs, len(s))
	if err != nil {
		return nil, err
	}
	outer, m, inner := s[:axis].NumElements(), s[axis], s[axis+1:].NumElements()
	lines := outer * inner
	if lines == 0 || m == 0 {
		return &Kernel{}, nil
	}
	typ, _ := ValueType(n.Out.DType)
	var b strings.Builder
	b.WriteString(Decl(0, "x", n.Out.DType))
	b.WriteString(Decl(1, "out", n.Out.DType))
	groups, idx := Grid(lines)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&b, "  let l = %s;\n  if (l >= %du) { return; }\n", idx, lines)
	fmt.Fprintf(&b, "  let base = (l / %du) * %du + l %% %du;\n  var s: %s = %s(0);\n", inner, m*inner, inner, typ, typ)
	i := "k"
	if n.Attrs.Bool("reverse", false) {
		i = fmt.Sprintf("(%du - k)", m-1)
	}
	fmt.Fprintf(&b, "  for (var k = 0u; k < %du; k++) {\n    let e = base + %s * %du;\n", m, i, inner)
	if n.Attrs.Bool("exclusive", false) {
		b.WriteString("    out[e] = s;\n    s = s + x[e];\n")
	} else {
		b.WriteString("    s = s + x[e];\n    out[e] = s;\n")
	}
	b.WriteString("  }\n}\n")
	return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: []Operand{{Arg, 0}, {Out, 0}}}}}, nil
}

// buildTrilu builds trilu {upper, k} of any GPU dtype.
func buildTrilu(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	s := n.Out.Shape
	if s.NumElements() == 0 {
		return &Kernel{}, nil
	}
	r := len(s)
	rows, cols := s[r-2], s[r-1]
	// j - i lies in [1-rows, cols-1]: a k beyond it keeps all or nothing
	// alike, and clamped it stays a small WGSL literal.
	k := min(max(n.Attrs.Int("k", 0), -rows), cols)
	cmp := ">="
	if !n.Attrs.Bool("upper", true) {
		cmp = "<="
	}
	var b strings.Builder
	elemStart(&b, n.Out.DType, "")
	fmt.Fprintf(&b, "  let i = i32((p / %du) %% %du);\n  let j = i32(p %% %du);\n", cols, rows, cols)
	fmt.Fprintf(&b, "  if (j - i %s %d) { return rw_x(p); }\n  return %s;\n}\n", cmp, k, rawConst(n.Out.DType, 0))
	return &Kernel{Dispatches: []Dispatch{moveDispatch(n.Out, b.String(), []Operand{{Arg, 0}}, false)}}, nil
}

func init() {
	register(ir.OpCumsum, ir.F32, buildCumsum)
	register(ir.OpCumsum, ir.I32, buildCumsum)
	for _, dt := range []ir.DType{ir.F32, ir.I32, ir.I64, ir.Bool} {
		register(ir.OpTrilu, dt, buildTrilu)
	}
}
