package tests

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	kcpu "github.com/kilnml/kiln/kernels/cpu"
	"github.com/kilnml/kiln/planner"
)

// parCritPool is a kernels.Parallel that runs each part on a goroutine
// locked to its thread and adds up, per Run, what the Run takes with a
// core per worker: the parts' CPU times handed out in order, each to the
// worker that is free first, as the executor's pool hands them out; with
// no more parts than workers, the longest part.
type parCritPool struct {
	workers int
	crit    time.Duration
	times   []time.Duration
	free    []time.Duration // per worker, when it is free in the Run
}

func (p *parCritPool) Workers() int { return p.workers }

func (p *parCritPool) Run(n int, body func(part int)) {
	p.times = slices.Grow(p.times[:0], n)[:n]
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			t0 := parThreadCPU()
			body(i)
			p.times[i] = parThreadCPU() - t0
		}()
	}
	wg.Wait()
	p.free = slices.Grow(p.free[:0], p.workers)[:p.workers]
	clear(p.free)
	for _, t := range p.times {
		i := slices.Index(p.free, slices.Min(p.free))
		p.free[i] += t
	}
	p.crit += slices.Max(p.free)
}

// parGPT returns a GPT-style model: 4 pre-norm blocks of width 256 with 8
// heads and an MLP of 1024, sequences of 128 tokens in batches of 16, a
// vocabulary of 256.
func parGPT(b *testing.B) *ir.Graph {
	g := frontends.NewBuilder("gpt4")
	x := g.Input("x", ir.I64, 16, 128)
	y := g.Input("y", ir.I64, 16, 128)
	logits := g.Transformer(x, frontends.TransformerOptions{Vocab: 256, DModel: 256, Blocks: 4,
		BlockOptions: frontends.BlockOptions{Heads: 8, Hidden: 1024}})
	g.Output(g.SoftmaxCrossEntropy(logits, g.Reshape(y, 16*128)))
	gr, err := g.Build()
	if err != nil {
		b.Fatal(err)
	}
	return gr
}

// BenchmarkStepCriticalPath runs the Adam training step of bench's softmax,
// MLP and CNN models, the transformer example and a GPT-style model (parGPT)
// kernel after kernel, built for 1 and for 2 workers, and reports
// crit-cpu-ns/op: the CPU time of the steps on the calling thread plus,
// for each split kernel call, that of its longest part. It is the step's
// time on idle cores with the kernels run one after another (the executor
// also runs independent steps side by side), which a machine shared with
// other work does not distort as it does wall-clock time; ratio = the
// 2-worker figure over the 1-worker one (0.5: a perfect halving).
//
//	go test ./tests -run '^$' -bench StepCriticalPath -benchtime 3x
func BenchmarkStepCriticalPath(b *testing.B) {
	models := []struct {
		name string
		g    func() *ir.Graph
	}{
		{"softmax_train", func() *ir.Graph { return parKir(b, "../bench/softmax_train.kir") }},
		{"mlp784", func() *ir.Graph { return parKir(b, "../bench/mlp784.kir") }},
		{"cnn28", func() *ir.Graph { return parKir(b, "../bench/cnn28.kir") }},
		{"transformer", func() *ir.Graph { return parKir(b, "../examples/transformer/reverse.kir") }},
		{"gpt4", func() *ir.Graph { return parGPT(b) }},
	}
	for _, m := range models {
		g := m.g()
		p, err := kiln.Compile(g, kiln.Options{Optimizer: optimizer(b, "adam", 0.001)})
		if err != nil {
			b.Fatal(err)
		}
		var one float64
		for _, w := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/workers=%d", m.name, w), func(b *testing.B) {
				crit := parCritStep(b, p, w)
				b.ReportMetric(crit, "crit-cpu-ns/op")
				if w == 1 {
					one = crit
				} else if one > 0 {
					b.ReportMetric(crit/one, "ratio")
				}
			})
		}
	}
}

// parKir parses the .kir file at path.
func parKir(b *testing.B, path string) *ir.Graph {
	src, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	g, err := ir.Parse(path, src)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// parCritStep builds every kernel step of p for the given number of
// workers, over buffers of their own (floats random in [-1, 1), integers
// 0), runs the steps in order b.N times and returns the critical-path CPU
// time per step.
func parCritStep(b *testing.B, p *planner.Plan, workers int) float64 {
	r := rand.New(rand.NewPCG(1, 2))
	bufs := make([]kernels.Tensor, len(p.Buffers))
	for i, buf := range p.Buffers {
		t := kernels.Tensor{Type: buf.Type, Data: make([]byte, buf.Type.Bytes())}
		if buf.Type.DType.IsFloat() {
			v := make([]float64, buf.Type.Shape.NumElements())
			for j := range v {
				v[j] = 2*r.Float64() - 1
			}
			if err := kernels.SetFloat64s(t, v); err != nil {
				b.Fatal(err)
			}
		}
		bufs[i] = t
	}
	pool := &parCritPool{workers: workers}
	type step struct {
		f    kernels.Func
		out  kernels.Tensor
		args []kernels.Tensor
	}
	var steps []step
	for _, st := range p.Steps {
		if st.Kind == planner.Copy {
			continue
		}
		types := make([]ir.Type, len(st.Args))
		args := make([]kernels.Tensor, len(st.Args))
		for j, a := range st.Args {
			types[j], args[j] = p.Buffers[a].Type, bufs[a]
		}
		f, err := kcpu.Kernels.Build(&kernels.Node{Op: st.Op, Attrs: st.Attrs, Args: types, Out: p.Buffers[st.Out].Type, Par: pool})
		if err != nil {
			b.Fatal(err)
		}
		steps = append(steps, step{f, bufs[st.Out], args})
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var own time.Duration
	for b.Loop() {
		for _, s := range steps {
			t0 := parThreadCPU()
			if err := s.f(s.out, s.args); err != nil {
				b.Fatal(err)
			}
			own += parThreadCPU() - t0
		}
	}
	return float64(own+pool.crit) / float64(b.N)
}
