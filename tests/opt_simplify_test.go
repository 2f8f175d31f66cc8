package tests

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/planner"
)

// The simplify pass claims that its rewrites keep every result bit for
// bit. These tests hold it to that through the executor: each model is
// compiled at -O0 and at the default level with the same options, both
// plans run the same steps on the same feeds, and after every step every
// output, gradient, param and state must be the same bits in both (a NaN
// matches any NaN: IEEE 754 leaves the sign and payload of a NaN
// unspecified, and the rules do not keep them). The bound is therefore
// zero; no rule changes arithmetic.
//
// Each model runs twice: on random feeds, and on the same feeds with every
// fourth float element replaced in turn by +0, -0, +Inf, -Inf and a tiny
// subnormal-or-normal number, since the rules that would be wrong are wrong
// there (x + (+0) for x = -0, x*0 for x = Inf).

// optSpecials are the values the second run puts into the feeds.
var optSpecials = []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), 1e-40}

// optWithSpecials returns a copy of f with every fourth element of float
// feeds replaced by the specials in turn.
func optWithSpecials(g *ir.Graph, f feeds) feeds {
	out := feeds{}
	for name, vals := range f {
		vals = append([]float64(nil), vals...)
		if id, ok := g.Lookup(name); ok && g.Type(id).DType.IsFloat() {
			for i := 1; i < len(vals); i += 4 {
				vals[i] = optSpecials[(i/4)%len(optSpecials)]
			}
		}
		out[name] = vals
	}
	return out
}

// optLabelRanges gives each integer input a range of values that its users
// accept: the class count for labels, 1 (so index 0) for indices, and 100
// for integers used in arithmetic.
func optLabelRanges(g *ir.Graph) map[string]int {
	users := g.Users()
	ranges := map[string]int{}
	for i, v := range g.Values {
		if v.Op != ir.OpInput || !v.Type.DType.IsInt() {
			continue
		}
		r := 100
		for _, u := range users[i] {
			uv := g.Value(u)
			switch uv.Op {
			case ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpNeg, ir.OpSum:
			case ir.OpOneHot:
				r = min(r, uv.Attrs.Int("classes", 1))
			case ir.OpSoftmaxCrossEntropy, ir.OpNLLLoss:
				s := g.Type(uv.Args[0]).Shape
				r = min(r, s[len(s)-1])
			default:
				r = 1
			}
		}
		ranges[v.Name] = r
	}
	return ranges
}

// optTrainable reports whether g can be trained as it is: a float scalar
// first output and a param.
func optTrainable(g *ir.Graph) bool {
	if len(g.Outputs) == 0 || len(g.Params()) == 0 {
		return false
	}
	t := g.Type(g.Outputs[0])
	return t.DType.IsFloat() && len(t.Shape) == 0
}

// optWithLoss returns g with a new first output, the loss sum over float
// outputs o of sum(o * r.o), r.o a new input, so that the backward graph
// of every output is simplified and compared too.
func optWithLoss(t *testing.T, g *ir.Graph) *ir.Graph {
	t.Helper()
	h := g.Clone()
	e := ir.NewEmitter(h, "loss")
	loss := ir.NoID
	for _, o := range g.Outputs {
		ot := h.Type(o)
		if !ot.DType.IsFloat() {
			continue
		}
		if ot.DType != h.Type(g.Outputs[0]).DType && loss != ir.NoID {
			continue // one dtype per loss
		}
		r, err := h.Leaf(ir.OpInput, h.UniqueName("r."+h.Value(o).Name), ot, nil)
		if err != nil {
			t.Fatal(err)
		}
		term := e.Op(ir.OpSum, ir.MakeAttrs("keepdims", ir.BoolAttr(false)), e.Op(ir.OpMul, nil, o, r))
		if loss == ir.NoID {
			loss = term
		} else {
			loss = e.Add(loss, term)
		}
	}
	if err := e.Err(); err != nil {
		t.Fatal(err)
	}
	if loss == ir.NoID {
		return g
	}
	h.Outputs = append([]ir.ID{loss}, h.Outputs...)
	return h
}

// optModel is one graph of the equivalence tests.
type optModel struct {
	name  string
	g     *ir.Graph
	f     feeds
	train bool // compile the training step (autodiff and Adam)
}

// optStats counts plan steps over all models at each level.
type optStats struct{ o0, opt int }

// optCompare runs m at -O0 and at the default level for two steps on m's
// feeds and then on the feeds with specials, and requires every named
// buffer to agree bit for bit after each step.
func optCompare(t *testing.T, m optModel, st *optStats) {
	t.Helper()
	opts := kiln.Options{}
	if m.train {
		opts.Optimizer = optimizer(t, "adam", 0.01)
	}
	o0 := opts
	o0.O0 = true
	// canonicalize turns nll_loss(log_softmax(x)) into softmax_cross_entropy,
	// which computes the same loss with other rounding: such models are
	// compared within 64 ulps of each tensor's largest element, or 1e-12
	// for tensors near zero (the difference starts at a few ulps of the loss
	// and passes through two Adam steps), and on finite inputs only (with an
	// infinite logit the two forms give inf and NaN); every other model bit
	// for bit.
	canon := optHasNLLOfLogSoftmax(m.g)
	for run, f := range []feeds{m.f, optWithSpecials(m.g, m.f)} {
		if canon && run == 1 {
			break
		}
		ref := newRunner(t, m.g, o0)
		opt := newRunner(t, m.g, opts)
		if run == 0 && st != nil {
			st.o0 += optKernelSteps(ref.x.Plan())
			st.opt += optKernelSteps(opt.x.Plan())
		}
		names := optNames(t, ref.x.Plan(), opt.x.Plan())
		for step := 0; step < 2; step++ {
			ref.set(f)
			opt.set(f)
			// A kernel may refuse a special value (bce_loss outside [0,1]):
			// then both plans must refuse it.
			errRef, errOpt := ref.x.Step(context.Background()), opt.x.Step(context.Background())
			if (errRef == nil) != (errOpt == nil) {
				t.Errorf("%s run %d step %d: -O0 gives error %v, optimized %v", m.name, run, step, errRef, errOpt)
				return
			}
			if errRef != nil {
				break
			}
			for _, n := range names {
				a, b := ref.get(n), opt.get(n)
				if canon {
					if i, ok := optWithinULPs(a, b, 64); !ok {
						t.Errorf("%s run %d step %d: %s[%d] is %v at -O0 and %v optimized (beyond 64 ulps of the largest element)", m.name, run, step, n, i, a[i], b[i])
						return
					}
					continue
				}
				if i, ok := optSameBits(a, b); !ok {
					t.Errorf("%s run %d step %d: %s[%d] is %v at -O0 and %v optimized", m.name, run, step, n, i, a[i], b[i])
					return
				}
			}
		}
	}
}

// optKernelSteps counts the kernel steps of a plan (not the update copies).
func optKernelSteps(p *planner.Plan) int {
	n := 0
	for _, s := range p.Steps {
		if s.Kind == planner.Kernel {
			n++
		}
	}
	return n
}

// optNames returns the names of every output, gradient, param and state of
// plan a, which b must have too.
func optNames(t *testing.T, a, b *planner.Plan) []string {
	t.Helper()
	names := func(p *planner.Plan) []string {
		var ns []string
		for _, n := range append(append([]planner.Named(nil), p.Outputs...), p.Grads...) {
			ns = append(ns, n.Name)
		}
		for _, i := range append(append([]int(nil), p.Params...), p.States...) {
			ns = append(ns, p.Buffers[i].Name)
		}
		sort.Strings(ns)
		return ns
	}
	na, nb := names(a), names(b)
	if strings.Join(na, " ") != strings.Join(nb, " ") {
		t.Fatalf("the plans name different buffers:\n-O0: %v\nopt: %v", na, nb)
	}
	return na
}

// optSameBits reports whether a and b hold the same bits, NaN matching any
// NaN, and else the first index where they differ.
func optSameBits(a, b []float64) (int, bool) {
	if len(a) != len(b) {
		return 0, false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			return i, false
		}
	}
	return 0, true
}

// optParseFile parses a .kir file.
func optParseFile(t *testing.T, file string) *ir.Graph {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	g, err := ir.Parse(file, src)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// optFileModel makes a model of a .kir file: trained when it can be,
// given a loss when it cannot, run as it is when it already holds
// gradients or updates.
func optFileModel(t *testing.T, file string) optModel {
	g := optParseFile(t, file)
	m := optModel{name: file, g: g}
	switch {
	case len(g.Grads) > 0 || len(g.Updates) > 0:
	case optTrainable(g):
		m.train = true
	case len(g.Params()) > 0:
		m.g = optWithLoss(t, g)
		m.train = optTrainable(m.g)
	}
	m.f = randomFeeds(m.g, 5, nil, optLabelRanges(m.g))
	return m
}

// TestSimplifyBitwiseOnModels: the digits MLP, the PyTorch reference
// models (a CNN, KAN and logic gates, losses, reductions and movement), the
// CNN of the training tests and every golden graph of passes/testdata,
// trained with Adam where they have a loss.
func TestSimplifyBitwiseOnModels(t *testing.T) {
	var st optStats
	var models []optModel
	models = append(models, optFileModel(t, "../examples/digits/mlp.kir"))
	pytorch, _ := filepath.Glob("testdata/pytorch/*.kir")
	golden, _ := filepath.Glob("../passes/testdata/simplify/*.kir")
	if len(pytorch) == 0 || len(golden) == 0 {
		t.Fatal("missing testdata")
	}
	for _, file := range pytorch {
		m := optFileModel(t, file)
		// The reference inputs are in the domains of the ops (log of a
		// positive number, valid indices).
		ts, _, err := safetensors.ReadFile(strings.TrimSuffix(file, ".kir") + ".inputs.safetensors")
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range ts {
			if _, ok := m.f[tn.Name]; ok {
				m.f[tn.Name] = tn.Float64s()
			}
		}
		models = append(models, m)
	}
	for _, file := range golden {
		models = append(models, optFileModel(t, file))
	}
	cnn := nnDigitsCNN(t, 4)
	models = append(models, optModel{name: "digits CNN", g: cnn, train: true, f: randomFeeds(cnn, 5, nil, map[string]int{"y": 10})})
	for _, m := range models {
		t.Run(filepath.Base(m.name), func(t *testing.T) { optCompare(t, m, &st) })
	}
	t.Logf("kernel steps over %d models: %d at -O0, %d optimized", len(models), st.o0, st.opt)
}

// TestSimplifyBitwiseOnGradientCases: every case of the gradient tests
// (each differentiable op, in f32 and f64), trained with Adam, and the
// Hessian-vector-product graphs, whose backward is differentiated again.
func TestSimplifyBitwiseOnGradientCases(t *testing.T) {
	var st optStats
	for _, c := range gradCases {
		t.Run(c.name, func(t *testing.T) {
			for _, dt := range []ir.DType{ir.F64, ir.F32} {
				g := buildLoss(t, c, dt)
				optCompare(t, optModel{name: c.name + " " + dt.String(), g: g, train: true, f: randomFeeds(g, 1, c.kinds, c.labels)}, &st)
			}
		})
	}
	for _, c := range hvpCases {
		t.Run("hvp "+c.name, func(t *testing.T) {
			b := frontends.NewBuilder("hvp")
			b.Output(c.build(b))
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			h := hvpGraph(t, g)
			labels := map[string]int{}
			for k, v := range c.labels {
				labels[k] = v
			}
			optCompare(t, optModel{name: "hvp " + c.name, g: h, train: true, f: randomFeeds(h, 11, c.kinds, labels)}, &st)
		})
	}
	t.Logf("kernel steps over the gradient cases: %d at -O0, %d optimized", st.o0, st.opt)
}

// optHasNLLOfLogSoftmax reports whether g computes nll_loss of a
// log_softmax, which the canonicalize pass rewrites.
func optHasNLLOfLogSoftmax(g *ir.Graph) bool {
	for _, v := range g.Values {
		if v.Op == ir.OpNLLLoss && g.Value(v.Args[0]).Op == ir.OpLogSoftmax {
			return true
		}
	}
	return false
}

// optWithinULPs reports whether a and b agree within ulps units in the last
// place (float32) of their largest magnitude, or 1e-12, and the first index
// where they do not.
func optWithinULPs(a, b []float64, ulps float64) (int, bool) {
	big := 0.0
	for _, x := range a {
		big = math.Max(big, math.Abs(x))
	}
	tol := math.Max(1e-12, ulps*float64(math.Nextafter32(float32(big), float32(math.Inf(1)))-float32(big)))
	for i := range a {
		if math.IsNaN(a[i]) != math.IsNaN(b[i]) || math.Abs(a[i]-b[i]) > tol {
			return i, false
		}
	}
	return 0, true
}
