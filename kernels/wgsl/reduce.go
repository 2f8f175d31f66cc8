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
// value(p), a WGSL function of x's flat index p, into out: folder's fold
// with +. A reduction of at most reduceSerialMax elements is one thread per
// output element adding in index order; a longer one is a workgroup per
// output element, whose threads add strided partial sums in index order
// that a tree in workgroup memory then adds. Either way the order is
// fixed: results are deterministic.
func reduceSource(r reduction, mean bool) (string, [3]uint32) {
	f := newFolder(r)
	body := f.fold("s", "f32", "0.0", "a + b", "value(q)")
	finish := "s"
	if mean {
		finish = fmt.Sprintf("s / %s", F32(float64(r.count)))
	}
	return f.kernel("", body, fmt.Sprintf("  out[o] = %s;\n", finish))
}

// folder writes the WGSL of folds over the slices of one reduction, for a
// kernel with one thread (serial) or one workgroup (!serial) per output
// element o; x's flat index of element r of slice o is index(o, r).
type folder struct {
	r      reduction
	serial bool
	n      int // folds written so far (names their workgroup arrays)
	arrays strings.Builder
}

func newFolder(r reduction) *folder {
	return &folder{r: r, serial: r.count <= reduceSerialMax}
}

// fold returns WGSL that leaves in name (of WGSL type typ, seen by every
// thread) init combined with elem(q) over every element q of slice o, in
// index order (serial) or in strided parts combined by a tree. combine is
// a WGSL expression of a and b, elem one of q; both may use earlier folds'
// names.
func (f *folder) fold(name, typ, init, combine, elem string) string {
	f.n++
	fn := fmt.Sprintf("fold%d", f.n)
	var b strings.Builder
	fmt.Fprintf(&f.arrays, "fn %s(a: %s, b: %s) -> %s { return %s; }\n", fn, typ, typ, typ, combine)
	if f.serial {
		fmt.Fprintf(&b, "  var %[1]s_a: %[2]s = %[3]s;\n  for (var r = 0u; r < %[4]du; r++) { let q = index(o, r); %[1]s_a = %[5]s(%[1]s_a, %[6]s); }\n  let %[1]s = %[1]s_a;\n",
			name, typ, init, f.r.count, fn, elem)
		return b.String()
	}
	arr := fmt.Sprintf("wg%d", f.n)
	fmt.Fprintf(&f.arrays, "var<workgroup> %s: array<%s, %d>;\n", arr, typ, WorkgroupSize)
	fmt.Fprintf(&b, "  var %[1]s_a: %[2]s = %[3]s;\n  if (o < %[4]du) {\n    for (var r = t; r < %[5]du; r += %[6]du) { let q = index(o, r); %[1]s_a = %[7]s(%[1]s_a, %[8]s); }\n  }\n",
		name, typ, init, f.r.out, f.r.count, WorkgroupSize, fn, elem)
	b.WriteString(treeFold(name+"_a", arr, func(a, b string) string { return fmt.Sprintf("%s(%s, %s)", fn, a, b) }))
	fmt.Fprintf(&b, "  let %s = %s[0];\n  workgroupBarrier();\n", name, arr)
	return b.String()
}

// kernel returns the source and workgroup counts of a reduction kernel:
// decls (bindings and helpers), then main running body (the folds) for
// output o and finish (statements run once per output element, by thread 0
// of the workgroup).
func (f *folder) kernel(decls, body, finish string) (string, [3]uint32) {
	var b strings.Builder
	b.WriteString(decls)
	fmt.Fprintf(&b, "fn index(o: u32, r: u32) -> u32 { return %s; }\n", f.r.index)
	var groups [3]uint32
	var idx string
	if f.serial {
		groups, idx = Grid(f.r.out)
	} else {
		groups, idx = Groups2(f.r.out)
	}
	var m strings.Builder
	m.WriteString(header(WorkgroupSize))
	if f.serial {
		fmt.Fprintf(&m, "  let o = %s;\n  if (o >= %du) { return; }\n%s%s}\n", idx, f.r.out, body, finish)
	} else {
		fmt.Fprintf(&m, "  let o = %s;\n  let t = lid.x;\n%s  if (t == 0u && o < %du) {\n%s  }\n}\n", idx, body, f.r.out, finish)
	}
	b.WriteString(f.arrays.String())
	b.WriteString(m.String())
	return b.String(), groups
}

// treeFold returns WGSL that stores each thread's v into the workgroup
// array arr and combines it pairwise down to arr[0] (WorkgroupSize threads,
// local id t) with combine, with the barriers it needs. Every thread must
// run it.
func treeFold(v, arr string, combine func(a, b string) string) string {
	return fmt.Sprintf(`  %[2]s[t] = %[1]s;
  workgroupBarrier();
  for (var w = %[3]du; w > 0u; w = w >> 1u) {
    if (t < w) { %[2]s[t] = %[4]s; }
    workgroupBarrier();
  }
`, v, arr, WorkgroupSize/2, combine(arr+"[t]", arr+"[t + w]"))
}

// treeSum is treeFold with +.
func treeSum(v, arr string) string {
	return treeFold(v, arr, func(a, b string) string { return a + " + " + b })
}

// treeMax is treeFold with max (NaN wins, as in the CPU's row maximum).
func treeMax(v, arr string) string {
	return treeFold(v, arr, func(a, b string) string { return "k_maxnan(" + a + ", " + b + ")" })
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
