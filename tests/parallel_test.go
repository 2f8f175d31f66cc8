package tests

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
)

// TestParallelBitwiseEqual trains the digits MLP, a CNN (with dropout),
// the 784-512-512-10 MLP (whose matmuls split across the workers) and the
// transformer example (whose row-wise kernels split too) with Adam, and
// the softmax step of bench/softmax_step.kir on 64 rows (whose loss, a
// sum into one value, splits by blocks),
// for three steps on 1, 2, 3 and 8 workers: every param, state, input and
// output is equal, bit for bit, to the one-worker run's.
func TestParallelBitwiseEqual(t *testing.T) {
	src, err := os.ReadFile("../examples/digits/mlp.kir")
	if err != nil {
		t.Fatal(err)
	}
	mlp, err := ir.Parse("mlp.kir", src)
	if err != nil {
		t.Fatal(err)
	}
	// The MLP 784-512-512-10 on batches of 128: its matmuls and
	// fused_matmuls are large enough to be split across the workers.
	src, err = os.ReadFile("../bench/mlp784.kir")
	if err != nil {
		t.Fatal(err)
	}
	mlp784, err := ir.Parse("mlp784.kir", src)
	if err != nil {
		t.Fatal(err)
	}
	// The transformer example: its softmax, gelu, softmax_grad and
	// cross-entropy split by rows across the workers.
	src, err = os.ReadFile("../examples/transformer/reverse.kir")
	if err != nil {
		t.Fatal(err)
	}
	transformer, err := ir.Parse("reverse.kir", src)
	if err != nil {
		t.Fatal(err)
	}
	// The softmax step on 64 rows: its loss, a sum of 65536 products into
	// one value, splits by blocks across the workers.
	src, err = os.ReadFile("../bench/softmax_step.kir")
	if err != nil {
		t.Fatal(err)
	}
	softmaxStep, err := ir.Parse("softmax_step.kir", bytes.ReplaceAll(src, []byte("[4096,1024]"), []byte("[64,1024]")))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		g    *ir.Graph
	}{{"mlp", mlp}, {"cnn", nnDigitsCNN(t, 16)}, {"mlp784", mlp784}, {"transformer", transformer}, {"softmax step", softmaxStep}} {
		t.Run(tc.name, func(t *testing.T) {
			opt, err := passes.DefaultOptimizer("adam")
			if err != nil {
				t.Fatal(err)
			}
			p, err := kiln.Compile(tc.g.Clone(), kiln.Options{Optimizer: &opt})
			if err != nil {
				t.Fatal(err)
			}
			feeds := kiln.RandomFeeds(tc.g, 7)
			run := func(workers int) map[string][]byte {
				x, err := cpu.New(p, cpu.Options{Seed: 3, Workers: workers})
				if err != nil {
					t.Fatal(err)
				}
				defer x.Close()
				for _, i := range p.Inputs {
					name := p.Buffers[i].Name
					v, err := x.Get(name)
					if err != nil {
						t.Fatal(err)
					}
					if err := kernels.SetFloat64s(v, feeds[name]); err != nil {
						t.Fatal(err)
					}
				}
				for range 3 {
					if err := x.Step(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				got := map[string][]byte{}
				for _, n := range x.Names() {
					v, _ := x.Get(n)
					got[n] = bytes.Clone(v.Data)
				}
				return got
			}
			want := run(1)
			for _, w := range []int{2, 3, 8} {
				got := run(w)
				for n, b := range want {
					if !bytes.Equal(got[n], b) {
						t.Errorf("%d workers: %s differs from the one-worker result", w, n)
					}
				}
			}
		})
	}
}
