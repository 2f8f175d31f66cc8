package tests

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/examples"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// Elementwise fusion against -O0: each rule's graph is compiled at -O0 and
// again at -O0 followed by the fuse pass (and DCE), both are run by the CPU
// executor on the same random inputs, and every output and every grad/PARAM
// must agree bitwise: a fused op computes each element with the same
// per-element code as the ops it replaced, and fused_reduce adds in sum's
// order, so the arithmetic is unchanged. The digits MLP training step is
// also compared through the whole default pipeline.

// fuseewPatterns are the rules' graphs: a scalar loss first (autodiff
// differentiates it), then the values the rule fuses. "DT" is replaced by
// f32 or f64.
var fuseewPatterns = []struct{ name, src string }{
	{"chain6", `graph chain6
input %x: DT[8,16]
param %w: DT[8,16] {init="normal", scale=1.0}
%t1 = mul %x, %w
%t2 = add %t1, %w
%t3 = tanh %t2
%t4 = mul %t3, %x
%t5 = sigmoid %t4
%t6 = sub %t5, %w
%loss = sum %t6
output %loss, %t6`},
	{"broadcast", `graph broadcast
input %x: DT[4,8]
param %bias: DT[8] {init="normal", scale=1.0}
param %col: DT[4,1] {init="normal", scale=1.0}
param %scale: DT[] {init="normal", scale=1.0}
%half = const {dtype="DT", value=0.5}
%a = add %x, %bias
%b = mul %a, %scale
%c = mul %b, %half
%d = sub %c, %col
%e = exp %d
%loss = mean %e
output %loss, %e`},
	{"where_compare", `graph where_compare
input %x: DT[16]
param %w: DT[16] {init="normal", scale=1.0}
%zero = const {dtype="DT", value=0.0}
%m = greater %x, %w
%s = where %m, %w, %zero
%p = mul %s, %x
%q = maximum %p, %w
%r = clip %q {max=0.5, min=-0.5}
%loss = sum %r
output %loss, %r`},
	{"bias_relu", `graph bias_relu
input %x: DT[4,6]
param %w: DT[6,5]
param %b: DT[5] {init="normal", scale=1.0}
%h = matmul %x, %w
%a = add %h, %b
%r = relu %a
%sq = square %r
%loss = sum %sq
output %loss, %r`},
	{"mul_sum", `graph mul_sum
input %x: DT[4,8]
param %w: DT[8] {init="normal", scale=1.0}
%p = mul %x, %w
%s = sum %p {axes=[1]}
%e = exp %s
%m = mean %e
%loss = mul %m, %m
output %loss, %s`},
	{"outside_user", `graph outside_user
input %x: DT[8]
param %w: DT[8] {init="normal", scale=1.0}
%a = mul %x, %w
%e = exp %a
%b = tanh %e
%c = sigmoid %a
%sb = sum %b
%sc = sum %c
%loss = add %sb, %sc
output %loss, %b, %c`},
	{"activations", `graph activations
input %x: DT[6,10]
param %w: DT[10] {init="normal", scale=1.0}
%a = mul %x, %w
%g = gelu %a {approximate="tanh"}
%s = softplus %g {beta=2.0}
%l = leaky_relu %a {alpha=0.1}
%e = elu %l
%q = mul %s, %e
%p = pow %q {exponent=2.0}
%si = silu %p
%loss = mean %si
output %loss, %si`},
}

// fuseewPlans compiles g with opts at -O0, and at -O0 followed by the fuse
// pass and DCE; it returns both plans and the number of fused ops.
func fuseewPlans(t *testing.T, g *ir.Graph, opts kiln.Options) (o0, fused *planner.Plan, nFused int) {
	t.Helper()
	opts.O0 = true
	opts.Debug.Check = true
	tg, err := kiln.Transform(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	fg := tg.Clone()
	if err := passes.Run(fg, []passes.Pass{{Name: "fuse", Run: passes.Fuse}, {Name: "dce", Run: passes.DCE}}, passes.Debug{Check: true}, nil); err != nil {
		t.Fatal(err)
	}
	for _, v := range fg.Values {
		switch v.Op {
		case ir.OpFusedElementwise, ir.OpFusedMatmul, ir.OpFusedReduce:
			nFused++
		}
	}
	if o0, err = planner.New(tg, opts.Plan); err != nil {
		t.Fatal(err)
	}
	if fused, err = planner.New(fg, opts.Plan); err != nil {
		t.Fatal(err)
	}
	return o0, fused, nFused
}

// fuseewExec returns an executor of p with feeds set.
func fuseewExec(t testing.TB, p *planner.Plan, f feeds) *cpu.Executor {
	t.Helper()
	x, err := cpu.New(p, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, vals := range f {
		tn, err := x.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := kernels.SetFloat64s(tn, vals); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

// fuseewSame fails unless tensor name holds bitwise the same values in a
// and b (NaNs of any payload match).
// fuseewSameStep runs one step of the plans o0 and fused on the feeds f
// and checks that every output and gradient has the same bits in both.
func fuseewSameStep(t *testing.T, what string, o0, fused *planner.Plan, f feeds) {
	t.Helper()
	a, b := fuseewExec(t, o0, f), fuseewExec(t, fused, f)
	for _, x := range []*cpu.Executor{a, b} {
		if err := x.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range o0.Outputs {
		fuseewSame(t, what, o.Name, a, b)
	}
	for _, gr := range o0.Grads {
		fuseewSame(t, what, gr.Name, a, b)
	}
	for _, pi := range o0.Params { // updated, in a training step
		fuseewSame(t, what, o0.Buffers[pi].Name, a, b)
	}
}

func fuseewSame(t *testing.T, what, name string, a, b *cpu.Executor) {
	t.Helper()
	ta, err := a.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := b.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	va, vb := kernels.Float64s(ta), kernels.Float64s(tb)
	bad := 0
	for i := range va {
		if math.Float64bits(va[i]) != math.Float64bits(vb[i]) && !(math.IsNaN(va[i]) && math.IsNaN(vb[i])) {
			if bad < 3 {
				t.Errorf("%s: %s[%d]: -O0 %v, fused %v", what, name, i, va[i], vb[i])
			}
			bad++
		}
	}
	if bad > 3 {
		t.Errorf("%s: %s: %d of %d elements differ", what, name, bad, len(va))
	}
}

// TestFuseElementwiseMatchesO0 checks each rule's graph, forward and
// backward, in f32 and f64, on three random draws: every output and
// gradient of the fused plan equals the -O0 plan's bitwise.
func TestFuseElementwiseMatchesO0(t *testing.T) {
	for _, pat := range fuseewPatterns {
		for _, dt := range []string{"f32", "f64"} {
			t.Run(pat.name+"/"+dt, func(t *testing.T) {
				g, err := ir.Parse(pat.name, []byte(strings.ReplaceAll(pat.src, "DT", dt)))
				if err != nil {
					t.Fatal(err)
				}
				o0, fused, n := fuseewPlans(t, g, kiln.Options{Grad: true})
				if n == 0 {
					t.Fatalf("nothing was fused:\n%s", fused.Graph.Format())
				}
				for seed := uint64(1); seed <= 3; seed++ {
					fuseewSameStep(t, fmt.Sprint("seed ", seed), o0, fused, randomFeeds(g, seed, nil, nil))
				}
			})
		}
	}
}

// TestFuseElementwiseDigitsAdam trains the digits MLP with Adam for ten
// steps on random batches, fused and at -O0, and compares the loss, the
// logits, every gradient, every param and every optimizer state after each
// step, bitwise: with the fuse pass alone, and with the whole default
// pipeline (kiln.Compile without O0).
func TestFuseElementwiseDigitsAdam(t *testing.T) {
	g, err := ir.Parse(examples.DigitsMLPFile, examples.DigitsMLP)
	if err != nil {
		t.Fatal(err)
	}
	opts := kiln.Options{Optimizer: optimizer(t, "adam", 0.01)}
	o0, fused, n := fuseewPlans(t, g, opts)
	if n < 10 {
		t.Errorf("%d fused ops, expected at least 10 (3 matmul epilogues, the softmax gradient, 3 programs per param for Adam)", n)
	}
	opts.Debug.Check = true
	def, err := kiln.Compile(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	f := randomFeeds(g, 1, nil, map[string]int{"y": 10})
	for name := range f {
		if g.Values[fuseewLookup(t, g, name)].Op == ir.OpParam {
			delete(f, name) // params start from their initializers
		}
	}
	a, b, c := fuseewExec(t, o0, f), fuseewExec(t, fused, f), fuseewExec(t, def, f)
	var names []string
	for _, o := range o0.Outputs {
		names = append(names, o.Name)
	}
	for _, gr := range o0.Grads {
		names = append(names, gr.Name)
	}
	for _, i := range append(append([]int(nil), o0.Params...), o0.States...) {
		names = append(names, o0.Buffers[i].Name)
	}
	for step := 1; step <= 10; step++ {
		batch := randomFeeds(g, uint64(100+step), nil, map[string]int{"y": 10})
		for _, x := range []*cpu.Executor{a, b, c} {
			for _, in := range []string{"x", "y"} {
				tn, _ := x.Get(in)
				if err := kernels.SetFloat64s(tn, batch[in]); err != nil {
					t.Fatal(err)
				}
			}
			if err := x.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range names {
			fuseewSame(t, fmt.Sprintf("step %d, fuse pass", step), name, a, b)
			fuseewSame(t, fmt.Sprintf("step %d, default pipeline", step), name, a, c)
		}
	}
}

// fuseewLookup returns the id of the value called name in g.
func fuseewLookup(t *testing.T, g *ir.Graph, name string) ir.ID {
	t.Helper()
	id, ok := g.Lookup(name)
	if !ok {
		t.Fatalf("no value %s", name)
	}
	return id
}

// Benchmarks: the fused plan against the -O0 plan in one run, as
// sub-benchmarks O0 and fused; the ratio of their ns/op is the speedup
// (docs/PERFORMANCE.md). Run with
//
//	go test ./tests -run '^$' -bench FuseEW -benchtime 5x

// BenchmarkFuseEWChain runs bench/elementwise_chain.kir, six arithmetic
// ops (mul, add, mul, sub, mul, add) over two f32[4096,4096] inputs (16M
// elements, 64 MiB each): at -O0 six kernels, each reading its operands
// from memory and writing its result; fused, one loop that reads x and y
// and writes the result once.
func BenchmarkFuseEWChain(b *testing.B) { fuseewBenchChain(b, "../bench/elementwise_chain.kir") }

// BenchmarkFuseEWChainRelu runs bench/elementwise_chain_relu.kir: mul, add,
// relu, mul, sub, maximum, the same traffic with costlier ops.
func BenchmarkFuseEWChainRelu(b *testing.B) {
	fuseewBenchChain(b, "../bench/elementwise_chain_relu.kir")
}

// BenchmarkFuseEWChainTanh runs bench/elementwise_chain_tanh.kir: mul, add,
// tanh, mul, sigmoid, sub, whose two transcendental functions dominate.
func BenchmarkFuseEWChainTanh(b *testing.B) {
	fuseewBenchChain(b, "../bench/elementwise_chain_tanh.kir")
}

// fuseewBenchChain runs the forward plan of the .kir file at path, at -O0
// and with the default pipeline.
func fuseewBenchChain(b *testing.B, path string) {
	src, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	g, err := ir.Parse(path, src)
	if err != nil {
		b.Fatal(err)
	}
	n := int64(g.Values[g.Outputs[0]].Type.Bytes())
	for _, level := range []struct {
		name string
		o0   bool
	}{{"O0", true}, {"fused", false}} {
		b.Run(level.name, func(b *testing.B) {
			p, err := kiln.Compile(g, kiln.Options{O0: level.o0})
			if err != nil {
				b.Fatal(err)
			}
			x := fuseewExec(b, p, nil)
			fuseewFill(b, x, g)
			b.SetBytes(int64(len(g.Inputs())+1) * n) // the inputs and the result, once each
			fuseewRun(b, x)
			b.ReportMetric(float64(len(p.Steps)), "steps")
			b.ReportMetric(float64(p.ArenaBytes)/(1<<20), "arena-MiB")
			x = nil
			runtime.GC() // give the arena back before the next level
		})
	}
}

// BenchmarkFuseEWDigitsStep runs one training step (forward, backward, Adam)
// of the digits MLP on a batch of 32, at -O0 and with the default pipeline.
func BenchmarkFuseEWDigitsStep(b *testing.B) {
	g, err := ir.Parse(examples.DigitsMLPFile, examples.DigitsMLP)
	if err != nil {
		b.Fatal(err)
	}
	opt, err := passes.DefaultOptimizer("adam")
	if err != nil {
		b.Fatal(err)
	}
	for _, level := range []struct {
		name string
		o0   bool
	}{{"O0", true}, {"fused", false}} {
		b.Run(level.name, func(b *testing.B) {
			p, err := kiln.Compile(g, kiln.Options{Optimizer: &opt, O0: level.o0})
			if err != nil {
				b.Fatal(err)
			}
			x := fuseewExec(b, p, nil)
			fuseewFill(b, x, g)
			fuseewRun(b, x)
			b.ReportMetric(float64(len(p.Steps)), "steps")
		})
	}
}

// fuseewRun times b.N steps of x, on one OS thread so that its CPU time
// (cpu-ns/op, Linux) can be reported next to the wall time.
func fuseewRun(b *testing.B, x *cpu.Executor) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := x.Step(context.Background()); err != nil { // warm up: the arena's pages
		b.Fatal(err)
	}
	c0 := fuseewThreadCPU()
	b.ResetTimer()
	for range b.N {
		if err := x.Step(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if c := fuseewThreadCPU() - c0; c > 0 {
		b.ReportMetric(float64(c.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// fuseewFill sets the inputs of g in x (not the params, which start from
// their initializers) in place, without a float64 copy of 16M elements:
// floats uniform in [-1, 1), labels in [0, 10), the same for every x.
func fuseewFill(b *testing.B, x *cpu.Executor, g *ir.Graph) {
	for _, id := range g.Inputs() {
		name := g.Values[id].Name
		t, err := x.Get(name)
		if err != nil {
			b.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(id), 2))
		switch t.Type.DType {
		case ir.F32:
			v := kernels.View[float32](t)
			for i := range v {
				v[i] = float32(2*r.Float64() - 1)
			}
		case ir.F64:
			v := kernels.View[float64](t)
			for i := range v {
				v[i] = 2*r.Float64() - 1
			}
		case ir.I64:
			v := kernels.View[int64](t)
			for i := range v {
				v[i] = int64(r.IntN(10))
			}
		default:
			b.Fatalf("input %s: %s", name, t.Type)
		}
	}
}
