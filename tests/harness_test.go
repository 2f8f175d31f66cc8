// Package tests holds kiln's end-to-end tests: graphs built with the Go
// builder or parsed from .kir, compiled by the whole pipeline, planned and
// run by the CPU executor, and checked against independent computations.
package tests

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
)

// valueKind says how random test values are drawn.
type valueKind int

const (
	anySign  valueKind = iota // uniform magnitude in [0.1, 1], random sign
	positive                  // uniform in [0.5, 1.5], for log, sqrt and divisors
)

// feeds holds the values of every input and param, by name, as float64.
type feeds map[string][]float64

// randomFeeds draws values for every input and param of g. Integer inputs
// get labels in [0, classes) where classes is the size of their logits'
// last axis, passed in labelRange by name.
func randomFeeds(g *ir.Graph, seed uint64, kinds map[string]valueKind, labelRange map[string]int) feeds {
	rng := rand.New(rand.NewPCG(seed, 7))
	f := feeds{}
	for i, v := range g.Values {
		if v.Op != ir.OpInput && v.Op != ir.OpParam {
			continue
		}
		n := g.Values[i].Type.Shape.NumElements()
		vals := make([]float64, n)
		for j := range vals {
			switch {
			case v.Type.DType.IsInt():
				vals[j] = float64(rng.IntN(max(labelRange[v.Name], 1)))
			case kinds[v.Name] == positive:
				vals[j] = 0.5 + rng.Float64()
			default:
				vals[j] = 0.1 + 0.9*rng.Float64()
				if rng.IntN(2) == 0 {
					vals[j] = -vals[j]
				}
			}
		}
		f[v.Name] = vals
	}
	return f
}

// runner runs a compiled plan on feeds.
type runner struct {
	t *testing.T
	x *cpu.Executor
}

func newRunner(t *testing.T, g *ir.Graph, opts kiln.Options) *runner {
	t.Helper()
	return newRunnerWorkers(t, g, opts, 0)
}

// newRunnerWorkers is newRunner on workers goroutines (0: the default).
func newRunnerWorkers(t *testing.T, g *ir.Graph, opts kiln.Options, workers int) *runner {
	t.Helper()
	opts.Debug.Check = true
	p, err := kiln.Compile(g, opts)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	if err := p.Check(); err != nil {
		t.Fatalf("plan check: %v", err)
	}
	x, err := cpu.New(p, cpu.Options{Workers: workers})
	if err != nil {
		t.Fatalf("executor: %v", err)
	}
	return &runner{t, x}
}

func (r *runner) set(f feeds) {
	r.t.Helper()
	for name, vals := range f {
		tn, err := r.x.Get(name)
		if err != nil {
			r.t.Fatal(err)
		}
		if err := kernels.SetFloat64s(tn, vals); err != nil {
			r.t.Fatalf("%s: %v", name, err)
		}
	}
}

func (r *runner) run(f feeds) {
	r.t.Helper()
	r.set(f)
	if err := r.x.Step(context.Background()); err != nil {
		r.t.Fatalf("step: %v", err)
	}
}

func (r *runner) get(name string) []float64 {
	r.t.Helper()
	tn, err := r.x.Get(name)
	if err != nil {
		r.t.Fatal(err)
	}
	return kernels.Float64s(tn)
}

// tolerance is |analytic - numeric| <= atol + rtol*|numeric|.
type tolerance struct{ rtol, atol float64 }

// f64Tol is DESIGN.md's float64 bound against central differences.
var f64Tol = tolerance{rtol: 1e-7, atol: 1e-10}

// f32Tol is DESIGN.md's float32 bound: f32 analytic gradients against f64
// central differences of the same graph.
var f32Tol = tolerance{rtol: 1e-4, atol: 1e-7}

// checkGrads compares the analytic gradient of every param of g, computed
// in g's own dtype, with central differences of the f64 version of g
// (kiln.GradCheck) and reports the worst element of each param. A skipped
// element (the loss not smooth near it) fails too: a test must choose
// points where the reference exists.
func checkGrads(t *testing.T, g *ir.Graph, f feeds, tol tolerance) {
	t.Helper()
	checkGradsStep(t, g, f, tol, 0)
}

// checkGradsStep is checkGrads with the central differences' step h (0:
// GradCheck's default, 1e-3).
func checkGradsStep(t *testing.T, g *ir.Graph, f feeds, tol tolerance, h float64) {
	t.Helper()
	res, err := kiln.GradCheck(g, f, kiln.GradCheckOptions{RTol: tol.rtol, ATol: tol.atol, Native: true, Step: h})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !r.OK() || r.Skipped > 0 {
			t.Errorf("grad/%s[%d]: analytic %.12g, numeric %.12g (bound %g + %g*|numeric|; %d elements not smooth)", r.Param, r.Index, r.Analytic, r.Numeric, tol.atol, tol.rtol, r.Skipped)
		}
	}
}

// optimizer returns the named optimizer's defaults with lr.
func optimizer(t testing.TB, kind string, lr float64) *passes.OptimizerConfig {
	c, err := passes.DefaultOptimizer(kind)
	if err != nil {
		t.Fatal(err)
	}
	c.LR = lr
	return &c
}

// squaredGradLoss differentiates g (autodiff) and makes the sum of the
// squared gradients of its params the new and only output, dropping what
// that no longer needs. Differentiating the result again runs every
// gradient rule's own rule: the second-order tests check it with
// checkGrads.
func squaredGradLoss(t *testing.T, g *ir.Graph) {
	t.Helper()
	if err := passes.Autodiff(g); err != nil {
		t.Fatal(err)
	}
	e := ir.NewEmitter(g, "s")
	loss := ir.NoID
	for _, gp := range g.Grads {
		s := e.Op(ir.OpSum, ir.MakeAttrs("keepdims", ir.BoolAttr(false)), e.Op(ir.OpMul, nil, gp.Grad, gp.Grad))
		if loss == ir.NoID {
			loss = s
		} else {
			loss = e.Add(loss, s)
		}
	}
	if e.Err() != nil {
		t.Fatal(e.Err())
	}
	g.Outputs = []ir.ID{loss}
	g.Grads = nil
	if err := passes.DCE(g); err != nil {
		t.Fatal(err)
	}
	if err := ir.Check(g); err != nil {
		t.Fatal(err)
	}
}
