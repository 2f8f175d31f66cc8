package kiln_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
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
// in f32 and f64, with the optimizer state sharded over the ranks or not
// (3 ranks leave padding in the shards); every rank ends with the same
// params; and the epoch's
// loss and accuracy, reduced over the ranks, are those of the one process
// (to rounding: the loss is summed in another order).
func TestDataParallelEqualsAccum(t *testing.T) {
	t.Parallel()
	sgd, _ := passes.DefaultOptimizer("sgd")
	sgd.LR, sgd.Momentum, sgd.WeightDecay = 0.1, 0.9, 0.01
	adam, _ := passes.DefaultOptimizer("adamw")
	adam.LR, adam.Schedule, adam.Warmup, adam.Total, adam.ClipNorm = 0.02, "cosine", 2, 20, 0.5
	adamNoClip := adam
	adamNoClip.ClipNorm, adamNoClip.ClipGrad, adamNoClip.AMSGrad = 0, 0.3, true
	rms, _ := passes.DefaultOptimizer("rmsprop")
	rms.LR, rms.Centered, rms.Momentum, rms.WeightDecay = 0.01, true, 0.5, 0.01
	for _, tc := range []struct {
		name  string
		opt   passes.OptimizerConfig
		dt    ir.DType
		shard bool
	}{{"sgd/f32", sgd, ir.F32, false}, {"adamw/f64", adam, ir.F64, false}, {"adamw/f32", adam, ir.F32, false},
		{"sgd/f32/shard", sgd, ir.F32, true}, {"adamw/f64/shard", adamNoClip, ir.F64, true}, {"rmsprop/f32/shard", rms, ir.F32, true}} {
		for _, ranks := range []int{2, 3, 4} {
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
						got[r], last[r] = trainedParams(t, tc.opt, tc.dt, kiln.Options{Workers: 1 + r%2, Comm: dist.NewComm(tp), BucketBytes: 512, Shard: tc.shard})
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
// optimizer state sharded or not, within 1e-5 + 1e-4 relative).
func TestDataParallelGPU(t *testing.T) {
	gputest.Need(t)
	adam, _ := passes.DefaultOptimizer("adam")
	adam.LR = 0.02
	got := map[string][]map[string][]float64{}
	for _, device := range []string{"cpu", "gpu", "cpu/shard", "gpu/shard"} {
		got[device] = make([]map[string][]float64, 2)
		var wg sync.WaitGroup
		for r, tp := range dist.Local(2) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, shard := strings.CutSuffix(device, "/shard")
				got[device][r], _ = trainedParams(t, adam, ir.F32, kiln.Options{Device: d, Comm: dist.NewComm(tp), BucketBytes: 512, Shard: shard})
			}()
		}
		wg.Wait()
	}
	for r := range 2 {
		for name, c := range got["cpu/shard"][r] {
			for i, cv := range c {
				if gv := got["gpu/shard"][r][name][i]; !(math.Abs(gv-cv) <= 1e-5+1e-4*math.Abs(cv)) {
					t.Errorf("sharded, rank %d: %s[%d]: gpu %g, cpu %g", r, name, i, gv, cv)
				}
			}
		}
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

// TestShardedStateMemory checks that sharding the optimizer state over N
// ranks keeps 1/N of it on each rank (Adam's two moments, within the
// padding of one element per bucket and rank), and that the sharded step
// reduces, updates and gathers through reduce_scatter, shard and
// allgather.
func TestShardedStateMemory(t *testing.T) {
	g, err := distMLP(4, ir.F32).Build()
	if err != nil {
		t.Fatal(err)
	}
	adam, _ := passes.DefaultOptimizer("adam")
	stateBytes := func(ranks int, shard bool) (int64, map[ir.Op]int) {
		p, err := kiln.Compile(g, kiln.Options{Optimizer: &adam, Ranks: ranks, Shard: shard, BucketBytes: 1024})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, i := range p.States {
			if b := p.Buffers[i]; len(b.Type.Shape) > 0 {
				n += int64(b.Type.Bytes())
			}
		}
		ops := map[ir.Op]int{}
		for _, st := range p.Steps {
			ops[st.Op]++
		}
		return n, ops
	}
	whole, ops := stateBytes(4, false)
	if ops[ir.OpAllReduce] == 0 || ops[ir.OpShard] != 0 {
		t.Errorf("unsharded step: %d allreduce, %d shard; want some and none", ops[ir.OpAllReduce], ops[ir.OpShard])
	}
	params := int64(4 * (6*16 + 16 + 16*16 + 16 + 16*3 + 3))
	if whole != 2*params {
		t.Errorf("unsharded Adam state: %d bytes, want %d (two moments of every param)", whole, 2*params)
	}
	for _, ranks := range []int{2, 4} {
		got, ops := stateBytes(ranks, true)
		if ops[ir.OpReduceScatter] == 0 || ops[ir.OpReduceScatter] != ops[ir.OpAllGather] || ops[ir.OpShard] != ops[ir.OpAllGather] || ops[ir.OpAllReduce] != 0 {
			t.Errorf("%d ranks, sharded: ops %v; want as many reduce_scatter, shard and allgather, and no allreduce", ranks, ops)
		}
		buckets := int64(ops[ir.OpShard])
		if lo, hi := whole/int64(ranks), whole/int64(ranks)+2*4*buckets; got < lo || got > hi {
			t.Errorf("%d ranks, sharded: %d bytes of optimizer state a rank, want %d to %d", ranks, got, lo, hi)
		}
	}
}

// TestSameParams checks that SameParams finds a rank whose params differ
// from rank 0's, and that Broadcast makes them equal again.
func TestSameParams(t *testing.T) {
	g, err := distMLP(4, ir.F32).Build()
	if err != nil {
		t.Fatal(err)
	}
	sgd, _ := passes.DefaultOptimizer("sgd")
	errs := make([]string, 3)
	var wg sync.WaitGroup
	for r, tp := range dist.Local(3) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := kiln.NewTrainer(g, sgd, 1, kiln.Options{Comm: dist.NewComm(tp)})
			if err != nil {
				t.Error(err)
				return
			}
			defer tr.Close()
			if r == 2 {
				w, _ := tr.Executor().Get("b3")
				w.Data[0] ^= 1
			}
			if _, err := tr.SameParams(); err != nil {
				errs[r] = err.Error()
			}
			if err := tr.Broadcast(); err != nil {
				t.Error(err)
			}
			if _, err := tr.SameParams(); err != nil {
				t.Errorf("rank %d after Broadcast: %v", r, err)
			}
		}()
	}
	wg.Wait()
	for r, e := range errs {
		if !strings.Contains(e, "rank 2 ended with other params than rank 0") {
			t.Errorf("rank %d: SameParams error %q, want one naming rank 2", r, e)
		}
	}
}
