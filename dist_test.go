package kiln_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/internal/gputest"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// distMLP is a 6-16-16-3 classifier with dropout, in dtype dt.
func distMLP(batch int, dt ir.DType) *frontends.Builder {
	b := frontends.NewBuilder("distmlp")
	x := b.Input("x", dt, batch, 6)
	y := b.Input("y", ir.I64, batch)
	h := b.Relu(b.Add(b.Matmul(x, b.Param("w1", dt, 6, 16)), b.Param("b1", dt, 16)))
	h = b.Dropout(h, 0.25, 3)
	h = b.Tanh(b.Add(b.Matmul(h, b.Param("w2", dt, 16, 16)), b.Param("b2", dt, 16)))
	logits := b.Add(b.Matmul(h, b.Param("w3", dt, 16, 3)), b.Param("b3", dt, 3))
	b.Output(b.SoftmaxCrossEntropy(logits, y), logits)
	return b
}

// distData returns n rows of 6 features and a label in 0..2.
func distData(n int) *dataset.Dataset {
	rng := rand.New(rand.NewPCG(5, 6))
	d := &dataset.Dataset{N: n, D: 6, Classes: 3, X: make([]float64, n*6), Y: make([]int64, n)}
	for i := range d.X {
		d.X[i] = rng.NormFloat64()
	}
	for i := range d.Y {
		if d.X[6*i]+d.X[6*i+1] > 0.3 {
			d.Y[i] = 1
		} else if d.X[6*i+2] < -0.5 {
			d.Y[i] = 2
		}
	}
	return d
}

// trainedParams trains the distMLP for two epochs with opts and returns
// its params by name, and the last epoch's loss and accuracy.
func trainedParams(t *testing.T, opt passes.OptimizerConfig, dt ir.DType, opts kiln.Options) (map[string][]float64, [2]float64) {
	g, err := distMLP(4, dt).Build()
	if err != nil {
		t.Error(err)
		return nil, [2]float64{}
	}
	tr, err := kiln.NewTrainer(g, opt, 7, opts)
	if err != nil {
		t.Error(err)
		return nil, [2]float64{}
	}
	defer tr.Close()
	if err := tr.Broadcast(); err != nil {
		t.Error(err)
	}
	d := distData(90) // 22 batches of 4: with 4 ranks, 5 steps and 2 batches dropped
	var last [2]float64
	for e := range 2 {
		d.Shuffle(uint64(e))
		loss, acc, err := tr.Epoch(context.Background(), d)
		if err != nil {
			t.Error(err)
			return nil, last
		}
		last = [2]float64{loss, acc}
	}
	params := map[string][]float64{}
	for _, name := range []string{"w1", "b1", "w2", "b2", "w3", "b3"} {
		v, err := tr.Executor().Get(name)
		if err != nil {
			t.Fatal(err)
		}
		params[name] = floats(v.Data, dt)
	}
	return params, last
}

func floats(b []byte, dt ir.DType) []float64 {
	var out []float64
	for i := 0; i < len(b); i += dt.Size() {
		if dt == ir.F32 {
			out = append(out, float64(math.Float32frombits(uint32(b[i])|uint32(b[i+1])<<8|uint32(b[i+2])<<16|uint32(b[i+3])<<24)))
		} else {
			var u uint64
			for k := range 8 {
				u |= uint64(b[i+k]) << (8 * k)
			}
			out = append(out, math.Float64frombits(u))
		}
	}
	return out
}

// TestDataParallelEqualsAccum checks the contract of data-parallel
// training: N ranks (goroutines on dist.Local) end with bitwise the params
// of one process accumulating N batches an update (-accum N), with
// dropout, for SGD with momentum and Adam with a schedule and clipping,
// in f32 and f64; every rank ends with the same params; and the epoch's
// loss and accuracy, reduced over the ranks, are those of the one process
// (to rounding: the loss is summed in another order).
func TestDataParallelEqualsAccum(t *testing.T) {
	t.Parallel()
	sgd, _ := passes.DefaultOptimizer("sgd")
	sgd.LR, sgd.Momentum, sgd.WeightDecay = 0.1, 0.9, 0.01
	adam, _ := passes.DefaultOptimizer("adamw")
	adam.LR, adam.Schedule, adam.Warmup, adam.Total, adam.ClipNorm = 0.02, "cosine", 2, 20, 0.5
	for _, tc := range []struct {
		name string
		opt  passes.OptimizerConfig
		dt   ir.DType
	}{{"sgd/f32", sgd, ir.F32}, {"adamw/f64", adam, ir.F64}, {"adamw/f32", adam, ir.F32}} {
		for _, ranks := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, ranks), func(t *testing.T) {
				one := tc.opt
				one.Accum = int64(ranks)
				want, wantLast := trainedParams(t, one, tc.dt, kiln.Options{Workers: 1})
				got := make([]map[string][]float64, ranks)
				last := make([][2]float64, ranks)
				var wg sync.WaitGroup
				for r, tp := range dist.Local(ranks) {
					wg.Add(1)
					go func() {
						defer wg.Done()
						got[r], last[r] = trainedParams(t, tc.opt, tc.dt, kiln.Options{Workers: 1 + r%2, Comm: dist.NewComm(tp), BucketBytes: 512})
					}()
				}
				wg.Wait()
				for r := range got {
					for name, w := range want {
						for i := range w {
							if math.Float64bits(got[r][name][i]) != math.Float64bits(w[i]) {
								t.Fatalf("rank %d: %s[%d] = %.17g, one process accumulating %d batches gives %.17g", r, name, i, got[r][name][i], ranks, w[i])
							}
						}
					}
					if last[r][1] != wantLast[1] || math.Abs(last[r][0]-wantLast[0]) > 1e-12 {
						t.Errorf("rank %d: last epoch loss %.15g accuracy %v, one process: %.15g, %v", r, last[r][0], last[r][1], wantLast[0], wantLast[1])
					}
				}
			})
		}
	}
}

// TestDataParallelGPU checks data-parallel training on the GPU, whose
// executor reduces through the host, against the CPU's (2 ranks, f32,
// within 1e-5 + 1e-4 relative).
func TestDataParallelGPU(t *testing.T) {
	gputest.Need(t)
	adam, _ := passes.DefaultOptimizer("adam")
	adam.LR = 0.02
	got := map[string][]map[string][]float64{}
	for _, device := range []string{"cpu", "gpu"} {
		got[device] = make([]map[string][]float64, 2)
		var wg sync.WaitGroup
		for r, tp := range dist.Local(2) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[device][r], _ = trainedParams(t, adam, ir.F32, kiln.Options{Device: device, Comm: dist.NewComm(tp), BucketBytes: 512})
			}()
		}
		wg.Wait()
	}
	for r := range 2 {
		for name, c := range got["cpu"][r] {
			for i, cv := range c {
				if gv := got["gpu"][r][name][i]; !(math.Abs(gv-cv) <= 1e-5+1e-4*math.Abs(cv)) {
					t.Errorf("rank %d: %s[%d]: gpu %g, cpu %g", r, name, i, gv, cv)
				}
			}
		}
	}
}
