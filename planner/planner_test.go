package planner_test

import (
	"github.com/kilnml/kiln/internal/golden"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

const mlpSrc = `graph mlp
input %x: f32[32,20]
input %y: i64[32]
param %w1: f32[20,16]
param %b1: f32[16]
param %w2: f32[16,10]
%h = matmul %x, %w1
%a = add %h, %b1
%r = relu %a
%z = matmul %r, %w2
%loss = softmax_cross_entropy %z, %y
output %loss
`

func compile(t *testing.T, src string, opts kiln.Options) *planner.Plan {
	t.Helper()
	g, err := ir.Parse("t.kir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	opts.Debug.Check = true
	p, err := kiln.Compile(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return p
}

func TestPlansCheckAndReport(t *testing.T) {
	adam, _ := passes.DefaultOptimizer("adam")
	for name, opts := range map[string]kiln.Options{
		"forward": {},
		"grad":    {Grad: true},
		"train":   {Optimizer: &adam},
	} {
		t.Run(name, func(t *testing.T) {
			p := compile(t, mlpSrc, opts)
			if p.ArenaBytes < p.LowerBound {
				t.Errorf("arena %d below the lower bound %d: the bound or the placement is wrong", p.ArenaBytes, p.LowerBound)
			}
			var sum int64
			for _, b := range p.Buffers {
				sum += (b.Size + planner.Align - 1) / planner.Align * planner.Align
			}
			if p.ArenaBytes > sum {
				t.Errorf("arena %d exceeds the sum of all buffers %d", p.ArenaBytes, sum)
			}
			t.Logf("%s: arena %d, lower bound %d, ratio %.3f, no reuse %d", name, p.ArenaBytes, p.LowerBound, float64(p.ArenaBytes)/float64(p.LowerBound), sum)
		})
	}
}

// TestGoldenPlan pins the plan of the MLP's training step (go test
// ./planner -update rewrites it).
func TestGoldenPlan(t *testing.T) {
	sgd, _ := passes.DefaultOptimizer("sgd")
	got := compile(t, mlpSrc, kiln.Options{Optimizer: &sgd, O0: true}).Format() // the planner alone, whatever the optimizing passes do
	const goldenPath = "testdata/mlp_sgd.plan"
	golden.Check(t, goldenPath, []byte(got))
}

func TestLiveness(t *testing.T) {
	p := compile(t, `graph chain
input %x: f32[8]
%a = exp %x
%b = neg %a
%c = tanh %b
%d = add %c, %a
output %d
`, kiln.Options{O0: true}) // unfused, so each op is a step
	live := map[string][2]int{}
	for _, b := range p.Buffers {
		live[b.Name] = [2]int{b.Start, b.End}
	}
	want := map[string][2]int{"x": {0, 3}, "a": {0, 3}, "b": {1, 2}, "c": {2, 3}, "d": {3, 3}}
	if d := cmp.Diff(want, live); d != "" {
		t.Errorf("live ranges (-want +got):\n%s", d)
	}
	// c takes b's memory (b dies at tanh); d takes c's (the first argument
	// that dies at add; a dies there too). a is read after neg, so b
	// cannot take it; x is an input.
	inPlace := map[string]string{}
	for _, b := range p.Buffers {
		if b.Alias >= 0 {
			inPlace[b.Name] = p.Buffers[b.Alias].Name
		}
	}
	if d := cmp.Diff(map[string]string{"c": "b", "d": "c"}, inPlace); d != "" {
		t.Errorf("in place (-want +got):\n%s", d)
	}
	if p.Buffers[2].Offset != p.Buffers[3].Offset || p.Buffers[3].Offset != p.Buffers[4].Offset {
		t.Errorf("b, c and d at offsets %d, %d, %d: want one", p.Buffers[2].Offset, p.Buffers[3].Offset, p.Buffers[4].Offset)
	}
}

// TestInPlaceOnlyWhereSafe: no result takes the memory of an output, of a
// value read later, of a value of another type, or of an argument of an op
// that is not elementwise. Here only d may: b dies at sub. Not b (softmax
// is not elementwise, though a dies there), not c (a reduction, another
// shape), not e (d is read after neg), not f (bool, and e is an output).
func TestInPlaceOnlyWhereSafe(t *testing.T) {
	p := compile(t, `graph g
input %x: f32[4,8]
%a = exp %x
%b = softmax %a
%c = sum %b {axes=[1], keepdims=true}
%d = sub %b, %c
%e = neg %d
%f = greater %e, %d
output %e, %f
`, kiln.Options{})
	inPlace := map[string]string{}
	for _, b := range p.Buffers {
		if b.Alias >= 0 {
			inPlace[b.Name] = p.Buffers[b.Alias].Name
		}
	}
	if d := cmp.Diff(map[string]string{"d": "b"}, inPlace); d != "" {
		t.Errorf("in place (-want +got):\n%s\n%s", d, p.Format())
	}
	q := compile(t, mlpSrc, kiln.Options{Grad: true, Plan: planner.Options{NoInPlace: true}})
	for _, b := range q.Buffers {
		if b.Alias >= 0 {
			t.Errorf("NoInPlace: %%%s takes %%%s in place", b.Name, q.Buffers[b.Alias].Name)
		}
	}
}

// TestReshapeInPlace: a reshape's result takes the memory of an argument
// that dies there, whatever their shapes, and not of one read later or of
// an input. Here b takes a (a dies at the reshape) and c takes b (neg);
// d may not take c, which sum reads after it, and g may not take the
// input x.
func TestReshapeInPlace(t *testing.T) {
	p := compile(t, `graph g
input %x: f32[4,8]
%a = exp %x
%b = reshape %a {shape=[32]}
%c = neg %b
%d = reshape %c {shape=[8,4]}
%e = exp %d
%f = sum %c
%g = reshape %x {shape=[2,16]}
output %e, %f, %g
`, kiln.Options{})
	inPlace := map[string]string{}
	for _, b := range p.Buffers {
		if b.Alias >= 0 {
			inPlace[b.Name] = p.Buffers[b.Alias].Name
		}
	}
	if d := cmp.Diff(map[string]string{"b": "a", "c": "b", "e": "d"}, inPlace); d != "" {
		t.Errorf("in place (-want +got):\n%s\n%s", d, p.Format())
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	// A reshape may take memory of its dtype and size only (the graph,
	// which would say that b is not i32, is left out).
	i := slices.IndexFunc(p.Buffers, func(b planner.Buffer) bool { return b.Name == "b" })
	p.Buffers[i].Type = ir.TensorOf(ir.I32, 32)
	p.Graph = nil
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "the types differ") {
		t.Errorf("Check of a reshape into another dtype's memory = %v, want the types differ", err)
	}
}

// TestInPlaceFromCheck: in an SGD softmax step, fused_softmax_grad
// computes the new %w in %w's memory (an epilogue input, which
// OpInfo.InPlaceFrom lets it write over); Check refuses the same result
// over %y, an argument it reads whole rows of (not from InPlaceFrom on).
func TestInPlaceFromCheck(t *testing.T) {
	sgd, err := passes.DefaultOptimizer("sgd")
	if err != nil {
		t.Fatal(err)
	}
	p := compile(t, `graph step
input %x: f32[8,16]
input %t: f32[8,16]
param %w: f32[8,16]
%z = mul %x, %w
%y = softmax %z
%p = mul %y, %t
%loss = sum %p
output %loss
`, kiln.Options{Optimizer: &sgd})
	idx := func(name string) int {
		return slices.IndexFunc(p.Buffers, func(b planner.Buffer) bool { return b.Name == name })
	}
	u := -1
	for _, st := range p.Steps {
		if st.Kind == planner.Kernel && st.Op == ir.OpFusedSoftmaxGrad {
			u = st.Out
		}
	}
	if u < 0 || p.Buffers[u].Alias != idx("w") {
		t.Fatalf("the update is not computed in %%w's memory by fused_softmax_grad:\n%s", p.Format())
	}
	// Over %y instead (the graph, which would miss the update's copy, is
	// left out).
	y := idx("y")
	p.Buffers[u].Alias, p.Buffers[u].Offset = y, p.Buffers[y].Offset
	p.Graph = nil
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "fused_softmax_grad reads %y as an argument it cannot write its result over") {
		t.Errorf("Check of fused_softmax_grad's result over %%y = %v, want it refused", err)
	}
}

// TestCheckCatchesBrokenPlans mutates a good plan and expects Check to say
// what is wrong.
func TestCheckCatchesBrokenPlans(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *planner.Plan)
		want   string
	}{
		{"overlap", func(p *planner.Plan) {
			// Put every buffer at offset 0.
			for i := range p.Buffers {
				p.Buffers[i].Offset = 0
			}
		}, "overlap while both are live"},
		{"misaligned", func(p *planner.Plan) { p.Buffers[0].Offset += 4 }, "is not a multiple of 256"},
		{"outside", func(p *planner.Plan) { p.ArenaBytes = 16 }, "lie outside the arena"},
		{"arena too large", func(p *planner.Plan) { p.ArenaBytes += planner.Align }, "but its buffers end at"},
		{"read before write", func(p *planner.Plan) {
			p.Steps[0], p.Steps[1] = p.Steps[1], p.Steps[0]
		}, "before any step writes it"},
	}
	aliased := func(p *planner.Plan) (b, a *planner.Buffer) {
		for i := range p.Buffers {
			if p.Buffers[i].Alias >= 0 {
				return &p.Buffers[i], &p.Buffers[p.Buffers[i].Alias]
			}
		}
		panic("no buffer in place")
	}
	index := func(p *planner.Plan, name string) int {
		for i, b := range p.Buffers {
			if b.Name == name {
				return i
			}
		}
		panic(name)
	}
	tests = append(tests, []struct {
		name   string
		mutate func(p *planner.Plan)
		want   string
	}{
		{"alias moved", func(p *planner.Plan) {
			b, _ := aliased(p)
			b.Offset = p.ArenaBytes - 2048 - 2048 // aligned, inside
		}, "in place but lies at offset"},
		{"alias read later", func(p *planner.Plan) {
			_, a := aliased(p)
			a.End++
		}, "is live until step"},
		{"alias of a param", func(p *planner.Plan) {
			b, _ := aliased(p)
			b.Alias = p.Params[0]
		}, "only a computed buffer can take the memory"},
		{"alias of another type", func(p *planner.Plan) {
			i := index(p, "z") // f32[32,10], computed from r: f32[32,16]
			p.Buffers[i].Alias = index(p, "r")
			p.Buffers[i].Offset = p.Buffers[index(p, "r")].Offset
		}, "the types differ"},
		{"alias by matmul", func(p *planner.Plan) {
			// %h = matmul %x, %w1: give h the memory of a buffer of its
			// type that the step does not read.
			i := index(p, "h")
			for j, b := range p.Buffers {
				if j != i && b.Type.Equal(p.Buffers[i].Type) && b.Role == planner.Temp && b.Alias < 0 {
					p.Buffers[i].Alias = j
					p.Buffers[i].Offset = b.Offset
					return
				}
			}
		}, "matmul cannot write its result over an argument"},
		{"taken twice", func(p *planner.Plan) {
			b, a := aliased(p)
			for i := range p.Buffers {
				if c := &p.Buffers[i]; c != b && c.Alias < 0 && c.Type.Equal(a.Type) && c.Role == planner.Temp && c != a {
					c.Alias = b.Alias
					return
				}
			}
		}, "is taken in place by both"},
		{"alias out of range", func(p *planner.Plan) { p.Buffers[5].Alias = len(p.Buffers) }, "is not another buffer's index"},
		{"lower bound", func(p *planner.Plan) { p.LowerBound -= planner.Align }, "the live ranges give"},
		{"output dies early", func(p *planner.Plan) { p.Buffers[p.Outputs[0].Buffer].End-- }, "an output or gradient, but live only until"},
		{"param live late", func(p *planner.Plan) { p.Buffers[p.Params[0]].Start = 1 }, "inputs, params and state live at every step"},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// At -O0 the relu and the elementwise backward stay unfused, so
			// the plan has results computed in place to break.
			p := compile(t, mlpSrc, kiln.Options{Grad: true, O0: true})
			tc.mutate(p)
			err := p.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestUpdateReadingUpdatedValueIsRefused(t *testing.T) {
	g, err := ir.Parse("t.kir", []byte(`graph g
state %a: f32[2]
state %b: f32[2]
%c = exp %a
output %c
update %a = %b
update %b = %c
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = planner.New(g, planner.Options{})
	if err == nil || !strings.Contains(err.Error(), "itself updated") {
		t.Errorf("got %v", err)
	}
}

// TestDirectUpdates checks that an update whose new value is computed by
// an elementwise step that reads its param or state last is computed in
// the target's memory, with no copy step (SGD and Adam on the MLP), that
// one whose target is read after its new value is computed keeps its copy,
// and that Check refuses a step reading the target after such a value.
func TestDirectUpdates(t *testing.T) {
	for _, kind := range []string{"sgd", "adam"} {
		opt, err := passes.DefaultOptimizer(kind)
		if err != nil {
			t.Fatal(err)
		}
		p := compile(t, mlpSrc, kiln.Options{Optimizer: &opt})
		for _, st := range p.Steps {
			if st.Kind == planner.Copy {
				t.Errorf("%s: copy %%%s <- %%%s, want every update computed in place", kind, p.Buffers[st.Out].Name, p.Buffers[st.Args[0]].Name)
			}
		}
		for _, u := range p.Graph.Updates {
			if b := p.Buffers[u.Value]; b.Alias != int(u.Target) || b.Offset != p.Buffers[u.Target].Offset {
				t.Errorf("%s: %%%s (alias %d, offset %d) is not computed in the memory of %%%s (%d, offset %d)",
					kind, b.Name, b.Alias, b.Offset, p.Buffers[u.Target].Name, u.Target, p.Buffers[u.Target].Offset)
			}
		}
		if kind != "sgd" {
			continue
		}
		// A later step reads the param the update overwrote.
		q := compile(t, mlpSrc, kiln.Options{Optimizer: &opt})
		u := q.Graph.Updates[0] // the update computed first
		for _, v := range q.Graph.Updates {
			if q.Buffers[v.Value].Start < q.Buffers[u.Value].Start {
				u = v
			}
		}
		// The graph's value reads it too, so that the step still computes
		// what the graph says.
		last := &q.Steps[len(q.Steps)-1]
		last.Args = append(last.Args, int(u.Target))
		v := q.Graph.Value(ir.ID(last.Out))
		v.Args = append(v.Args, u.Target)
		if err := q.Check(); err == nil || !strings.Contains(err.Error(), "still reads or writes") {
			t.Errorf("Check() = %v, want an error about the target read after its new value", err)
		}
	}

	// %o reads %s after %n, its new value, is computed (and reads %n): %n
	// cannot be computed into %s, and the update stays a copy after %o.
	p := compile(t, `graph g
input %x: f32[4]
state %s: f32[4]
%n = add %s, %x
%o = mul %s, %n
output %o
update %s = %n
`, kiln.Options{})
	var steps []string
	for _, st := range p.Steps {
		if st.Kind == planner.Copy {
			steps = append(steps, "copy "+p.Buffers[st.Out].Name)
		} else {
			steps = append(steps, p.Buffers[st.Out].Name)
		}
	}
	if d := cmp.Diff([]string{"n", "o", "copy s"}, steps); d != "" {
		t.Errorf("steps (-want +got):\n%s\n%s", d, p.Format())
	}
	for _, b := range p.Buffers {
		if b.Alias >= 0 && p.Buffers[b.Alias].Role != planner.Temp {
			t.Errorf("%%%s takes %%%s in place", b.Name, p.Buffers[b.Alias].Name)
		}
	}

	// Without its graph, Check still refuses a copy that reads no buffer
	// or one of another type.
	p.Graph = nil
	last := &p.Steps[len(p.Steps)-1]
	for _, args := range [][]int{nil, {last.Args[0], last.Args[0]}} {
		last.Args = args
		if err := p.Check(); err == nil || !strings.Contains(err.Error(), "must read one buffer of that type") {
			t.Errorf("a copy reading %v: Check() = %v", args, err)
		}
	}
}
