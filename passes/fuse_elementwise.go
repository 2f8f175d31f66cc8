package passes

import (
	"container/heap"
	"fmt"
	"slices"

	"github.com/kilnml/kiln/ir"
)

// Elementwise fusion: chains of elementwise ops become one fused_elementwise,
// a matmul whose only users are elementwise takes them as its epilogue
// (fused_matmul), a sum or mean takes the elementwise ops that only it
// reads as its prologue (fused_reduce), and a softmax and a softmax
// gradient take theirs (fused_softmax, fused_softmax_grad: fuse_softmax.go).
// The rules, which never let a fused op do more arithmetic than the ops it
// replaces:
//
//   - A group is a root and members, elementwise values whose every user is
//     in the group and which are not outputs, gradients or updates: a value
//     needed outside is stored anyway, and recomputing it in each group that
//     reads it would cost compute, so it stays a group input. No value is
//     computed twice.
//   - Every member has the root's number of elements: a smaller value (a
//     [] or [C] computation broadcast into [N,C]) would be recomputed once
//     per element of the result, so it stays an input.
//   - Views (broadcast_to, reshape of one element) are read through: the
//     program broadcasts their operand itself, unless a member's type
//     would change.
//   - Values are f32/f64 of the root's dtype, or bool (comparisons feeding a
//     where); a scalar const of the root's dtype is folded into the program
//     as an immediate.
//   - A group of one op saves nothing and is left alone; a program has at
//     most fuseewMaxInstrs instructions and a fused op at most
//     fuseewMaxInputs arguments.

// fuseewMaxInputs is the most arguments a fused op takes: a WebGPU shader
// stage sees 8 storage buffers by default (maxStorageBuffersPerShaderStage),
// and the result is one of them.
const fuseewMaxInputs = 7

// fuseewMaxInstrs is the most instructions a program holds: the CPU
// interpreter keeps a scratch row per live intermediate (2 KiB each for
// f32), so 32 rows stay within a core's L1 and L2 caches, and a GPU shader
// generated from a program stays small. Chains that autodiff and the
// optimizer write are far shorter (Adam's update is 7).
const fuseewMaxInstrs = 32

// fuseElementwise fuses elementwise chains, matmul epilogues and reduction
// prologues. It visits the values from last to first, so that a group
// grows from its consumer towards its producers: when a value is visited,
// every user it has has been visited already.
func fuseElementwise(g *ir.Graph) error {
	f := &fuseewState{g: g, users: g.Users(), visible: g.RootMask(), taken: make([]bool, len(g.Values)), target: map[ir.ID]ir.ID{}}
	for _, u := range g.Updates {
		f.target[u.Value] = u.Target
	}
	for id := ir.ID(len(g.Values) - 1); id >= 0; id-- {
		if f.taken[id] {
			continue
		}
		v := &g.Values[id]
		if !v.Type.DType.IsFloat() {
			continue
		}
		var err error
		switch {
		case v.Op == ir.OpSum || v.Op == ir.OpMean || f.softmaxLastAxis(id, false):
			err = f.prologue(id)
		case v.Op.Info().Class == ir.ClassElementwise && f.operandsFit(id, v.Type.DType):
			err = f.chain(id)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fuseewState is the pass's view of the graph.
type fuseewState struct {
	g       *ir.Graph
	users   [][]ir.ID
	visible []bool          // outputs, gradients and updates: needed after the step
	taken   []bool          // a member of a fused group
	target  map[ir.ID]ir.ID // the param or state each update's new value is for
}

// fuseewGroup is a group being grown: the root and the members, and the
// program's inputs in order.
type fuseewGroup struct {
	root    ir.ID
	dt      ir.DType
	n       int            // elements of the root
	members map[ir.ID]bool // root included
	inputs  []ir.ID        // the program's inputs, in order of first use
}

// immediate reports whether value a is a scalar const of dtype dt, which a
// program of dtype dt takes as an immediate.
func (f *fuseewState) immediate(a ir.ID, dt ir.DType) (float64, bool) {
	v := &f.g.Values[a]
	if v.Op != ir.OpConst || v.Type.DType != dt || len(v.Type.Shape) != 0 {
		return 0, false
	}
	val, _ := v.Attrs.Get("value")
	fs, ok := val.AsFloats()
	if !ok || len(fs) != 1 {
		return 0, false
	}
	return fs[0], true
}

// operandsFit reports whether value id and all its operands are dt or bool,
// the values a program of dtype dt holds.
func (f *fuseewState) operandsFit(id ir.ID, dt ir.DType) bool {
	ok := func(d ir.DType) bool { return d == dt || d == ir.Bool }
	v := &f.g.Values[id]
	if !ok(v.Type.DType) {
		return false
	}
	for _, a := range v.Args {
		if !ok(f.g.Values[a].Type.DType) {
			return false
		}
	}
	return true
}

// usedOnlyBy reports whether every user of a is in members.
func (f *fuseewState) usedOnlyBy(a ir.ID, members map[ir.ID]bool) bool {
	for _, u := range f.users[a] {
		if !members[u] {
			return false
		}
	}
	return true
}

// inputsOf returns the group inputs of members: their operands that are
// neither members nor immediates, in order of first use (members in
// definition order, operands in order), with first, when not NoID, placed
// first. Scalar consts are immediates unless every input would be bool: an
// immediate takes its dtype from the first input that is not.
func (f *fuseewState) inputsOf(members map[ir.ID]bool, dt ir.DType, first ir.ID) []ir.ID {
	list := func(fold bool) []ir.ID {
		var in []ir.ID
		seen := map[ir.ID]bool{}
		if first != ir.NoID {
			in, seen[first] = append(in, first), true
		}
		for _, m := range fuseewSorted(members) {
			for _, a := range f.g.Values[m].Args {
				if members[a] || seen[a] {
					continue
				}
				if _, imm := f.immediate(a, dt); imm && fold {
					continue
				}
				seen[a] = true
				in = append(in, a)
			}
		}
		return in
	}
	in := list(true)
	for _, a := range in {
		if f.g.Values[a].Type.DType != ir.Bool {
			return in
		}
	}
	return list(false)
}

// alias reports whether value id is a view a program reads through
// instead of computing: broadcast_to, whose operand the program broadcasts
// to its result anyway, or a reshape of a single element (autodiff's
// gradient of a sum or mean is a scalar reshaped and broadcast).
func (f *fuseewState) alias(id ir.ID) bool {
	v := &f.g.Values[id]
	switch v.Op {
	case ir.OpBroadcastTo:
		return true
	case ir.OpReshape:
		return f.g.Values[v.Args[0]].Type.Shape.NumElements() == 1
	}
	return false
}

// grow returns the group of root: starting from the root, each operand is
// considered from the last defined to the first, so that all its users that
// could join have been decided, and joins when the rules allow. With
// aliases, views (see alias) join too, whatever their size: they cost
// nothing to read through.
func (f *fuseewState) grow(root ir.ID, aliases bool) *fuseewGroup {
	g := f.g
	dt := g.Values[root].Type.DType
	grp := &fuseewGroup{root: root, dt: dt, n: g.Values[root].Type.Shape.NumElements(), members: map[ir.ID]bool{root: true}}
	instrs := 1
	h := &fuseewHeap{}
	queued := map[ir.ID]bool{}
	push := func(id ir.ID) {
		for _, a := range g.Values[id].Args {
			if !queued[a] {
				queued[a] = true
				heap.Push(h, a)
			}
		}
	}
	push(root)
	for h.Len() > 0 {
		a := heap.Pop(h).(ir.ID)
		v := &g.Values[a]
		view := aliases && f.alias(a)
		switch {
		case f.taken[a] || f.visible[a] || !f.operandsFit(a, dt) || !f.usedOnlyBy(a, grp.members):
			continue
		case !view && (v.Op.Info().Class != ir.ClassElementwise || v.Type.Shape.NumElements() != grp.n || instrs >= fuseewMaxInstrs):
			continue
		}
		grp.members[a] = true
		if len(f.inputsOf(grp.members, dt, ir.NoID)) > fuseewMaxInputs {
			delete(grp.members, a)
			continue
		}
		if !view {
			instrs++
		}
		push(a)
	}
	grp.inputs = f.inputsOf(grp.members, dt, ir.NoID)
	return grp
}

// epilogue returns the input of grp that is a matmul only the group reads,
// which the group can take as fused_matmul's product, or a softmax_grad or
// log_softmax_grad over the last axis only the group reads, which it can
// take as fused_softmax_grad's gradient; or NoID. A group that computes an
// update from the old value of its target takes no matmul: fused_matmul
// cannot write its result over an argument, so the planner would have to
// copy the new value in, where fused_elementwise computes it in place.
func (f *fuseewState) epilogue(grp *fuseewGroup) ir.ID {
	t, update := f.target[grp.root]
	ownTarget := update && slices.Contains(grp.inputs, t)
	for _, in := range grp.inputs {
		v := &f.g.Values[in]
		if (v.Op == ir.OpMatmul && !ownTarget || f.softmaxLastAxis(in, true)) && !f.taken[in] && !f.visible[in] && v.Type.DType == grp.dt &&
			v.Type.Shape.NumElements() == grp.n && f.usedOnlyBy(in, grp.members) &&
			len(grp.inputs)+1 <= fuseewMaxInputs {
			return in
		}
	}
	return ir.NoID
}

// chain fuses the group rooted at elementwise value root into
// fused_elementwise or, when one of its inputs is a matmul or a softmax
// gradient that only the group reads (epilogue), into fused_matmul or
// fused_softmax_grad.
func (f *fuseewState) chain(root ir.ID) error {
	g := f.g
	for _, aliases := range []bool{true, false} {
		grp := f.grow(root, aliases)
		mm := f.epilogue(grp)
		inputs := f.inputsOf(grp.members, grp.dt, mm)
		prog, ok := f.program(grp, inputs)
		switch {
		case !ok:
			continue // a view changed a type: try without views
		case mm != ir.NoID && g.Values[mm].Op != ir.OpMatmul:
			return f.softmaxGradEpilogue(root, mm, grp, inputs, prog)
		case mm != ir.NoID:
			from := g.Provenance(append([]ir.ID{mm}, fuseewSorted(grp.members)...)...)
			args := append([]ir.ID{g.Values[mm].Args[0], g.Values[mm].Args[1]}, inputs[1:]...)
			f.taken[mm] = true
			attrs := ir.MakeAttrs(ir.ProgramAttr, prog.Attr(), ir.FromAttr, from)
			for _, a := range g.Values[mm].Attrs { // transpose_a, transpose_b
				attrs = attrs.With(a.Key, a.Value)
			}
			return f.rewrite(root, ir.OpFusedMatmul, attrs, args, grp)
		case len(grp.members) < 2:
			return nil // one op: nothing to save
		}
		from := g.Provenance(fuseewSorted(grp.members)...)
		return f.rewrite(root, ir.OpFusedElementwise, ir.MakeAttrs(ir.ProgramAttr, prog.Attr(), ir.FromAttr, from), inputs, grp)
	}
	return nil
}

// prologue fuses sum, mean, or softmax or log_softmax over the last axis s
// with the elementwise group rooted at its operand, when s is that
// operand's only user, into fused_reduce or fused_softmax.
func (f *fuseewState) prologue(s ir.ID) error {
	g := f.g
	sv := &g.Values[s]
	x := sv.Args[0]
	xv := &g.Values[x]
	if f.taken[x] || f.visible[x] || xv.Op.Info().Class != ir.ClassElementwise || xv.Type.DType != sv.Type.DType ||
		!f.operandsFit(x, xv.Type.DType) || !f.usedOnlyBy(x, map[ir.ID]bool{s: true}) {
		return nil
	}
	for _, aliases := range []bool{true, false} {
		grp := f.grow(x, aliases)
		prog, ok := f.program(grp, grp.inputs)
		if !ok {
			continue
		}
		op, attrs := prologueOp(sv, prog, g.Provenance(append(fuseewSorted(grp.members), s)...))
		return f.rewrite(s, op, attrs, grp.inputs, grp)
	}
	return nil
}

// program writes the group's members, in definition order, as a program
// over inputs; a view is read through (its operand stands for it). ok is
// false unless every instruction has exactly the type of the member it
// computes, which reading through a view can change (an operand broadcast
// only by the view would give a smaller result).
func (f *fuseewState) program(grp *fuseewGroup, inputs []ir.ID) (p ir.EwProgram, ok bool) {
	g := f.g
	index := map[ir.ID]ir.EwOperand{}
	types := make([]ir.Type, len(inputs))
	for i, in := range inputs {
		index[in] = ir.EwOperand{Kind: ir.EwInput, Index: i}
		types[i] = g.Values[in].Type
	}
	operand := func(a ir.ID) ir.EwOperand {
		if op, ok := index[a]; ok {
			return op
		}
		imm, _ := f.immediate(a, grp.dt)
		return ir.EwOperand{Kind: ir.EwImm, Imm: imm}
	}
	var computed []ir.ID
	for _, m := range fuseewSorted(grp.members) {
		v := &g.Values[m]
		if v.Op.Info().Class != ir.ClassElementwise {
			index[m] = operand(v.Args[0]) // a view
			continue
		}
		instr := ir.EwInstr{Op: v.Op, Attrs: v.Attrs}
		for _, a := range v.Args {
			instr.Args = append(instr.Args, operand(a))
		}
		index[m] = ir.EwOperand{Kind: ir.EwTemp, Index: len(p)}
		p = append(p, instr)
		computed = append(computed, m)
	}
	got, err := p.Types(types)
	if err != nil {
		return nil, false
	}
	for k, m := range computed {
		if !got[k].Equal(g.Values[m].Type) {
			return nil, false
		}
	}
	return p, true
}

// rewrite turns value id, in place, into op with attrs over args, and marks
// the group's members taken. The value keeps its id, name and type: the
// fused op computes exactly what the group did.
func (f *fuseewState) rewrite(id ir.ID, op ir.Op, attrs ir.Attrs, args []ir.ID, grp *fuseewGroup) error {
	g := f.g
	t, canon, err := g.Infer(op, attrs, args)
	if err != nil {
		return fmt.Errorf("fusing %s: %v", g.NameOf(id), err)
	}
	if !t.Equal(g.Values[id].Type) {
		return fmt.Errorf("fusing %s: %s gives %s, not %s", g.NameOf(id), op, t, g.Values[id].Type)
	}
	v := &g.Values[id]
	v.Op, v.Args, v.Attrs = op, append([]ir.ID(nil), args...), canon
	for m := range grp.members {
		f.taken[m] = true
	}
	return nil
}

// fuseewSorted returns the ids of set in increasing order.
func fuseewSorted(set map[ir.ID]bool) []ir.ID {
	ids := make([]ir.ID, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// fuseewHeap is a max-heap of ids.
type fuseewHeap []ir.ID

func (h fuseewHeap) Len() int           { return len(h) }
func (h fuseewHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h fuseewHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *fuseewHeap) Push(x any)        { *h = append(*h, x.(ir.ID)) }
func (h *fuseewHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
