package wgsl

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Kernels of the shape and data movement family (ir/ops_movement.go):
// squeeze, unsqueeze, flip, slice, pad, concat, stack, gather,
// index_select, embedding (pure moves, for f32, i32, i64 and bool), and
// scatter_add and index_add (f32 and i32).
//
// A move is one thread per result element (per result word for bool) that
// computes, from the element's coordinates, which element of which argument
// it copies (or pad's fill value). Elements move as raw words (i64: two
// words), bool as bytes, so no value is converted.
//
// scatter_add and index_add are the backward of the indexed reads, and WGSL
// has no float atomics: they run in gather form. Every result element is
// one thread that starts from its x element and adds its contributions in
// increasing position of the index, the order of the CPU kernel, so the
// results equal the CPU's bit for bit and do not depend on scheduling.
// scatter_add's thread scans the index's entries that may point at it
// (those off-axis coordinates, along the axis); index_add's (and so
// embedding's backward) first builds, on the device, each destination
// row's list of contributing index positions in increasing order (a
// consumer list: counts, an exclusive scan, then the lists), and then adds
// along its list.

// bindLimit is the most bindings a kernel puts in one dispatch: WebGPU's
// default maxStorageBuffersPerShaderStage.
const bindLimit = 8

// rawType is the WGSL type one element of dt moves as: a u32 word, two
// words for i64, a byte value in a u32 for bool.
func rawType(dt ir.DType) string {
	if dt == ir.I64 {
		return "vec2<u32>"
	}
	return "u32"
}

// rawDecl declares binding i, called name, as words with the loader
// rw_NAME(i) of element i as rawType(dt).
func rawDecl(i int, name string, dt ir.DType) string {
	s := fmt.Sprintf("@group(0) @binding(%d) var<storage, read_write> %s: array<u32>;\n", i, name)
	switch dt {
	case ir.I64:
		return s + fmt.Sprintf("fn rw_%[1]s(i: u32) -> vec2<u32> { return vec2<u32>(%[1]s[2u * i], %[1]s[2u * i + 1u]); }\n", name)
	case ir.Bool:
		return s + fmt.Sprintf("fn rw_%[1]s(i: u32) -> u32 { return (%[1]s[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu; }\n", name)
	}
	return s + fmt.Sprintf("fn rw_%[1]s(i: u32) -> u32 { return %[1]s[i]; }\n", name)
}

// rawConst is the WGSL of v as a raw element of dt, converted as the CPU's
// pad converts its fill value (integers truncate, bool is v != 0).
func rawConst(dt ir.DType, v float64) string {
	switch dt {
	case ir.F32:
		return fmt.Sprintf("bitcast<u32>(%s)", F32(v))
	case ir.I32:
		return fmt.Sprintf("%du", uint32(int32(v)))
	case ir.I64:
		u := uint64(int64(v))
		return fmt.Sprintf("vec2<u32>(%du, %du)", uint32(u), uint32(u>>32))
	}
	if v != 0 {
		return "1u"
	}
	return "0u"
}

// coords returns WGSL that sets c0, c1, ... (u32) to the coordinates of the
// flat index p in shape.
func coords(p string, shape ir.Shape) string {
	if len(shape) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  var r_ = %s;\n", p)
	for i := len(shape) - 1; i > 0; i-- {
		fmt.Fprintf(&b, "  let c%[1]d = r_ %% %[2]du; r_ = r_ / %[2]du;\n", i, shape[i])
	}
	b.WriteString("  let c0 = r_;\n")
	return b.String()
}

// dot returns the WGSL sum of coordinate expressions times strides, "0u"
// for none; coord(i) gives axis i's coordinate.
func dot(st []int, coord func(i int) string) string {
	var terms []string
	for i, s := range st {
		if s == 0 {
			continue
		}
		terms = append(terms, fmt.Sprintf("%s * %du", coord(i), s))
	}
	if len(terms) == 0 {
		return "0u"
	}
	return "(" + strings.Join(terms, " + ") + ")"
}

func plainCoord(i int) string { return fmt.Sprintf("c%d", i) }

// moveDispatch returns the dispatch of a move into the result (of type
// out) whose WGSL src defines fn elem(p: u32) -> rawType(out.DType), the
// raw element p of the result, and fn own(p: u32) -> bool, whether this
// dispatch writes element p (a bool result keeps the bytes it does not
// own). src declares bindings 0 .. len(bind)-1; the result is bound next,
// then the status words if status.
func moveDispatch(out ir.Type, src string, bind []Operand, status bool) Dispatch {
	var b strings.Builder
	b.WriteString(src)
	o := len(bind)
	bind = append(bind, Operand{Out, 0})
	fmt.Fprintf(&b, "@group(0) @binding(%d) var<storage, read_write> out: array<u32>;\n", o)
	if status {
		b.WriteString(StatusDecl(o + 1))
		bind = append(bind, Operand{Status, 0})
	}
	count := out.Shape.NumElements()
	var groups [3]uint32
	var idx string
	switch out.DType {
	case ir.Bool:
		w := (count + 3) / 4
		groups, idx = Grid(w)
		b.WriteString(header(WorkgroupSize))
		fmt.Fprintf(&b, "  let w = %s;\n  if (w >= %du) { return; }\n  var acc = 0u;\n", idx, w)
		fmt.Fprintf(&b, "  for (var k = 0u; k < 4u; k++) {\n    let p = 4u * w + k;\n    if (p >= %du) { break; }\n", count)
		b.WriteString("    var v = (out[w] >> (8u * k)) & 0xffu;\n    if (own(p)) { v = elem(p); }\n    acc = acc | (v << (8u * k));\n  }\n  out[w] = acc;\n}\n")
	case ir.I64:
		groups, idx = Grid(count)
		b.WriteString(header(WorkgroupSize))
		fmt.Fprintf(&b, "  let p = %s;\n  if (p >= %du || !own(p)) { return; }\n  let v = elem(p);\n  out[2u * p] = v.x;\n  out[2u * p + 1u] = v.y;\n}\n", idx, count)
	default:
		groups, idx = Grid(count)
		b.WriteString(header(WorkgroupSize))
		fmt.Fprintf(&b, "  let p = %s;\n  if (p >= %du || !own(p)) { return; }\n  out[p] = elem(p);\n}\n", idx, count)
	}
	return Dispatch{Source: b.String(), Groups: groups, Bind: bind}
}

const ownAll = "fn own(p: u32) -> bool { return true; }\n"

// elemStart writes the start of the source of a move reading x (binding 0,
// of dt) for every result element: x's declaration, then decls, ownAll
// and the head of elem(p).
func elemStart(b *strings.Builder, dt ir.DType, decls string) {
	b.WriteString(rawDecl(0, "x", dt))
	b.WriteString(decls)
	b.WriteString(ownAll)
	fmt.Fprintf(b, "fn elem(p: u32) -> %s {\n", rawType(dt))
}

// strided returns the kernel of a move that reads, for result element p at
// coordinates c, argument 0's element base + sum of c[i]*st[i] (with
// neg[i], the axis read backwards: size-1-c[i]).
func strided(n *kernels.Node, base int, st []int, neg []bool) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	os := n.Out.Shape
	if os.NumElements() == 0 {
		return &Kernel{}, nil
	}
	var b strings.Builder
	elemStart(&b, n.Out.DType, "")
	b.WriteString(coords("p", os))
	off := dot(st, func(i int) string {
		if neg != nil && neg[i] {
			return fmt.Sprintf("(%du - c%d)", os[i]-1, i)
		}
		return plainCoord(i)
	})
	fmt.Fprintf(&b, "  return rw_x(%du + %s);\n}\n", base, off)
	return &Kernel{Dispatches: []Dispatch{moveDispatch(n.Out, b.String(), []Operand{{Arg, 0}}, false)}}, nil
}

// buildSqueeze builds squeeze and unsqueeze: the row-major order is kept,
// so the bytes are copied.
func buildSqueeze(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	return copyWords(Operand{Arg, 0}, words(n.Out)), nil
}

// buildFlip builds flip {axes}.
func buildFlip(n *kernels.Node) (*Kernel, error) {
	xs := n.Args[0].Shape
	axes, err := ir.ReduceAxes(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	neg := make([]bool, len(xs))
	for _, a := range axes {
		neg[a] = true
	}
	return strided(n, 0, xs.Strides(), neg)
}

// buildSlice builds slice {axis, start, end, step}.
func buildSlice(n *kernels.Node) (*Kernel, error) {
	base, st, err := ir.SliceView(n.Args[0].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	return strided(n, base, st, nil)
}

// buildPad builds pad {pads, value}: along axis i, result coordinate c
// reads x at c - before[i] when that is inside x, else the element is the
// fill value.
func buildPad(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	xs, os := n.Args[0].Shape, n.Out.Shape
	before, _, err := ir.PadWidths(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	if os.NumElements() == 0 {
		return &Kernel{}, nil
	}
	dt := n.Out.DType
	var b strings.Builder
	elemStart(&b, dt, "")
	b.WriteString(coords("p", os))
	xst := xs.Strides()
	var terms []string
	for i := range xs {
		fmt.Fprintf(&b, "  let j%d = i32(c%d) - %d;\n", i, i, before[i])
		fmt.Fprintf(&b, "  if (j%[1]d < 0 || j%[1]d >= %[2]d) { return %[3]s; }\n", i, xs[i], rawConst(dt, n.Attrs.Float("value", 0)))
		terms = append(terms, fmt.Sprintf("u32(j%d) * %du", i, xst[i]))
	}
	if len(terms) == 0 {
		terms = []string{"0u"}
	}
	fmt.Fprintf(&b, "  return rw_x(%s);\n}\n", strings.Join(terms, " + "))
	return &Kernel{Dispatches: []Dispatch{moveDispatch(n.Out, b.String(), []Operand{{Arg, 0}}, false)}}, nil
}

// buildConcat builds concat and stack {axis}: result coordinate c along the
// axis falls in one argument's range, and the element is that argument's
// at c minus the range's start (stack: each argument is one index of the
// new axis). Arguments are taken bindLimit-1 at a time, one dispatch each.
func buildConcat(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	os := n.Out.Shape
	axis, err := ir.Axis(n.Attrs, len(os))
	if err != nil {
		return nil, err
	}
	if os.NumElements() == 0 {
		return &Kernel{}, nil
	}
	dt := n.Out.DType
	starts := make([]int, len(n.Args)+1)
	for i, a := range n.Args {
		size := 1
		if n.Op == ir.OpConcat {
			size = a.Shape[axis]
		}
		starts[i+1] = starts[i] + size
	}
	k := &Kernel{}
	const per = bindLimit - 1
	for g := 0; g < len(n.Args); g += per {
		hi := min(g+per, len(n.Args))
		var b strings.Builder
		var bind []Operand
		for i := g; i < hi; i++ {
			b.WriteString(rawDecl(i-g, fmt.Sprintf("a%d", i), dt))
			bind = append(bind, Operand{Arg, i})
		}
		fmt.Fprintf(&b, "fn own(p: u32) -> bool {\n%s  return c%d >= %du && c%d < %du;\n}\n", coords("p", os), axis, starts[g], axis, starts[hi])
		fmt.Fprintf(&b, "fn elem(p: u32) -> %s {\n%s", rawType(dt), coords("p", os))
		for i := g; i < hi; i++ {
			st := os.Clone()
			st[axis] = starts[i+1] - starts[i]
			sst := st.Strides()
			off := dot(sst, func(a int) string {
				if a == axis {
					return fmt.Sprintf("(c%d - %du)", a, starts[i])
				}
				return plainCoord(a)
			})
			if i < hi-1 {
				fmt.Fprintf(&b, "  if (c%d < %du) { return rw_a%d(%s); }\n", axis, starts[i+1], i, off)
			} else {
				fmt.Fprintf(&b, "  return rw_a%d(%s);\n", i, off)
			}
		}
		b.WriteString("}\n")
		k.Dispatches = append(k.Dispatches, moveDispatch(n.Out, b.String(), bind, false))
	}
	return k, nil
}

// indexCheck is the data error of an index element outside [0, size),
// worded as the CPU kernel words it (naming the element's position in the
// index of shape is).
func indexCheck(op ir.Op, what string, is ir.Shape, axis, size int) Check {
	return Check{Arg: 1, Message: func(v, pos int64) string {
		return kernels.IndexError(op, what, is, int(pos), v, axis, size).Error()
	}}
}

// indexLoad returns WGSL that sets k (i32) to the index element at flat
// position q and reports one outside [0, size) through the status words,
// reading 0 instead.
func indexLoad(dt ir.DType, q string, size int) string {
	bad := fmt.Sprintf("k < 0 || k >= %d", size)
	if dt == ir.I64 {
		bad += fmt.Sprintf(" || hi_idx(%s) != 0", q)
	}
	return fmt.Sprintf("  var k = ld_idx(%[1]s);\n  if (%[2]s) { atomicMax(&status[0], 1u); atomicMin(&status[1], %[1]s); k = 0; }\n", q, bad)
}

// buildGather builds gather(x, index) {axis}: result element p (at index
// position p) reads x at p's coordinates with the axis coordinate replaced
// by index[p].
func buildGather(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	xs, is := n.Args[0].Shape, n.Args[1].Shape
	axis, err := ir.Axis(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	if is.NumElements() == 0 {
		return &Kernel{}, nil
	}
	dt := n.Out.DType
	var b strings.Builder
	elemStart(&b, dt, Decl(1, "idx", n.Args[1].DType))
	st := xs.Strides()
	off := dot(st, func(i int) string {
		if i == axis {
			return "u32(k)"
		}
		return plainCoord(i)
	})
	fmt.Fprintf(&b, "%s%s  return rw_x(%s);\n}\n", coords("p", is), indexLoad(n.Args[1].DType, "p", xs[axis]), off)
	d := moveDispatch(n.Out, b.String(), []Operand{{Arg, 0}, {Arg, 1}}, true)
	return &Kernel{Dispatches: []Dispatch{d}, Checks: []Check{indexCheck(n.Op, "index", is, axis, xs[axis])}}, nil
}

// rows describes x as [outer, size, inner] around the indexed axis, with m
// index elements: index_select and index_add on axis, embedding on axis 0
// of the table.
type rows struct {
	axis, outer, size, inner, m int
}

func newRows(n *kernels.Node) (rows, error) {
	xs := n.Args[0].Shape
	axis := 0
	if n.Op != ir.OpEmbedding {
		var err error
		if axis, err = ir.Axis(n.Attrs, len(xs)); err != nil {
			return rows{}, err
		}
	}
	return rows{axis, xs[:axis].NumElements(), xs[axis], xs[axis+1:].NumElements(), n.Args[1].Shape.NumElements()}, nil
}

// buildSelect builds index_select(x, index) {axis} and embedding(table,
// indices): the result's block (a, i) is x's block (a, index[i]).
func buildSelect(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	r, err := newRows(n)
	if err != nil {
		return nil, err
	}
	if n.Out.Shape.NumElements() == 0 {
		return &Kernel{}, nil
	}
	dt := n.Out.DType
	var b strings.Builder
	elemStart(&b, dt, Decl(1, "idx", n.Args[1].DType))
	fmt.Fprintf(&b, "  let j = p %% %du;\n  let i = (p / %du) %% %du;\n  let a = p / %du;\n", r.inner, r.inner, r.m, r.inner*r.m)
	b.WriteString(indexLoad(n.Args[1].DType, "i", r.size))
	fmt.Fprintf(&b, "  return rw_x((a * %du + u32(k)) * %du + j);\n}\n", r.size, r.inner)
	what := "index"
	if n.Op == ir.OpEmbedding {
		what = "indices"
	}
	d := moveDispatch(n.Out, b.String(), []Operand{{Arg, 0}, {Arg, 1}}, true)
	return &Kernel{Dispatches: []Dispatch{d}, Checks: []Check{indexCheck(n.Op, what, n.Args[1].Shape, r.axis, r.size)}}, nil
}

// buildScatterAdd builds scatter_add(x, index, src) {axis}: result element
// p at coordinates c is x[p] plus src at every index position q with q's
// off-axis coordinates c's and index[q] == c[axis], taken in increasing
// q[axis] (row-major order of index, as the CPU adds them). Positions of
// index past its dims add nothing. Each index element is checked by the
// thread of the result element its position names with axis coordinate 0
// (an index element outside [0, size) adds nothing).
func buildScatterAdd(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	xs, is, ss := n.Args[0].Shape, n.Args[1].Shape, n.Args[2].Shape
	axis, err := ir.Axis(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	count := xs.NumElements()
	if count == 0 {
		return &Kernel{}, nil
	}
	var b strings.Builder
	b.WriteString(Decl(0, "x", n.Out.DType))
	b.WriteString(Decl(1, "idx", n.Args[1].DType))
	b.WriteString(Decl(2, "src", n.Out.DType))
	b.WriteString(Decl(3, "out", n.Out.DType))
	b.WriteString(StatusDecl(4))
	groups, idx := Grid(count)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&b, "  let p = %s;\n  if (p >= %du) { return; }\n%s", idx, count, coords("p", xs))
	b.WriteString("  var v = ld_x(p);\n")
	var inside []string
	for i := range xs {
		if i != axis {
			inside = append(inside, fmt.Sprintf("c%d < %du", i, is[i]))
		}
	}
	if is.NumElements() > 0 {
		if len(inside) > 0 {
			fmt.Fprintf(&b, "  if (%s) {\n", strings.Join(inside, " && "))
		} else {
			b.WriteString("  {\n")
		}
		ist, sst := is.Strides(), ss.Strides()
		at := func(st []int) string {
			return dot(st, func(i int) string {
				if i == axis {
					return "t"
				}
				return plainCoord(i)
			})
		}
		bad := fmt.Sprintf("k < 0 || k >= %d", xs[axis])
		if n.Args[1].DType == ir.I64 {
			bad += " || hi_idx(q) != 0"
		}
		fmt.Fprintf(&b, "    for (var t = 0u; t < %du; t++) {\n      let q = %s;\n      let k = ld_idx(q);\n", is[axis], at(ist))
		fmt.Fprintf(&b, "      if (%s) {\n        if (c%d == 0u) { atomicMax(&status[0], 1u); atomicMin(&status[1], q); }\n        continue;\n      }\n", bad, axis)
		fmt.Fprintf(&b, "      if (u32(k) == c%d) { v = v + ld_src(%s); }\n    }\n  }\n", axis, at(sst))
	}
	b.WriteString("  out[p] = v;\n}\n")
	return &Kernel{
		Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: []Operand{{Arg, 0}, {Arg, 1}, {Arg, 2}, {Out, 0}, {Status, 0}}}},
		Checks:     []Check{indexCheck(n.Op, "index", is, axis, xs[axis])},
	}, nil
}

// buildIndexAdd builds index_add(x, index, src) {axis} in five dispatches
// over two scratch buffers: (0, 1) each row's count of index elements
// pointing at it, by integer atomics; (2) one workgroup turns the counts into
// list starts (an exclusive scan); (3) one thread per row writes its list,
// the positions i with index[i] == s in increasing order; (4) one thread
// per result element adds x and src's elements along its row's list. Index
// elements outside [0, size) are reported by (1) and belong to no list.
func buildIndexAdd(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	r, err := newRows(n)
	if err != nil {
		return nil, err
	}
	count := n.Out.Shape.NumElements()
	if count == 0 {
		return &Kernel{}, nil
	}
	if r.m == 0 || r.size == 0 {
		return copyWords(Operand{Arg, 0}, words(n.Out)), nil
	}
	idt := n.Args[1].DType
	k := &Kernel{
		// Scratch 0: the count, then the list start, of each row (size + 1
		// words); scratch 1: the lists, m words.
		Scratch: []int64{int64(4 * (r.size + 1)), int64(4 * r.m)},
		Checks:  []Check{indexCheck(n.Op, "index", n.Args[1].Shape, r.axis, r.size)},
	}
	bad := fmt.Sprintf("k < 0 || k >= %d", r.size)
	if idt == ir.I64 {
		bad += " || hi_idx(i) != 0"
	}
	// (0) zero counts; (1) one thread per index element counts it into its
	// row (integer atomics: the counts do not depend on the order) or
	// reports it out of range.
	gz, iz := Grid(r.size + 1)
	var z strings.Builder
	z.WriteString("@group(0) @binding(0) var<storage, read_write> cnt: array<u32>;\n")
	z.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&z, "  let s = %s;\n  if (s <= %du) { cnt[s] = 0u; }\n}\n", iz, r.size)
	k.Dispatches = append(k.Dispatches, Dispatch{Source: z.String(), Groups: gz, Bind: []Operand{{Scratch, 0}}})
	var c strings.Builder
	c.WriteString(Decl(0, "idx", idt))
	c.WriteString("@group(0) @binding(1) var<storage, read_write> cnt: array<atomic<u32>>;\n")
	c.WriteString(StatusDecl(2))
	gm, im := Grid(r.m)
	c.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&c, "  let i = %s;\n  if (i >= %du) { return; }\n  let k = ld_idx(i);\n", im, r.m)
	fmt.Fprintf(&c, "  if (%s) { atomicMax(&status[0], 1u); atomicMin(&status[1], i); return; }\n  atomicAdd(&cnt[u32(k)], 1u);\n}\n", bad)
	k.Dispatches = append(k.Dispatches, Dispatch{Source: c.String(), Groups: gm, Bind: []Operand{{Arg, 1}, {Scratch, 0}, {Status, 0}}})
	// (2) exclusive scan in place: thread t owns a contiguous chunk.
	chunk := (r.size + WorkgroupSize - 1) / WorkgroupSize
	var s strings.Builder
	s.WriteString("@group(0) @binding(0) var<storage, read_write> cnt: array<u32>;\n")
	fmt.Fprintf(&s, "var<workgroup> part: array<u32, %d>;\n", WorkgroupSize)
	s.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&s, "  let t = lid.x;\n  let lo = min(t * %[1]du, %[2]du);\n  let hi = min(lo + %[1]du, %[2]du);\n  var tot = 0u;\n", chunk, r.size)
	s.WriteString("  for (var j = lo; j < hi; j++) { tot = tot + cnt[j]; }\n  part[t] = tot;\n  workgroupBarrier();\n")
	fmt.Fprintf(&s, "  for (var w = 1u; w < %du; w = w << 1u) {\n    var add = 0u;\n    if (t >= w) { add = part[t - w]; }\n    workgroupBarrier();\n    part[t] = part[t] + add;\n    workgroupBarrier();\n  }\n", WorkgroupSize)
	fmt.Fprintf(&s, "  var run = part[t] - tot;\n  for (var j = lo; j < hi; j++) { let c = cnt[j]; cnt[j] = run; run = run + c; }\n  if (t == %du) { cnt[%d] = part[t]; }\n}\n", WorkgroupSize-1, r.size)
	k.Dispatches = append(k.Dispatches, Dispatch{Source: s.String(), Groups: [3]uint32{1, 1, 1}, Bind: []Operand{{Scratch, 0}}})
	// (3) the lists.
	groups, idx := Grid(r.size)
	var l strings.Builder
	l.WriteString(Decl(0, "idx", idt))
	l.WriteString("@group(0) @binding(1) var<storage, read_write> cnt: array<u32>;\n")
	l.WriteString("@group(0) @binding(2) var<storage, read_write> lst: array<u32>;\n")
	l.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&l, "  let s = %s;\n  if (s >= %du) { return; }\n  var at = cnt[s];\n  let end = cnt[s + 1u];\n", idx, r.size)
	mine := "k >= 0 && u32(k) == s"
	if idt == ir.I64 {
		mine = "k >= 0 && hi_idx(i) == 0 && u32(k) == s" // a high word not 0 is out of range: in no list
	}
	fmt.Fprintf(&l, "  for (var i = 0u; i < %du && at < end; i++) {\n    let k = ld_idx(i);\n    if (%s) { lst[at] = i; at++; }\n  }\n}\n", r.m, mine)
	k.Dispatches = append(k.Dispatches, Dispatch{Source: l.String(), Groups: groups, Bind: []Operand{{Arg, 1}, {Scratch, 0}, {Scratch, 1}}})
	// (4) the sums.
	var a strings.Builder
	a.WriteString(Decl(0, "x", n.Out.DType))
	a.WriteString(Decl(1, "src", n.Out.DType))
	a.WriteString(Decl(2, "out", n.Out.DType))
	a.WriteString("@group(0) @binding(3) var<storage, read_write> cnt: array<u32>;\n")
	a.WriteString("@group(0) @binding(4) var<storage, read_write> lst: array<u32>;\n")
	g4, idx4 := Grid(count)
	a.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&a, "  let p = %s;\n  if (p >= %du) { return; }\n  let j = p %% %du;\n  let s = (p / %du) %% %du;\n  let o = p / %du;\n", idx4, count, r.inner, r.inner, r.size, r.inner*r.size)
	fmt.Fprintf(&a, "  var v = ld_x(p);\n  for (var e = cnt[s]; e < cnt[s + 1u]; e++) { v = v + ld_src((o * %du + lst[e]) * %du + j); }\n  out[p] = v;\n}\n", r.m, r.inner)
	k.Dispatches = append(k.Dispatches, Dispatch{Source: a.String(), Groups: g4, Bind: []Operand{{Arg, 0}, {Arg, 2}, {Out, 0}, {Scratch, 0}, {Scratch, 1}}})
	return k, nil
}

func init() {
	for _, dt := range []ir.DType{ir.F32, ir.I32, ir.I64, ir.Bool} {
		register(ir.OpSqueeze, dt, buildSqueeze)
		register(ir.OpUnsqueeze, dt, buildSqueeze)
		register(ir.OpFlip, dt, buildFlip)
		register(ir.OpSlice, dt, buildSlice)
		register(ir.OpPad, dt, buildPad)
		register(ir.OpConcat, dt, buildConcat)
		register(ir.OpStack, dt, buildConcat)
		register(ir.OpGather, dt, buildGather)
		register(ir.OpIndexSelect, dt, buildSelect)
		register(ir.OpEmbedding, dt, buildSelect)
	}
	for _, dt := range []ir.DType{ir.F32, ir.I32} {
		register(ir.OpScatterAdd, dt, buildScatterAdd)
		register(ir.OpIndexAdd, dt, buildIndexAdd)
	}
}
