package cpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// countPool is a goPool that records the most parts one Run was given.
type countPool struct {
	goPool
	mu    sync.Mutex
	parts int
}

func (p *countPool) Run(n int, body func(part int)) {
	p.mu.Lock()
	p.parts = max(p.parts, n)
	p.mu.Unlock()
	p.goPool.Run(n, body)
}

// parCase is one kernel call of TestParSplitBitwise: op, attrs and its
// arguments, made from r.
type parCase struct {
	name  string
	op    ir.Op
	attrs ir.Attrs
	args  func(r *rand.Rand, dt ir.DType) []kernels.Tensor
}

// parRand returns a tensor of dt and shape with values in [lo, hi).
func parRand(r *rand.Rand, dt ir.DType, lo, hi float64, shape ...int) kernels.Tensor {
	t := emptyOf(ir.TensorOf(dt, shape...))
	v := make([]float64, ir.Shape(shape).NumElements())
	for i := range v {
		v[i] = lo + (hi-lo)*r.Float64()
	}
	if err := kernels.SetFloat64s(t, v); err != nil {
		panic(err)
	}
	return t
}

// parLabels returns n labels of dt in [0, classes).
func parLabels(r *rand.Rand, dt ir.DType, n, classes int) kernels.Tensor {
	t := emptyOf(ir.TensorOf(dt, n))
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(r.IntN(classes))
	}
	if err := kernels.SetFloat64s(t, v); err != nil {
		panic(err)
	}
	return t
}

// parCases are the kernels split across workers (par.go and its users),
// on shapes that no part count divides evenly.
func parCases() []parCase {
	x := func(shape ...int) func(*rand.Rand, ir.DType) []kernels.Tensor {
		return func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, shape...))}
		}
	}
	xy := func(shape ...int) func(*rand.Rand, ir.DType) []kernels.Tensor {
		return func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, shape...)), fuseewRandom(r, ir.TensorOf(dt, shape...))}
		}
	}
	ce := func(labels ir.DType, dy bool) func(*rand.Rand, ir.DType) []kernels.Tensor {
		return func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			a := []kernels.Tensor{parRand(r, dt, -8, 8, 41, 13)}
			if labels == ir.InvalidDType {
				a = append(a, parRand(r, dt, 0, 1, 41, 13))
			} else {
				a = append(a, parLabels(r, labels, 41, 13))
			}
			if dy {
				a = append(a, parRand(r, dt, -1, 1, 41))
			}
			return a
		}
	}
	probs := func(shape ...int) func(*rand.Rand, ir.DType) []kernels.Tensor {
		return func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{parRand(r, dt, 0.01, 0.99, shape...), parRand(r, dt, 0, 1, shape...)}
		}
	}
	axis := func(a int) ir.Attrs { return ir.MakeAttrs("axis", ir.Int(a)) }
	axes := func(a ...int) ir.Attrs { return ir.MakeAttrs("axes", ir.Ints(a...)) }
	red := func(s string) ir.Attrs { return ir.MakeAttrs("reduction", ir.String(s)) }
	cases := []parCase{
		{"softmax rows", ir.OpSoftmax, nil, x(37, 29)},
		{"softmax axis 1", ir.OpSoftmax, axis(1), x(11, 7, 9)},
		{"log_softmax rows", ir.OpLogSoftmax, nil, x(37, 29)},
		{"log_softmax axis 0", ir.OpLogSoftmax, axis(1), x(11, 7, 9)},
		{"softmax_grad rows", ir.OpSoftmaxGrad, nil, xy(37, 29)},
		{"softmax_grad axis 1", ir.OpSoftmaxGrad, axis(1), xy(11, 7, 9)},
		{"log_softmax_grad rows", ir.OpLogSoftmaxGrad, nil, xy(37, 29)},
		{"log_softmax_grad axis 1", ir.OpLogSoftmaxGrad, axis(1), xy(11, 7, 9)},
		{"layer_norm", ir.OpLayerNorm, axes(-1), x(23, 19)},
		{"layer_norm affine", ir.OpLayerNorm, axes(1, 2), func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, 13, 5, 3)), fuseewRandom(r, ir.TensorOf(dt, 5, 3)), fuseewRandom(r, ir.TensorOf(dt, 5, 3))}
		}},
		{"layer_norm_grad", ir.OpLayerNormGrad, axes(-1), xy(23, 19)},
		{"layer_norm_grad weight", ir.OpLayerNormGrad, axes(1, 2), func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, 13, 5, 3)), fuseewRandom(r, ir.TensorOf(dt, 13, 5, 3)), fuseewRandom(r, ir.TensorOf(dt, 5, 3))}
		}},
		{"batch_norm", ir.OpBatchNorm, nil, func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, 3, 11, 5, 2)), fuseewRandom(r, ir.TensorOf(dt, 11)), fuseewRandom(r, ir.TensorOf(dt, 11))}
		}},
		{"max_grad rows", ir.OpMaxGrad, axes(-1), func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			xt := fuseewRandom(r, ir.TensorOf(dt, 37, 9))
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, 37)), xt, mustRunNoT(ir.OpMax, ir.MakeAttrs("axes", ir.Ints(-1)), xt)}
		}},
	}
	for _, rd := range []string{"mean", "sum", "none"} {
		cases = append(cases,
			parCase{"softmax_cross_entropy i32 " + rd, ir.OpSoftmaxCrossEntropy, red(rd), ce(ir.I32, false)},
			parCase{"softmax_cross_entropy i64 " + rd, ir.OpSoftmaxCrossEntropy, red(rd), ce(ir.I64, false)},
			parCase{"softmax_cross_entropy probs " + rd, ir.OpSoftmaxCrossEntropy, red(rd), ce(ir.InvalidDType, false)},
			parCase{"nll_loss " + rd, ir.OpNLLLoss, red(rd), ce(ir.I64, false)},
			parCase{"bce_loss " + rd, ir.OpBCELoss, red(rd), probs(29, 37)},
			parCase{"bce_with_logits " + rd, ir.OpBCEWithLogits, red(rd), xy(29, 37)},
		)
		if rd == "none" {
			cases = append(cases,
				parCase{"softmax_ce_grad i32 " + rd, ir.OpSoftmaxCEGrad, red(rd), ce(ir.I32, true)},
				parCase{"softmax_ce_grad probs " + rd, ir.OpSoftmaxCEGrad, red(rd), ce(ir.InvalidDType, true)})
		} else {
			cases = append(cases, parCase{"softmax_ce_grad i64 " + rd, ir.OpSoftmaxCEGrad, red(rd), func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
				a := ce(ir.I64, false)(r, dt)
				return append(a, parRand(r, dt, -1, 1))
			}})
		}
	}
	for _, op := range []ir.Op{ir.OpMax, ir.OpMin, ir.OpProd, ir.OpLogSumExp, ir.OpVar, ir.OpStd, ir.OpArgmax, ir.OpArgmin} {
		cases = append(cases,
			parCase{op.String() + " last axis", op, axes(-1), x(37, 29)},
			parCase{op.String() + " two axes keepdims", op, ir.MakeAttrs("axes", ir.Ints(1, 2), "keepdims", ir.BoolAttr(true)), x(19, 3, 11)})
	}
	prog := fuseewProgram("t0 = mul i0, i1", "t1 = exp t0", "t2 = add t1, i0")
	for _, op := range []string{"sum", "mean"} {
		reduceOp, _ := ir.LookupOp(op)
		cases = append(cases,
			parCase{"fused_reduce " + op + " rows", ir.OpFusedReduce, prog.With("op", ir.String(op)).With("axes", ir.Ints(-1)), xy(1100, 33)},
			parCase{"fused_reduce " + op + " two axes", ir.OpFusedReduce, prog.With("op", ir.String(op)).With("axes", ir.Ints(1, 2)), xy(700, 4, 16)},
			parCase{"fused_reduce " + op + " leading axis", ir.OpFusedReduce, prog.With("op", ir.String(op)).With("axes", ir.Ints(0)), xy(301, 128)},
			parCase{"fused_reduce " + op + " leading axes", ir.OpFusedReduce, prog.With("op", ir.String(op)).With("axes", ir.Ints(0, 1)), xy(5, 61, 192)},
			parCase{"fused_reduce " + op + " middle axis", ir.OpFusedReduce, prog.With("op", ir.String(op)).With("axes", ir.Ints(1)), xy(3, 61, 192)},
			parCase{"fused_reduce " + op + " all", ir.OpFusedReduce, prog.With("op", ir.String(op)), xy(7, 4099)},
			parCase{op + " all", reduceOp, nil, x(7, 4099)})
	}
	for _, op := range []ir.Op{ir.OpExp, ir.OpLog, ir.OpTanh, ir.OpSigmoid, ir.OpRelu, ir.OpNeg, ir.OpErf, ir.OpAbs, ir.OpSquare, ir.OpGelu, ir.OpSilu, ir.OpSoftplus} {
		cases = append(cases, parCase{op.String(), op, nil, x(7, 143)})
	}
	cases = append(cases,
		parCase{"gelu tanh", ir.OpGelu, ir.MakeAttrs("approximate", ir.String("tanh")), x(1001)},
		parCase{"clip", ir.OpClip, ir.MakeAttrs("min", ir.Float(-0.5), "max", ir.Float(0.5)), x(1001)},
		parCase{"pow 3", ir.OpPow, ir.MakeAttrs("exponent", ir.Float(3)), x(1001)},
		parCase{"relu_grad", ir.OpReluGrad, nil, xy(1001)},
		parCase{"gelu_grad", ir.OpGeluGrad, nil, xy(1001)},
		parCase{"add", ir.OpAdd, nil, xy(7, 143)},
		parCase{"mul scalar", ir.OpMul, nil, func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, 7, 143)), fuseewRandom(r, ir.TensorOf(dt))}
		}},
		parCase{"div scalar first", ir.OpDiv, nil, func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt)), fuseewRandom(r, ir.TensorOf(dt, 7, 143))}
		}},
		parCase{"sub rows", ir.OpSub, nil, func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, 3, 29, 17)), fuseewRandom(r, ir.TensorOf(dt, 3, 29, 1))}
		}},
		parCase{"add bias", ir.OpAdd, nil, func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, 3, 29, 17)), fuseewRandom(r, ir.TensorOf(dt, 29, 17))}
		}},
		parCase{"transpose heads", ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(0, 2, 1, 3)), x(3, 7, 5, 9)},
		parCase{"embedding", ir.OpEmbedding, nil, func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, 13, 37)), parLabels(r, ir.I64, 41, 13)}
		}},
		parCase{"index_select", ir.OpIndexSelect, axis(1), func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, 3, 13, 37)), parLabels(r, ir.I32, 41, 13)}
		}},
		parCase{"index_add", ir.OpIndexAdd, axis(1), func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, 3, 13, 100)), parLabels(r, ir.I64, 41, 13), fuseewRandom(r, ir.TensorOf(dt, 3, 41, 100))}
		}},
		parCase{"reshape", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(143, 7)), x(7, 143)},
	)
	return cases
}

// mustRunNoT runs op unsplit, panicking on error (for building inputs).
func mustRunNoT(op ir.Op, attrs ir.Attrs, args ...kernels.Tensor) kernels.Tensor {
	n := &kernels.Node{Op: op, Attrs: attrs, Args: typesOf(args)}
	out, err := op.Info().Infer(n.Args, attrs)
	if err != nil {
		panic(err)
	}
	n.Out = out
	f, err := Kernels.Build(n)
	if err != nil {
		panic(err)
	}
	o := emptyOf(out)
	if err := f(o, args); err != nil {
		panic(err)
	}
	return o
}

// TestParSplitBitwise checks that every row-wise and elementwise kernel
// split across 2, 3 and 7 workers (with parMinWork at 1 and a reduction's
// parts at least parAlign columns, so that every kernel splits as far as
// its rows allow) splits (the pool is given more
// than one part) and gives the bits of the kernel run on one worker, which
// the kernels' own tests check against their references.
func TestParSplitBitwise(t *testing.T) {
	defer func(v, c int) { parMinWork, reduceSplitCols = v, c }(parMinWork, reduceSplitCols)
	parMinWork, reduceSplitCols = 1, parAlign
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		for _, tc := range parCases() {
			r := newRand(11)
			args := tc.args(r, dt)
			want := buildWith(t, nil, tc.op, tc.attrs, args...)
			one := buildWith(t, goPool(1), tc.op, tc.attrs, args...)
			if !bytes.Equal(one.Data, want.Data) {
				t.Errorf("%s %s: 1 worker differs from no pool", tc.name, dt)
			}
			for _, w := range []int{2, 3, 7} {
				p := &countPool{goPool: goPool(w)}
				got := buildWith(t, p, tc.op, tc.attrs, args...)
				if p.parts < 2 {
					t.Errorf("%s %s on %d workers: not split (%d parts)", tc.name, dt, w, p.parts)
				}
				if !bytes.Equal(got.Data, want.Data) {
					t.Errorf("%s %s on %d workers: result differs from 1 worker", tc.name, dt, w)
				}
			}
		}
	}
}

// seqPool is a kernels.Parallel that runs the parts in order on the
// calling goroutine, allocating nothing.
type seqPool int

func (p seqPool) Workers() int { return int(p) }

func (p seqPool) Run(n int, body func(part int)) {
	for i := range n {
		body(i)
	}
}

// TestParSplitAllocatesNothing checks that the split kernels' Funcs
// allocate nothing per call: their parts and scratch are made in the
// builders.
func TestParSplitAllocatesNothing(t *testing.T) {
	defer func(v int) { parMinWork = v }(parMinWork)
	parMinWork = 1
	for _, tc := range parCases() {
		args := tc.args(newRand(2), ir.F32)
		n := node(t, tc.op, tc.attrs, typesOf(args)...)
		n.Par = seqPool(3)
		f, err := Kernels.Build(n)
		if err != nil {
			t.Fatal(err)
		}
		out := emptyOf(n.Out)
		if a := testing.AllocsPerRun(10, func() {
			if err := f(out, args); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("%s: %v allocations per call", tc.name, a)
		}
	}
}

// TestParSplitSmallStaysOnOneWorker checks that a kernel below the work
// threshold runs on the calling goroutine alone.
func TestParSplitSmallStaysOnOneWorker(t *testing.T) {
	r := newRand(3)
	for _, tc := range []parCase{
		{"softmax", ir.OpSoftmax, nil, func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, 4, 8))}
		}},
		{"tanh", ir.OpTanh, nil, func(r *rand.Rand, dt ir.DType) []kernels.Tensor {
			return []kernels.Tensor{fuseewRandom(r, ir.TensorOf(dt, 100))}
		}},
	} {
		p := &countPool{goPool: goPool(4)}
		buildWith(t, p, tc.op, tc.attrs, tc.args(r, ir.F32)...)
		if p.parts != 0 {
			t.Errorf("%s: small input split into %d parts", tc.name, p.parts)
		}
	}
}

// TestParSplitFirstError checks that a split loss reports the first bad
// label, as the unsplit loop does, whichever part finds it.
func TestParSplitFirstError(t *testing.T) {
	defer func(v int) { parMinWork = v }(parMinWork)
	parMinWork = 1
	r := newRand(5)
	logits := parRand(r, ir.F32, -1, 1, 41, 13)
	labels := parLabels(r, ir.I32, 41, 13)
	lv := kernels.View[int32](labels)
	lv[17], lv[30] = 13, -1
	sum := ir.MakeAttrs("reduction", ir.String("sum"))
	for _, op := range []ir.Op{ir.OpSoftmaxCrossEntropy, ir.OpNLLLoss, ir.OpSoftmaxCEGrad} {
		for _, w := range []int{1, 2, 3, 7} {
			n := node(t, op, sum, logits.Type, labels.Type)
			n.Par = goPool(w)
			f, err := Kernels.Build(n)
			if err != nil {
				t.Fatal(err)
			}
			err = f(emptyOf(n.Out), []kernels.Tensor{logits, labels})
			if err == nil || !strings.Contains(err.Error(), "label 13 at row 17") {
				t.Errorf("%s on %d workers: error %v, want the one of row 17", op, w, err)
			}
		}
	}
}

// cpuPool is a kernels.Parallel for the benchmarks that measures each
// part's CPU time (each part runs on a goroutine locked to its thread) and
// adds up, per Run, the longest part's: the time the Run takes on idle
// cores, whatever else runs on a shared machine.
type cpuPool struct {
	workers int
	crit    time.Duration
}

func (p *cpuPool) Workers() int { return p.workers }

func (p *cpuPool) Run(n int, body func(part int)) {
	times := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			t0 := threadCPU()
			body(i)
			times[i] = threadCPU() - t0
		}()
	}
	wg.Wait()
	p.crit += slices.Max(times)
}

// benchPar times op on args, built for the given number of workers. Besides
// ns/op it reports crit-cpu-ns/op: the calling thread's CPU time plus, for
// each split call, the CPU time of its longest part; on a machine shared
// with other work that is what a call would take with a core per worker.
func benchPar(b *testing.B, op ir.Op, attrs ir.Attrs, workers int, args ...kernels.Tensor) {
	n := node(b, op, attrs, typesOf(args)...)
	pool := &cpuPool{workers: workers}
	n.Par = pool
	f, err := Kernels.Build(n)
	if err != nil {
		b.Fatal(err)
	}
	out := emptyOf(n.Out)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var own time.Duration
	for b.Loop() {
		t0 := threadCPU()
		if err := f(out, args); err != nil {
			b.Fatal(err)
		}
		own += threadCPU() - t0
	}
	b.ReportMetric(float64(own+pool.crit)/float64(b.N), "crit-cpu-ns/op")
}

// BenchmarkParSplit times softmax [4096,1024] f32 forward and backward,
// layer_norm and softmax cross-entropy on 1 and 2 workers (go test -bench
// ParSplit ./kernels/cpu).
func BenchmarkParSplit(b *testing.B) {
	r := newRand(1)
	x := parRand(r, ir.F32, -4, 4, 4096, 1024)
	dy := parRand(r, ir.F32, -1, 1, 4096, 1024)
	y := mustRunNoT(ir.OpSoftmax, nil, x)
	w := parRand(r, ir.F32, -1, 1, 1024)
	labels := parLabels(r, ir.I64, 4096, 1024)
	for _, workers := range []int{1, 2} {
		name := func(s string) string { return fmt.Sprintf("%s/workers=%d", s, workers) }
		b.Run(name("softmax"), func(b *testing.B) { benchPar(b, ir.OpSoftmax, nil, workers, x) })
		b.Run(name("softmax_grad"), func(b *testing.B) { benchPar(b, ir.OpSoftmaxGrad, nil, workers, dy, y) })
		b.Run(name("layer_norm"), func(b *testing.B) {
			benchPar(b, ir.OpLayerNorm, ir.MakeAttrs("axes", ir.Ints(-1)), workers, x, w, w)
		})
		b.Run(name("softmax_cross_entropy"), func(b *testing.B) { benchPar(b, ir.OpSoftmaxCrossEntropy, nil, workers, x, labels) })
		b.Run(name("softmax_ce_grad"), func(b *testing.B) {
			benchPar(b, ir.OpSoftmaxCEGrad, ir.MakeAttrs("reduction", ir.String("sum")), workers, x, labels)
		})
	}
}

// BenchmarkLayerNormRows times layer_norm and layer_norm_grad with weight
// on the rows of a GPT-style block ([2048,256] f32: 16 sequences of 128
// tokens of width 256) on 1 and 2 workers (go test -bench LayerNormRows
// ./kernels/cpu).
func BenchmarkLayerNormRows(b *testing.B) {
	r := newRand(1)
	x := parRand(r, ir.F32, -4, 4, 2048, 256)
	dy := parRand(r, ir.F32, -1, 1, 2048, 256)
	w := parRand(r, ir.F32, -1, 1, 256)
	last := ir.MakeAttrs("axes", ir.Ints(-1))
	for _, workers := range []int{1, 2} {
		name := func(s string) string { return fmt.Sprintf("%s/workers=%d", s, workers) }
		b.Run(name("layer_norm"), func(b *testing.B) { benchPar(b, ir.OpLayerNorm, last, workers, x, w, w) })
		b.Run(name("layer_norm_grad"), func(b *testing.B) { benchPar(b, ir.OpLayerNormGrad, last, workers, dy, x, w) })
	}
}
