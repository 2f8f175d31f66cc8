package tests

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/planner"
)

// ckptMLP is a 6-layer relu MLP with a softmax cross-entropy loss.
func ckptMLP(t *testing.T) *ir.Graph {
	b := frontends.NewBuilder("mlp6")
	x := b.Input("x", ir.F32, 64, 24)
	y := b.Input("y", ir.I64, 64)
	h := x
	for i := range 6 {
		h = b.Add(b.Matmul(h, b.Param(fmt.Sprintf("w%d", i), ir.F32, h.Type().Shape[1], 24)), b.Param(fmt.Sprintf("b%d", i), ir.F32, 24))
		if i < 5 {
			h = b.Relu(h)
		}
	}
	b.Output(b.SoftmaxCrossEntropy(h, y), h)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// ckptDropoutMLP is an 8-layer tanh MLP with dropout after every hidden
// layer: deep enough for multi-level recomputation at its least peak, so
// each dropout mask is recomputed more than once.
func ckptDropoutMLP(t *testing.T) *ir.Graph {
	b := frontends.NewBuilder("dropout_mlp8")
	x := b.Input("x", ir.F32, 32, 16)
	y := b.Input("y", ir.I64, 32)
	h := x
	for i := range 8 {
		h = b.Add(b.Matmul(h, b.Param(fmt.Sprintf("w%d", i), ir.F32, 16, 16)), b.Param(fmt.Sprintf("b%d", i), ir.F32, 16))
		if i < 7 {
			h = b.Dropout(b.Tanh(h), 0.2, i+1)
		}
	}
	b.Output(b.SoftmaxCrossEntropy(h, y))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// ckptKANLogic is a Kolmogorov-Arnold layer (B-spline bases and a linear
// map) feeding difflogic gates, then a linear read-out with an MSE loss.
func ckptKANLogic(t *testing.T) *ir.Graph {
	b := frontends.NewBuilder("kan_logic")
	x := b.Input("x", ir.F32, 32, 4)
	y := b.Input("y", ir.F32, 32, 1)
	bs := b.Reshape(b.BSpline(b.Tanh(b.Matmul(x, b.Param("w0", ir.F32, 4, 4))), -1, 1, 5, 3), 32, 32)
	h := b.Sigmoid(b.Matmul(bs, b.Param("wk", ir.F32, 32, 8)))
	g2 := b.Sigmoid(b.Matmul(h, b.Param("wg", ir.F32, 8, 8)))
	gate := b.LogicGate(h, g2, b.ParamInit("logits", ir.F32, []int{8, 16}, "normal", 1))
	out := b.Matmul(b.Tanh(gate), b.Param("wo", ir.F32, 8, 1))
	b.Output(b.MSELoss(out, y))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// ckptSkip is a tanh MLP whose first hidden layer also feeds the loss (a
// long skip connection), so that nothing between is a cut vertex of the
// chain and the budget mode's greedy solver decides.
func ckptSkip(t *testing.T) *ir.Graph {
	b := frontends.NewBuilder("skip")
	x := b.Input("x", ir.F32, 64, 16)
	y := b.Input("y", ir.F32, 64, 16)
	first := b.Tanh(b.Matmul(x, b.Param("w0", ir.F32, 16, 16)))
	h := first
	for i := 1; i < 6; i++ {
		h = b.Tanh(b.Matmul(h, b.Param(fmt.Sprintf("w%d", i), ir.F32, 16, 16)))
	}
	b.Output(b.MSELoss(b.Add(h, first), y))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// leastPeak returns the least arena recomputation reaches for g under
// opts, read from the error of an impossible budget.
func leastPeak(t testing.TB, g *ir.Graph, opts kiln.Options) int64 {
	t.Helper()
	opts.MemoryBudget = 1
	_, err := kiln.Compile(g, opts)
	var least int64
	if err == nil {
		t.Fatal("a budget of 1 byte was met")
	}
	i := strings.Index(err.Error(), "reaches: ")
	if i < 0 {
		t.Fatalf("no least peak in %v", err)
	}
	fmt.Sscanf(err.Error()[i+len("reaches: "):], "%d", &least)
	return least
}

// TestRecomputeBitwise trains each graph for a few Adam steps with and
// without recomputation (√n, two segments, a memory budget halfway between
// the least peak and keeping everything, the least peak itself, which on
// the MLPs takes multi-level recomputation, values cloned more than once,
// and manual marks on every forward value) and checks every
// gradient and every updated param bit for bit after every step. (On the small KAN graph, whose saved activations are
// nearly all cut vertices, and the skip-connection graph, √n and two
// segments may find nothing to recompute.)
func TestRecomputeBitwise(t *testing.T) {
	cases := []struct {
		name   string
		g      *ir.Graph
		labels map[string]int
		chain  bool // √n and two segments must recompute something
		multi  bool // the least peak recomputes some value more than once
	}{
		{"mlp", ckptMLP(t), map[string]int{"y": 24}, true, true},
		{"dropout mlp", ckptDropoutMLP(t), map[string]int{"y": 16}, true, true},
		{"cnn", nnDigitsCNN(t, 16), map[string]int{"y": 10}, true, false},
		{"kan logic", ckptKANLogic(t), nil, false, false},
		{"skip", ckptSkip(t), nil, false, false},
		{"transformer", tfmReverse(t, 4, 8, tfmSmallOptions()), map[string]int{"x": 10, "y": 10}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			adam := optimizer(t, "adam", 0.01)
			base := kiln.Options{Optimizer: adam, Checkpoint: "none"}
			keep, err := kiln.Compile(tc.g, base)
			if err != nil {
				t.Fatal(err)
			}
			least := leastPeak(t, tc.g, kiln.Options{Optimizer: adam})
			marked := tc.g.Clone()
			for i, v := range marked.Values {
				if !v.Op.IsLeaf() && !contains(marked.Outputs, ir.ID(i)) {
					marked.MarkRecompute(ir.ID(i))
				}
			}
			variants := []struct {
				name string
				g    *ir.Graph
				opts kiln.Options
			}{
				{"sqrt", tc.g, kiln.Options{Checkpoint: "sqrt"}},
				{"segments=2", tc.g, kiln.Options{Checkpoint: "segments=2"}},
				{"budget", tc.g, kiln.Options{MemoryBudget: (least + keep.ArenaBytes) / 2}},
				{"least peak", tc.g, kiln.Options{MemoryBudget: least}},
				{"manual", marked, kiln.Options{}},
			}
			f := randomFeeds(tc.g, 3, nil, tc.labels)
			ref := newRunner(t, tc.g, base)
			runs := make([]*runner, len(variants))
			for i, v := range variants {
				var r *checkpoint.Report
				v.opts.Optimizer = adam
				v.opts.OnCheckpoint = func(x *checkpoint.Report) {
					if r == nil {
						r = x
					}
				}
				runs[i] = newRunner(t, v.g, v.opts)
				clones := countClones(runs[i].x.Plan())
				again := countRecloned(runs[i].x.Plan())
				t.Logf("%s: %d clones (%d of values already cloned), arena %d (keep all %d, least %d)", v.name, clones, again, runs[i].x.Plan().ArenaBytes, keep.ArenaBytes, least)
				// At the least peak something is recomputed, unless keeping
				// every activation already takes no more (then Compile
				// keeps them all, as it does for the budget halfway).
				if clones == 0 && (v.name == "manual" || tc.chain && v.name == "sqrt" || tc.chain && v.name == "segments=2" ||
					tc.chain && v.name == "least peak" && least < keep.ArenaBytes) {
					t.Errorf("%s: nothing recomputed", v.name)
				}
				if again == 0 && tc.multi && v.name == "least peak" && least < keep.ArenaBytes {
					t.Errorf("%s: no value recomputed more than once (multi-level)", v.name)
				}
				if runs[i].x.Plan().ArenaBytes > least && v.name == "least peak" {
					t.Errorf("%s: arena %d above the least peak %d", v.name, runs[i].x.Plan().ArenaBytes, least)
				}
				if r != nil && clones != r.Clones {
					t.Errorf("%s: the report counts %d clones, the plan has %d", v.name, r.Clones, clones)
				}
			}
			for step := 1; step <= 3; step++ {
				ref.run(f)
				for i, r := range runs {
					r.run(f)
					p := ref.x.Plan()
					var names []string
					for _, g := range p.Grads {
						names = append(names, g.Name)
					}
					for _, b := range p.Params {
						names = append(names, p.Buffers[b].Name)
					}
					for _, n := range append(names, p.Outputs[0].Name) {
						a, _ := ref.x.Get(n)
						b, err := r.x.Get(n)
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(a.Data, b.Data) {
							t.Errorf("step %d, %s: %s differs from the plan without recomputation", step, variants[i].name, n)
						}
					}
				}
			}
		})
	}
}

func contains(ids []ir.ID, id ir.ID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// countRecloned counts the plan's second and later clones of a value
// (named NAME.remat2, NAME.remat3, ...: multi-level recomputation).
func countRecloned(p *planner.Plan) int {
	n := 0
	for _, b := range p.Buffers {
		if i := strings.LastIndex(b.Name, ".remat"); i >= 0 && len(b.Name) > i+len(".remat") {
			n++
		}
	}
	return n
}

// countClones counts the plan's recomputed values (named NAME.remat).
func countClones(p *planner.Plan) int {
	n := 0
	for _, b := range p.Buffers {
		if strings.Contains(b.Name, ".remat") {
			n++
		}
	}
	return n
}
