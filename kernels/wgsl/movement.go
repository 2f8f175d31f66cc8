package wgsl

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// words returns the number of u32 words t's bytes take (bool bytes packed,
// rounded up).
func words(t ir.Type) int { return (t.Bytes() + 3) / 4 }

// elemWords returns how many u32 words one element of dt takes, or 0 for a
// dtype that is not stored a whole number of words per element (bool).
func elemWords(dt ir.DType) int {
	switch dt {
	case ir.F32, ir.I32:
		return 1
	case ir.I64:
		return 2
	}
	return 0
}

// copyWords returns a one-dispatch kernel that copies count u32 words from
// binding src to the result, one thread per word.
func copyWords(src Operand, count int) *Kernel {
	if count == 0 {
		return &Kernel{}
	}
	var b strings.Builder
	b.WriteString("@group(0) @binding(0) var<storage, read_write> src: array<u32>;\n")
	b.WriteString("@group(0) @binding(1) var<storage, read_write> out: array<u32>;\n")
	groups, idx := Grid(count)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&b, "  let p = %s;\n  if (p < %du) { out[p] = src[p]; }\n}\n", idx, count)
	return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: []Operand{src, {Out, 0}}}}}
}

// Copy returns the kernel of a plan's copy step: argument 0's bytes into
// the result, both of type t (an update's new value into its param or
// state).
func Copy(t ir.Type) *Kernel { return copyWords(Operand{Arg, 0}, words(t)) }

// gatherKernel returns a kernel that writes out[p] = in[offset(p)] for
// every element p of the result, offset given as WGSL over p, for dtypes
// stored in whole words.
func gatherKernel(n *kernels.Node, offset string) (*Kernel, error) {
	w := elemWords(n.Out.DType)
	if n.Out.DType == ir.Bool {
		return boolGather(n, offset) // cast.go
	}
	if w == 0 {
		return nil, fmt.Errorf("the GPU moves %s elements only as whole words; %s is not supported", n.Out.DType, n.Out)
	}
	count := n.Out.Shape.NumElements()
	if count == 0 {
		return &Kernel{}, nil
	}
	var b strings.Builder
	b.WriteString("@group(0) @binding(0) var<storage, read_write> src: array<u32>;\n")
	b.WriteString("@group(0) @binding(1) var<storage, read_write> out: array<u32>;\n")
	groups, idx := Grid(count)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&b, "  let p = %s;\n  if (p >= %du) { return; }\n  let q = %s;\n", idx, count, offset)
	for k := 0; k < w; k++ {
		fmt.Fprintf(&b, "  out[%[1]du * p + %[2]du] = src[%[1]du * q + %[2]du];\n", w, k)
	}
	b.WriteString("}\n")
	return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: []Operand{{Arg, 0}, {Out, 0}}}}}, nil
}

func buildTranspose(n *kernels.Node) (*Kernel, error) {
	in := n.Args[0].Shape
	perm, ok := n.Attrs.Ints("perm")
	if !ok {
		perm = make([]int, len(in))
		for i := range perm {
			perm[i] = len(in) - 1 - i
		}
	}
	ist := in.Strides()
	st := make([]int, len(perm))
	for k, a := range perm {
		st[k] = ist[a]
	}
	return gatherKernel(n, offsetExpr("p", n.Out.Shape, st))
}

func buildBroadcastTo(n *kernels.Node) (*Kernel, error) {
	return gatherKernel(n, offsetExpr("p", n.Out.Shape, broadcastStrides(n.Args[0].Shape, n.Out.Shape)))
}

// buildReshape copies the bytes: a reshape keeps the row-major order.
func buildReshape(n *kernels.Node) (*Kernel, error) {
	return copyWords(Operand{Arg, 0}, words(n.Out)), nil
}

// buildConst computes the constant once (kernels.Const), uploads it as a
// data table and copies it into the result at every step (the result's
// memory is shared with other buffers over the step).
func buildConst(n *kernels.Node) (*Kernel, error) {
	if _, err := ValueType(n.Out.DType); err != nil {
		return nil, err
	}
	t, err := kernels.Const(n.Attrs, n.Out)
	if err != nil {
		return nil, err
	}
	data := make([]byte, 4*words(n.Out))
	copy(data, t.Data)
	k := copyWords(Operand{Data, 0}, words(n.Out))
	if len(k.Dispatches) > 0 {
		k.Data = [][]byte{data}
	}
	return k, nil
}

// buildOneHot builds one_hot(labels) {classes} into f32: one thread per
// element; the thread of class 0 checks the label.
func buildOneHot(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	classes := n.Out.Shape[len(n.Out.Shape)-1]
	count := n.Out.Shape.NumElements()
	if count == 0 {
		return &Kernel{}, nil
	}
	var b strings.Builder
	b.WriteString(Decl(0, "lab", n.Args[0].DType))
	b.WriteString(Decl(1, "out", ir.F32))
	b.WriteString(StatusDecl(2))
	bad := fmt.Sprintf("l < 0 || l >= %d", classes)
	if n.Args[0].DType == ir.I64 {
		bad += " || hi_lab(r) != 0"
	}
	groups, idx := Grid(count)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&b, "  let p = %s;\n  if (p >= %du) { return; }\n  let r = p / %du;\n  let c = p %% %du;\n  let l = ld_lab(r);\n", idx, count, classes, classes)
	fmt.Fprintf(&b, "  if (c == 0u && (%s)) { atomicMax(&status[0], 1u); atomicMin(&status[1], r); }\n", bad)
	b.WriteString("  out[p] = select(0.0, 1.0, i32(c) == l);\n}\n")
	return &Kernel{
		Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: []Operand{{Arg, 0}, {Out, 0}, {Status, 0}}}},
		Checks:     []Check{labelCheck(0, classes)},
	}, nil
}

func init() {
	for _, dt := range []ir.DType{ir.F32, ir.I32, ir.I64, ir.Bool} {
		register(ir.OpTranspose, dt, buildTranspose)
		register(ir.OpBroadcastTo, dt, buildBroadcastTo)
	}
	for _, dt := range []ir.DType{ir.F32, ir.I32, ir.I64, ir.Bool} {
		register(ir.OpReshape, dt, buildReshape)
		register(ir.OpConst, dt, buildConst)
	}
	register(ir.OpOneHot, ir.F32, buildOneHot)
}
