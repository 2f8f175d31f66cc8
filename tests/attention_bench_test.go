package tests

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// BenchmarkAttentionGPTBlock runs the attention of one GPT block, q, k, v
// [16, 8, 128, 32] f32 (B, H, T, dh), forward and backward (loss
// sum(softmax(q·kᵀ/√32 + causal)·v * r), gradients for q, k and v), with
// the default pipeline (one attention and one attention_grad) and with
// the same pipeline less attention's canonicalization (matmul, mul, add,
// softmax, matmul and their backward, softmax_grad fused), one step of
// each per iteration, alternating; run with
//
//	go test ./tests -run '^$' -bench AttentionGPTBlock -benchtime 20x
func BenchmarkAttentionGPTBlock(b *testing.B) {
	for _, causal := range []bool{true, false} {
		name := "full"
		if causal {
			name = "causal"
		}
		b.Run(name, func(b *testing.B) { attnBench(b, causal) })
	}
}

func attnBench(b *testing.B, causal bool) {
	const bs, h, n, dh = 16, 8, 128, 32
	bl := frontends.NewBuilder("gptattn")
	q, k, v := bl.Param("q", ir.F32, bs, h, n, dh), bl.Param("k", ir.F32, bs, h, n, dh), bl.Param("v", ir.F32, bs, h, n, dh)
	s := bl.Mul(bl.Matmul(q, bl.Transpose(k, 0, 1, 3, 2)), bl.Scalar(1/math.Sqrt(dh), ir.F32))
	if causal {
		tri := make([]float64, n*n)
		for i := range n {
			for j := i + 1; j < n; j++ {
				tri[i*n+j] = math.Inf(-1)
			}
		}
		s = bl.Add(s, bl.Const(ir.F32, []int{n, n}, tri...))
	}
	y := bl.Matmul(bl.Softmax(s, -1), v)
	bl.Output(bl.Sum(bl.Mul(y, bl.Input("r", ir.F32, bs, h, n, dh)), nil, false))
	g, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	arena := map[bool]int64{}
	build := func(fuse bool) *cpu.Executor {
		tg := g.Clone()
		var ps []passes.Pass
		for _, p := range passes.Pipeline(passes.Options{Grad: true}) {
			if fuse || p.Name != "canonicalize" {
				ps = append(ps, p)
			}
		}
		if err := passes.Run(tg, ps, passes.Debug{}, nil); err != nil {
			b.Fatal(err)
		}
		if n := len(tg.IDsOf(ir.OpAttentionGrad)); (n == 1) != fuse {
			b.Fatalf("fuse=%v: %d attention_grad ops", fuse, n)
		}
		p, err := planner.New(tg, planner.Options{})
		if err != nil {
			b.Fatal(err)
		}
		x, err := cpu.New(p, cpu.Options{})
		if err != nil {
			b.Fatal(err)
		}
		for name, vals := range randomFeeds(g, 1, nil, nil) {
			tn, err := x.Get(name)
			if err != nil {
				b.Fatal(err)
			}
			if err := kernels.SetFloat64s(tn, vals); err != nil {
				b.Fatal(err)
			}
		}
		arena[fuse] = p.ArenaBytes
		return x
	}
	fused, plain := build(true), build(false)
	defer fused.Close()
	defer plain.Close()
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
	b.ReportMetric(float64(t0.Nanoseconds())/float64(b.N), "unfused-ns/step")
	b.ReportMetric(float64(tf.Nanoseconds())/float64(b.N), "fused-ns/step")
	b.ReportMetric(float64(t0)/float64(tf), "unfused/fused")
	b.ReportMetric(float64(arena[false]), "unfused-arena-B")
	b.ReportMetric(float64(arena[true]), "fused-arena-B")
}
