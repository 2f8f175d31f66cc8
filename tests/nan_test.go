package tests

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/internal/nanref"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// nanExempt lists the ops that have no case in the NaN/Inf reference
// (tests/pytorch/nan_reference.py), each with the reason. Every other op
// must have one: TestNaNCoverage fails on an op in neither place, so a new
// op cannot skip the check.
var nanExempt = map[ir.Op]string{
	ir.OpInput:  "a declaration",
	ir.OpParam:  "a declaration",
	ir.OpState:  "a declaration",
	ir.OpConst:  "declares its values without arithmetic; the fold check runs every case with const arguments",
	ir.OpOneHot: "integer labels in, 0 and 1 out: no float operand",

	ir.OpBCELoss: "PyTorch refuses a NaN input (an input outside [0, 1]) with an error, and kiln refuses NaN in the input or the target with an error naming the element (kernels/cpu TestLossErrors)",

	ir.OpLogicalAnd: "bool operands only",
	ir.OpLogicalOr:  "bool operands only",
	ir.OpLogicalNot: "bool operand only",

	ir.OpSoftmaxGrad:      "made by the fuse pass from softmax's gradient: the -O2 run of the softmax cases checks it",
	ir.OpLogSoftmaxGrad:   "made by the fuse pass from log_softmax's gradient: the -O2 run of the log_softmax cases checks it",
	ir.OpMaxGrad:          "made by the fuse pass from max's and min's gradients: the -O2 run of their cases checks it",
	ir.OpSoftmaxCEGrad:    "made by the fuse pass from softmax_cross_entropy's gradient: the -O2 run of its cases checks it",
	ir.OpFusedElementwise: "made by the fuse pass: every case runs at -O2 too",
	ir.OpFusedMatmul:      "made by the fuse pass: every case runs at -O2 too",
	ir.OpFusedReduce:      "made by the fuse pass: every case runs at -O2 too",
	ir.OpFusedSoftmax:     "made by the fuse pass from an elementwise op before a softmax, which no single-op case has: TestFuseSoftmaxMatchesO0 runs NaN and ±Inf through it against -O0, as kernels/cpu TestFusedSoftmaxBitwise does against the unfused kernels",
	ir.OpFusedSoftmaxGrad: "made by the fuse pass from softmax's gradient and an elementwise op after it, which no single-op case has: TestFuseSoftmaxMatchesO0 runs NaN and ±Inf through it against -O0, as kernels/cpu TestFusedSoftmaxBitwise does against the unfused kernels",
	ir.OpAllReduce:        "a sum over the ranks of a job, which PyTorch's reference has no single-process form of; dist's tests check its sums, which add with the element type's + as add does",
	ir.OpReduceScatter:    "a shard of allreduce's sum: dist's tests check it",
	ir.OpAllGather:        "copies every rank's shard: no arithmetic",
	ir.OpShard:            "copies this rank's part of its operand: no arithmetic",
	ir.OpAttention:        "PyTorch's softmax-then-matmul gives NaN for a fully masked row where attention defines 0; NaN and Inf propagation is checked against the unfused graph by kernels/cpu TestAttentionNaN",
	ir.OpAttentionGrad:    "attention's backward; checked with it by kernels/cpu TestAttentionNaN",
	ir.OpLayerNormGrad:    "layer_norm's gradient: the layer_norm cases' gradients run through it against PyTorch's",
}

// nanFused are the exempt ops the fuse pass makes: TestNaNCoverage checks
// that the -O2 compilations of the cases make each of them, so that the
// -O2 runs check them.
var nanFused = []ir.Op{ir.OpSoftmaxGrad, ir.OpLogSoftmaxGrad, ir.OpMaxGrad, ir.OpSoftmaxCEGrad,
	ir.OpFusedElementwise, ir.OpFusedMatmul, ir.OpFusedReduce}

func loadNaNCases(t *testing.T) []nanref.Case {
	t.Helper()
	cases, err := nanref.Load("testdata/pytorch")
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestNaNCoverage checks that every op of the table has a NaN/Inf
// reference case or an exemption with a reason, and not both, and that the
// cases compiled at -O2 make every fused op the exemptions count on.
func TestNaNCoverage(t *testing.T) {
	covered := map[ir.Op]bool{}
	for _, c := range loadNaNCases(t) {
		g, err := c.Parse(ir.F32)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		for _, v := range g.Values {
			covered[v.Op] = true
		}
	}
	for _, op := range ir.Ops() {
		reason, exempt := nanExempt[op]
		switch {
		case covered[op] && exempt && !op.IsLeaf():
			t.Errorf("%s has a NaN/Inf case and an exemption (%s)", op, reason)
		case !covered[op] && !exempt:
			t.Errorf("%s has no NaN/Inf case in tests/pytorch/nan_reference.py and no exemption in nanExempt", op)
		}
	}
	fused := map[ir.Op]bool{}
	for _, c := range loadNaNCases(t) {
		g, err := c.Parse(ir.F32)
		if err != nil {
			t.Fatal(err)
		}
		_, err = kiln.Compile(g, kiln.Options{Grad: c.Grad, After: func(_ string, g *ir.Graph) {
			for _, v := range g.Values {
				fused[v.Op] = true
			}
		}})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
	}
	for _, op := range nanFused {
		if !fused[op] {
			t.Errorf("no NaN/Inf case makes %s at -O2, so none checks it", op)
		}
	}
}

// nanModes are the compilations every case runs under: -O0, and the
// default pipeline (simplify, fusion).
var nanModes = []struct {
	name string
	o0   bool
}{{"O0", true}, {"O2", false}}

// TestNaNMatchesPyTorch runs every NaN/Inf reference case in f32 and f64,
// at -O0 and at -O2, on the CPU and compares the result and every gradient
// with PyTorch's: NaN where PyTorch gives NaN, the same infinities, finite
// values within nanref.Tolerance.
func TestNaNMatchesPyTorch(t *testing.T) {
	for _, c := range loadNaNCases(t) {
		for _, dt := range []ir.DType{ir.F32, ir.F64} {
			for _, m := range nanModes {
				t.Run(fmt.Sprintf("%s/%s/%s", c.Name, dt, m.name), func(t *testing.T) {
					g, err := c.Parse(dt)
					if err != nil {
						t.Fatal(err)
					}
					got := runNaNCase(t, g, &c, kiln.Options{Grad: c.Grad, O0: m.o0})
					compareNaNCase(t, &c, dt, got, false)
				})
			}
		}
	}
}

// TestNaNFolding gives every case's arguments as consts, so that the
// simplify pass's constant folding sees the whole graph, and compares the
// result with PyTorch's as TestNaNMatchesPyTorch does.
func TestNaNFolding(t *testing.T) {
	for _, c := range loadNaNCases(t) {
		for _, dt := range []ir.DType{ir.F32, ir.F64} {
			t.Run(fmt.Sprintf("%s/%s", c.Name, dt), func(t *testing.T) {
				g, err := c.Parse(dt)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Consts(g); err != nil {
					t.Fatal(err)
				}
				y, ok := g.Lookup("y")
				if !ok {
					t.Fatal("no %y")
				}
				g.Outputs = []ir.ID{y}
				got := runNaNCase(t, g, &c, kiln.Options{})
				compareNaNCase(t, &c, dt, got, true)
			})
		}
	}
}

// runNaNCase compiles g with opts, runs one step on the case's inputs on
// one worker, and returns y and every gradient.
func runNaNCase(t *testing.T, g *ir.Graph, c *nanref.Case, opts kiln.Options) map[string][]float64 {
	t.Helper()
	opts.Debug.Check = true
	p, err := kiln.Compile(g, opts)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	x, err := cpu.New(p, cpu.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	names := map[string]bool{}
	for _, n := range x.Names() {
		names[n] = true
	}
	for name, vals := range c.Inputs {
		if !names[name] {
			continue // a const in the fold check
		}
		tn, err := x.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := kernels.SetFloat64s(tn, vals); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if err := x.Step(context.Background()); err != nil {
		t.Fatalf("step: %v", err)
	}
	got := map[string][]float64{}
	for _, n := range x.Names() {
		if n == "y" || strings.HasPrefix(n, "grad/") {
			tn, _ := x.Get(n)
			got[n] = kernels.Float64s(tn)
		}
	}
	return got
}

// compareNaNCase compares got with the case's PyTorch values for dt:
// every value PyTorch has, or only y when forwardOnly is set.
func compareNaNCase(t *testing.T, c *nanref.Case, dt ir.DType, got map[string][]float64, forwardOnly bool) {
	t.Helper()
	rtol, atol := nanref.Tolerance(dt)
	want := c.Want[dt.String()]
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("kiln computes %s, PyTorch's reference has none", k)
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		if k == "y" || !forwardOnly {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		g, ok := got[k]
		if !ok {
			t.Errorf("PyTorch's reference has %s, kiln computes none", k)
			continue
		}
		w := want[k]
		if reason, ok := c.Deviation(dt, k); ok {
			if nanref.Compare(g, w, rtol, atol) == "" {
				t.Errorf("%s %s matches PyTorch: take the deviation (%s) off nanref.Deviations", dt, k, reason)
			}
			g, w = nanref.DropNaNs(g, w)
		}
		if msg := nanref.Compare(g, w, rtol, atol); msg != "" {
			t.Errorf("%s %s%s (kiln %v, torch %v)", dt, k, msg, g, w)
		}
	}
}
