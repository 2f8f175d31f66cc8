package tests

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
)

// fusepatCase is one graph whose default compile must use the fused
// pattern ops in want and agree with its -O0 compile.
type fusepatCase struct {
	name string
	src  string // .kir; DT stands for the float dtype
	want map[ir.Op]int
	// scale multiplies the random draws of these inputs (logits of ±1000).
	scale map[string]float64
	// ties rounds the draws of these to multiples of 0.5, so that max and
	// min tie; nan puts a NaN in their first element.
	ties, nan map[string]bool
	labels    map[string]int
	opt       *passes.OptimizerConfig
	// forward compiles without gradients: the graph is itself a backward
	// as simplification leaves it.
	forward bool
	// ulps, when nonzero, bounds |fused - O0| by ulps units in the last
	// place of the largest |O0| element of the tensor (see the case for
	// why); zero means bit for bit.
	ulps float64
}

func fusepatCases(t *testing.T) []fusepatCase {
	adam := optimizer(t, "adam", 0.01)
	sgd := optimizer(t, "sgd", 0.1)
	return []fusepatCase{
		{name: "softmax last axis", src: `
input %x: DT[6,33]
input %t: DT[6,33]
param %w: DT[33]
%z = mul %x, %w
%y = softmax %z
%p = mul %y, %t
%loss = sum %p
output %loss, %y`, want: map[ir.Op]int{ir.OpSoftmaxGrad: 1}},
		{name: "softmax axis 0, ±1000", src: `
input %x: DT[7,4,3]
input %t: DT[7,4,3]
param %w: DT[3]
%z = mul %x, %w
%y = softmax %z {axis=0}
%p = mul %y, %t
%loss = sum %p
output %loss`, want: map[ir.Op]int{ir.OpSoftmaxGrad: 1}, scale: map[string]float64{"x": 1000}},
		{name: "log_softmax middle axis", src: `
input %x: DT[3,9,4]
input %t: DT[3,9,4]
param %w: DT[4]
%z = mul %x, %w
%y = log_softmax %z {axis=1}
%p = mul %y, %t
%loss = mean %p
output %loss`, want: map[ir.Op]int{ir.OpLogSoftmaxGrad: 1}},
		{name: "max last axis with ties and NaN", src: `
input %t: DT[8]
param %x: DT[8,16]
%m = max %x {axes=[1]}
%p = mul %m, %t
%loss = sum %p
output %loss`, want: map[ir.Op]int{ir.OpMaxGrad: 1}, ties: map[string]bool{"x": true}, nan: map[string]bool{"x": true}},
		{name: "min two axes keepdims with ties", src: `
input %t: DT[1,4,1]
param %x: DT[5,4,6]
%m = min %x {axes=[0,2], keepdims=true}
%p = mul %m, %t
%loss = sum %p
output %loss`, want: map[ir.Op]int{ir.OpMaxGrad: 1}, ties: map[string]bool{"x": true}},
		{name: "max all", src: `
param %x: DT[5,7]
%loss = max %x
output %loss`, want: map[ir.Op]int{ir.OpMaxGrad: 1}, ties: map[string]bool{"x": true}},
		{name: "softmax_cross_entropy labels mean", src: `
input %x: DT[12,10]
input %labels: i64[12]
param %w: DT[10,10]
%z = matmul %x, %w
%loss = softmax_cross_entropy %z, %labels
output %loss`, want: map[ir.Op]int{ir.OpSoftmaxCEGrad: 1}, labels: map[string]int{"labels": 10}},
		{name: "softmax_cross_entropy labels none, ±1000", src: `
input %x: DT[12,10]
input %labels: i32[12]
input %r: DT[12]
param %w: DT[10]
%z = mul %x, %w
%l = softmax_cross_entropy %z, %labels {reduction="none"}
%p = mul %l, %r
%loss = sum %p
output %loss`, want: map[ir.Op]int{ir.OpSoftmaxCEGrad: 1}, labels: map[string]int{"labels": 10}, scale: map[string]float64{"x": 1000}},
		{name: "softmax_cross_entropy probabilities sum, target trained", src: `
input %x: DT[12,10]
param %w: DT[10,10]
param %t: DT[12,10]
%z = matmul %x, %w
%q = softmax %t
%loss = softmax_cross_entropy %z, %q {reduction="sum"}
output %loss`, want: map[ir.Op]int{ir.OpSoftmaxCEGrad: 1, ir.OpSoftmaxGrad: 1}},
		{name: "MLP training step (Adam)", src: `
input %x: DT[16,8]
input %labels: i64[16]
param %w1: DT[8,12]
param %w2: DT[12,5]
%h = matmul %x, %w1
%r = relu %h
%z = matmul %r, %w2
%loss = softmax_cross_entropy %z, %labels
output %loss, %z`, want: map[ir.Op]int{ir.OpSoftmaxCEGrad: 1}, labels: map[string]int{"labels": 5}, opt: adam},
		{name: "max backward with a scalar dy (as simplified)", forward: true, src: `
input %x: DT[6,9]
%m = max %x {axes=[1]}
%one = const {dtype="DT", value=1.0}
%zero = const {dtype="DT", value=0.0}
%mk = reshape %m {shape=[6,1]}
%mask = equal %mk, %x
%w = where %mask, %one, %zero
%count = sum %w {axes=[1], keepdims=true}
%q = div %one, %count
%dx = mul %w, %q
output %dx, %m`, want: map[ir.Op]int{ir.OpMaxGrad: 1}, ties: map[string]bool{"x": true}},
		{name: "cross-entropy difference without a scale (as simplified)", forward: true, src: `
input %z: DT[7,11]
input %labels: i64[7]
%p = softmax %z
%oh = one_hot %labels {classes=11, dtype="DT"}
%d = sub %p, %oh
output %d`, want: map[ir.Op]int{ir.OpSoftmaxCEGrad: 1}, labels: map[string]int{"labels": 11}, scale: map[string]float64{"z": 30}},
		// canonicalize moves each relu below the max-pooling of its
		// result (canonicalizePoolRelu): the same bits, forward and
		// backward, with ties among positive inputs, among negative ones
		// (every tap of a window <= 0), NaN, overlapping windows and
		// padding.
		{name: "max_pool2d of relu (canonicalize)", src: `
input %t: DT[2,3,3,3]
param %x: DT[2,3,6,6]
%r = relu %x
%p = max_pool2d %r {kernel=[2,2]}
%q = mul %p, %t
%loss = sum %q
output %loss, %p`, want: map[ir.Op]int{ir.OpMaxPool2dGrad: 1}, ties: map[string]bool{"x": true}, nan: map[string]bool{"x": true}},
		{name: "max_pool2d of relu, overlapping padded windows (canonicalize)", src: `
input %t: DT[2,3,4,4]
param %x: DT[2,3,7,7]
%r = relu %x
%p = max_pool2d %r {kernel=[3,3], stride=[2,2], padding=[1,1]}
%q = mul %p, %t
%loss = sum %q
output %loss`, want: map[ir.Op]int{ir.OpMaxPool2dGrad: 1}, ties: map[string]bool{"x": true}},
		{name: "convolution, relu, max_pool2d training step (SGD, canonicalize)", src: `
input %x: DT[4,2,8,8]
input %labels: i64[4]
param %w: DT[3,2,3,3]
param %b: DT[3]
param %v: DT[48,5]
%c = conv2d %x, %w, %b {padding=[1,1]}
%r = relu %c
%p = max_pool2d %r {kernel=[2,2]}
%f = reshape %p {shape=[4,48]}
%z = matmul %f, %v
%loss = softmax_cross_entropy %z, %labels
output %loss`, want: map[ir.Op]int{ir.OpConvWeightGrad: 1, ir.OpMaxPool2dGrad: 1, ir.OpSoftmaxCEGrad: 1}, labels: map[string]int{"labels": 5}, ties: map[string]bool{"x": true}, opt: sgd},
		// canonicalize: the -O0 graph differentiates log_softmax and
		// nll_loss, the default one softmax_cross_entropy. Forward: the
		// losses differ by the rounding of log(sum) (log_softmax's online
		// sum against cross-entropy's direct one) and of the final mean.
		// Backward: -O0 forms exp(log_softmax) where the fused kernel
		// forms softmax, and exp turns log_softmax's absolute rounding
		// (a few ulps of |log p| <= log C + the logit spread) into a
		// relative error of p. 16 ulps of the largest element covers
		// both with margin: the largest error over five seeds was 1 ulp.
		{name: "nll_loss of log_softmax (canonicalize)", src: `
input %x: DT[12,10]
input %labels: i64[12]
param %w: DT[10,10]
%z = matmul %x, %w
%lp = log_softmax %z {axis=1}
%loss = nll_loss %lp, %labels
output %loss`, want: map[ir.Op]int{ir.OpSoftmaxCEGrad: 1}, labels: map[string]int{"labels": 10}, ulps: 16},
	}
}

// TestFusePatternsMatchO0 compiles each case at the default level and at
// -O0 (with gradients unless the case is itself a backward, and the Adam
// update where the case has one), checks
// that the default compile contains the expected fused ops, runs both on
// the same random feeds through the CPU executor (two steps, so that
// updated params are compared too) and compares every output, every
// grad/PARAM and every param after the step: bit for bit, since the fused
// kernels do the arithmetic of the ops they replace operation for
// operation, except where a case states its bound.
func TestFusePatternsMatchO0(t *testing.T) {
	for _, tc := range fusepatCases(t) {
		for _, dt := range []string{"f32", "f64"} {
			t.Run(tc.name+"/"+dt, func(t *testing.T) {
				src := "graph fusepat\n" + strings.ReplaceAll(strings.TrimSpace(tc.src), "DT", dt) + "\n"
				g, err := ir.Parse("fusepat.kir", []byte(src))
				if err != nil {
					t.Fatal(err)
				}
				opts := kiln.Options{Grad: !tc.forward, Optimizer: tc.opt, Debug: passes.Debug{Check: true}}
				tg, err := kiln.Transform(g, opts)
				if err != nil {
					t.Fatal(err)
				}
				got := map[ir.Op]int{}
				for _, v := range tg.Values {
					if strings.HasSuffix(v.Op.String(), "_grad") && v.Op != ir.OpReluGrad {
						got[v.Op]++
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("fused ops %v, want %v:\n%s", got, tc.want, tg.Format())
				}
				o0 := opts
				o0.O0 = true
				fused, plain := newRunner(t, g, opts), newRunner(t, g, o0)
				f := randomFeeds(g, 3, nil, tc.labels)
				fusepatShape(g, f, tc)
				var names []string
				for _, o := range g.Outputs {
					names = append(names, g.Value(o).Name)
				}
				for _, p := range g.Params() {
					if tc.opt != nil {
						// A training step consumes its gradients: the
						// updated params carry them.
						names = append(names, g.Value(p).Name)
					} else {
						names = append(names, "grad/"+g.Value(p).Name, g.Value(p).Name)
					}
				}
				for step := range 2 {
					fused.run(f)
					plain.run(f)
					for _, n := range names {
						fusepatCompare(t, fmt.Sprintf("step %d %s", step, n), fused.get(n), plain.get(n), dt, tc.ulps)
					}
				}
			})
		}
	}
}

// fusepatShape applies a case's scale, ties and NaN to the feeds.
func fusepatShape(g *ir.Graph, f feeds, tc fusepatCase) {
	for name, vals := range f {
		for i := range vals {
			if s, ok := tc.scale[name]; ok {
				vals[i] *= s
			}
			if tc.ties[name] {
				vals[i] = math.Round(vals[i]*2) / 2
			}
		}
		if tc.nan[name] {
			vals[0] = math.NaN()
		}
	}
}

// fusepatCompare fails unless got and want agree bit for bit (NaN matching
// NaN), or, with ulps > 0, within ulps units in the last place of dt at the
// largest |want|.
func fusepatCompare(t *testing.T, what string, got, want []float64, dt string, ulps float64) {
	t.Helper()
	bound := 0.0
	if ulps > 0 {
		big := 0.0
		for _, w := range want {
			big = math.Max(big, math.Abs(w))
		}
		eps := 0x1p-52
		if dt == "f32" {
			eps = 0x1p-23
		}
		bound = ulps * eps * big
	}
	bad := 0
	for i := range got {
		g, w := got[i], want[i]
		same := math.Float64bits(g) == math.Float64bits(w) || math.IsNaN(g) && math.IsNaN(w)
		if !same && (ulps == 0 || !(math.Abs(g-w) <= bound)) {
			if bad < 3 {
				t.Errorf("%s[%d]: fused %v, -O0 %v (bound %g)", what, i, g, w, bound)
			}
			bad++
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d elements differ", what, bad)
	}
}

// Benchmarks: fused (default) against -O0 on the same graph, one step of
// each per iteration, f32 on the CPU executor. Each reports ns per step of
// both plans and their ratio (O0/fused); run them with
//
//	go test ./tests -run '^$' -bench FusePat -benchtime 20x
//
// The graphs are the .kir files in bench/, which kiln bench runs too.

// BenchmarkFusePatSoftmaxBackward runs softmax's backward alone on
// [4096,1024]: bench/softmax_backward.kir is the graph autodiff emits for
// it (dy and y as inputs), which the default compile runs as one
// softmax_grad kernel and -O0 as mul, sum, sub and mul.
func BenchmarkFusePatSoftmaxBackward(b *testing.B) {
	fusepatBench(b, "softmax_backward.kir", false, ir.OpSoftmaxGrad)
}

// BenchmarkFusePatLogSoftmaxBackward runs log_softmax's backward alone on
// [4096,1024] (bench/log_softmax_backward.kir): one log_softmax_grad kernel
// against sum, exp, mul and sub.
func BenchmarkFusePatLogSoftmaxBackward(b *testing.B) {
	fusepatBench(b, "log_softmax_backward.kir", false, ir.OpLogSoftmaxGrad)
}

// BenchmarkFusePatSoftmaxTrain runs softmax forward and backward on
// [4096,1024] (loss sum(softmax(x)*t), gradient for x): the forward's exp
// per element is the same in both plans.
func BenchmarkFusePatSoftmaxTrain(b *testing.B) {
	fusepatBench(b, "softmax_train.kir", true, ir.OpSoftmaxGrad)
}

// BenchmarkFusePatMaxReduce runs max over the last axis of [4096,1024],
// forward and backward (loss sum(max(x)), gradient for x).
func BenchmarkFusePatMaxReduce(b *testing.B) {
	fusepatBench(b, "max_reduce.kir", true, ir.OpMaxGrad)
}

// BenchmarkFusePatSoftmaxCE runs softmax_cross_entropy forward and backward
// on logits [4096,1024] with integer labels.
func BenchmarkFusePatSoftmaxCE(b *testing.B) {
	fusepatBench(b, "softmax_ce.kir", true, ir.OpSoftmaxCEGrad)
}

// BenchmarkFusePatNLLLogSoftmax runs nll_loss(log_softmax(logits)) on
// [4096,1024], forward and backward: canonicalized into
// softmax_cross_entropy with a softmax_ce_grad backward by default.
func BenchmarkFusePatNLLLogSoftmax(b *testing.B) {
	fusepatBench(b, "nll_log_softmax.kir", true, ir.OpSoftmaxCEGrad)
}

func fusepatBench(b *testing.B, file string, grad bool, want ir.Op) {
	src, err := os.ReadFile("../bench/" + file)
	if err != nil {
		b.Fatal(err)
	}
	g, err := ir.Parse(file, src)
	if err != nil {
		b.Fatal(err)
	}
	build := func(o0 bool) *cpu.Executor {
		p, err := kiln.Compile(g, kiln.Options{Grad: grad, O0: o0})
		if err != nil {
			b.Fatal(err)
		}
		if n := len(p.Graph.IDsOf(want)); (n == 0) != o0 {
			b.Fatalf("O0=%v: %d %s ops", o0, n, want)
		}
		x, err := cpu.New(p, cpu.Options{})
		if err != nil {
			b.Fatal(err)
		}
		f := randomFeeds(g, 1, nil, map[string]int{"labels": 1024})
		for name, vals := range f {
			tn, err := x.Get(name)
			if err != nil {
				b.Fatal(err)
			}
			if err := kernels.SetFloat64s(tn, vals); err != nil {
				b.Fatal(err)
			}
		}
		return x
	}
	fused, plain := build(false), build(true)
	ctx := context.Background()
	step := func(x *cpu.Executor) time.Duration {
		start := time.Now()
		if err := x.Step(ctx); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	step(fused)
	step(plain)
	var tf, t0 time.Duration
	b.ResetTimer()
	for range b.N {
		t0 += step(plain)
		tf += step(fused)
	}
	b.ReportMetric(float64(t0.Nanoseconds())/float64(b.N), "O0-ns/step")
	b.ReportMetric(float64(tf.Nanoseconds())/float64(b.N), "fused-ns/step")
	b.ReportMetric(float64(t0)/float64(tf), "O0/fused")
}
