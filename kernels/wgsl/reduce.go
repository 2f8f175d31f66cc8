package wgsl

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// reduction describes a reduction of a tensor of shape x over axes: out
// elements (the kept axes) and count elements reduced into each, with the
// WGSL expression of the flat index of x for output o and reduced element r.
type reduction struct {
	out, count int
	index      string
}

func newReduction(x ir.Shape, axes []int) reduction {
	red := map[int]bool{}
	for _, a := range axes {
		red[a] = true
	}
	st := x.Strides()
	var kept, reduced ir.Shape
	var kst, rst []int
	for i, d := range x {
		if red[i] {
			reduced, rst = append(reduced, d), append(rst, st[i])
		} else {
			kept, kst = append(kept, d), append(kst, st[i])
		}
	}
	return reduction{
		out:   kept.NumElements(),
		count: reduced.NumElements(),
		index: fmt.Sprintf("(%s + %s)", offsetExpr("o", kept, kst), offsetExpr("r", reduced, rst)),
	}
}

// reduceSerialMax is the longest reduction one thread does alone; longer
// ones take a workgroup per output element.
const reduceSerialMax = 64

// reduceSource returns the main function of a sum (mean when mean) of
// value(p), a WGSL function of x's flat index p, into out. A reduction of
// at most reduceSerialMax elements is one thread per output element adding
// in index order; a longer one is a workgroup per output element, whose
// threads add strided partial sums in index order that a tree in workgroup
// memory then adds. Either way the order is fixed: results are
// deterministic.
func reduceSource(r reduction, mean bool) (string, [3]uint32) {
	var b strings.Builder
	fmt.Fprintf(&b, "fn index(o: u32, r: u32) -> u32 { return %s; }\n", r.index)
	finish := "s"
	if mean {
		finish = fmt.Sprintf("s / %s", F32(float64(r.count)))
	}
	if r.count <= reduceSerialMax {
		groups, idx := Grid(r.out)
		b.WriteString(header(WorkgroupSize))
		fmt.Fprintf(&b, "  let o = %s;\n  if (o >= %du) { return; }\n  var s = 0.0;\n", idx, r.out)
		fmt.Fprintf(&b, "  for (var r = 0u; r < %du; r++) { s = s + value(index(o, r)); }\n  out[o] = %s;\n}\n", r.count, finish)
		return b.String(), groups
	}
	groups, idx := Groups2(r.out)
	fmt.Fprintf(&b, "var<workgroup> part: array<f32, %d>;\n", WorkgroupSize)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&b, "  let o = %s;\n  let t = lid.x;\n  var s = 0.0;\n", idx)
	fmt.Fprintf(&b, "  if (o < %du) {\n    for (var r = t; r < %du; r += %du) { s = s + value(index(o, r)); }\n  }\n", r.out, r.count, WorkgroupSize)
	b.WriteString(treeSum("s", "part"))
	fmt.Fprintf(&b, "  if (t == 0u && o < %du) { let s = part[0]; out[o] = %s; }\n}\n", r.out, finish)
	return b.String(), groups
}

// treeSum returns WGSL that stores each thread's v into the workgroup array
// arr and adds it pairwise down to arr[0] (WorkgroupSize threads, local id
// t), with the barriers it needs. Every thread must run it.
func treeSum(v, arr string) string {
	return fmt.Sprintf(`  %[2]s[t] = %[1]s;
  workgroupBarrier();
  for (var w = %[3]du; w > 0u; w = w >> 1u) {
    if (t < w) { %[2]s[t] = %[2]s[t] + %[2]s[t + w]; }
    workgroupBarrier();
  }
`, v, arr, WorkgroupSize/2)
}

// treeMax is treeSum with max (NaN wins, as in the CPU's row maximum).
func treeMax(v, arr string) string {
	return fmt.Sprintf(`  %[2]s[t] = %[1]s;
  workgroupBarrier();
  for (var w = %[3]du; w > 0u; w = w >> 1u) {
    if (t < w) { %[2]s[t] = k_maxnan(%[2]s[t], %[2]s[t + w]); }
    workgroupBarrier();
  }
`, v, arr, WorkgroupSize/2)
}

// buildReduce builds sum and mean of f32, and fused_reduce.
func buildReduce(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	var b strings.Builder
	bind := make([]Operand, 0, len(n.Args)+1)
	mean := n.Op == ir.OpMean
	var x ir.Shape
	if n.Op == ir.OpFusedReduce {
		prog, err := ir.EwProgramOf(n.Attrs)
		if err != nil {
			return nil, err
		}
		if len(n.Args)+1 > 8 {
			return nil, fmt.Errorf("%d arguments: more storage buffers than a shader stage may bind by default (8)", len(n.Args))
		}
		types, err := prog.Types(n.Args)
		if err != nil {
			return nil, err
		}
		x = types[len(types)-1].Shape
		ins := make([]ewInput, len(n.Args))
		for i, t := range n.Args {
			ins[i] = ewInput{fmt.Sprintf("a%d", i), t}
			b.WriteString(Decl(i, ins[i].name, t.DType))
			bind = append(bind, Operand{Arg, i})
		}
		f, helpers, err := program("value", x, ins, prog, false)
		if err != nil {
			return nil, err
		}
		b.WriteString(helperSource(helpers))
		b.WriteString(f)
		mean = n.Attrs.Str("op", "sum") == "mean"
	} else {
		x = n.Args[0].Shape
		b.WriteString(Decl(0, "a0", n.Args[0].DType))
		bind = append(bind, Operand{Arg, 0})
		b.WriteString("fn value(p: u32) -> f32 { return ld_a0(p); }\n")
	}
	b.WriteString(Decl(len(bind), "out", n.Out.DType))
	bind = append(bind, Operand{Out, 0})
	axes, err := ir.ReduceAxes(n.Attrs, len(x))
	if err != nil {
		return nil, err
	}
	r := newReduction(x, axes)
	if r.out == 0 {
		return &Kernel{}, nil
	}
	src, groups := reduceSource(r, mean)
	b.WriteString(src)
	return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: bind}}}, nil
}

func init() {
	register(ir.OpSum, ir.F32, buildReduce)
	register(ir.OpMean, ir.F32, buildReduce)
	register(ir.OpFusedReduce, ir.F32, buildReduce)
}
