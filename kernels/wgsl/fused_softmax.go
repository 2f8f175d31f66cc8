package wgsl

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// buildFusedSoftmax builds fused_softmax(in...) {program, log}: the
// softmax (or log_softmax) kernel over the last axis whose load of x is
// the program at that element.
func buildFusedSoftmax(n *kernels.Node) (*Kernel, error) {
	prog, err := fusedSoftmaxProgram(n)
	if err != nil {
		return nil, err
	}
	shape := n.Out.Shape
	if len(shape) == 0 {
		return nil, fmt.Errorf("expected a result of rank 1 or more, found %s", n.Out)
	}
	count, length, index := slices(shape, len(shape)-1)
	if count == 0 || length == 0 {
		return &Kernel{}, nil
	}
	var b strings.Builder
	ins := make([]ewInput, len(n.Args))
	bind := make([]Operand, 0, len(n.Args)+1)
	for i, t := range n.Args {
		ins[i] = ewInput{fmt.Sprintf("a%d", i), t}
		b.WriteString(Decl(i, ins[i].name, t.DType))
		bind = append(bind, Operand{Arg, i})
	}
	b.WriteString(Decl(len(n.Args), "out", ir.F32))
	bind = append(bind, Operand{Out, 0})
	f, helpers, err := program("pro", shape, ins, prog, false)
	if err != nil {
		return nil, err
	}
	b.WriteString(f)
	b.WriteString("fn ld_x(p: u32) -> f32 { return pro(p); }\n")
	groups := softmaxSource(&b, count, length, index, n.Attrs.Bool("log", false), helpers)
	return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: bind}}}, nil
}

// buildFusedSoftmaxGrad builds fused_softmax_grad(dy, y, in...) {program,
// log}: the softmax_grad (or log_softmax_grad) kernel over the last axis
// whose store of element e is the program of the gradient there (its
// input i0) and of the extra arguments.
func buildFusedSoftmaxGrad(n *kernels.Node) (*Kernel, error) {
	prog, err := fusedSoftmaxProgram(n)
	if err != nil {
		return nil, err
	}
	ys := n.Args[1].Shape
	if len(ys) == 0 {
		return nil, fmt.Errorf("expected y of rank 1 or more, found %s", n.Args[1])
	}
	count, length, index := slices(ys, len(ys)-1)
	if count == 0 || length == 0 {
		return &Kernel{}, nil
	}
	var b strings.Builder
	b.WriteString(Decl(0, "dy", ir.F32))
	b.WriteString(Decl(1, "y", ir.F32))
	bind := []Operand{{Arg, 0}, {Arg, 1}}
	ins := []ewInput{{"g", n.Args[1]}} // the gradient: the parameter x0
	for i, t := range n.Args[2:] {
		ins = append(ins, ewInput{fmt.Sprintf("a%d", i+2), t})
		b.WriteString(Decl(i+2, ins[i+1].name, t.DType))
		bind = append(bind, Operand{Arg, i + 2})
	}
	b.WriteString(Decl(len(n.Args), "out", ir.F32))
	bind = append(bind, Operand{Out, 0})
	f, helpers, err := program("epi", n.Out.Shape, ins, prog, true)
	if err != nil {
		return nil, err
	}
	b.WriteString(helperSource(helpers))
	b.WriteString(f)
	groups := softmaxGradSource(&b, count, length, index, n.Attrs.Bool("log", false), "epi")
	return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: bind}}}, nil
}

func init() {
	register(ir.OpFusedSoftmax, ir.F32, buildFusedSoftmax)
	register(ir.OpFusedSoftmaxGrad, ir.F32, buildFusedSoftmaxGrad)
}

// fusedSoftmaxProgram checks the types and argument count of a fused
// softmax op and returns its program.
func fusedSoftmaxProgram(n *kernels.Node) (ir.EwProgram, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	if len(n.Args)+1 > 8 {
		return nil, fmt.Errorf("%d arguments: more storage buffers than a shader stage may bind by default (8)", len(n.Args))
	}
	return ir.EwProgramOf(n.Attrs)
}
