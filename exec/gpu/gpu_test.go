package gpu_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/internal/gputest"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/kernels/wgsl/wgsltest"
	"github.com/kilnml/kiln/planner"
)

// needGPU is gputest.Need: skip without an adapter, except in CI.
var needGPU = gputest.Need

// randomTensor fills a tensor of type ty with values in [-3, 3) (floats),
// 0 or 1 (bool), or labels in [0, labels) (integers, labels > 0).
func randomTensor(rng *rand.Rand, ty ir.Type, labels int) kernels.Tensor {
	t := kernels.New(ty)
	v := make([]float64, ty.Shape.NumElements())
	for i := range v {
		switch {
		case ty.DType.IsFloat():
			v[i] = rng.Float64()*6 - 3
		case ty.DType == ir.Bool:
			v[i] = float64(rng.IntN(2))
		default:
			v[i] = float64(rng.IntN(max(labels, 1)))
		}
	}
	if err := kernels.SetFloat64s(t, v); err != nil {
		panic(err)
	}
	return t
}

func plan(t testing.TB, src string) *planner.Plan {
	t.Helper()
	g, err := ir.Parse("test.kir", []byte(src))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	p, err := planner.New(g, planner.Options{})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return p
}

// runBoth runs p once on the CPU and on the GPU with the same random
// inputs (labels in [0, labels)) and the same initial params, and returns
// every output by name: CPU's, then GPU's.
func runBoth(t testing.TB, p *planner.Plan, seed uint64, labels int) (map[string][]float64, map[string][]float64) {
	t.Helper()
	c, err := cpu.New(p, cpu.Options{Seed: seed, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := gpu.New(p, gpu.Options{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, i := range p.Inputs {
		b := p.Buffers[i]
		in := randomTensor(rng, b.Type, labels)
		if err := c.Set(b.Name, in); err != nil {
			t.Fatal(err)
		}
		if err := g.Set(b.Name, in); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Step(context.Background()); err != nil {
		t.Fatalf("cpu: %v", err)
	}
	if err := g.Step(context.Background()); err != nil {
		t.Fatalf("gpu: %v", err)
	}
	want, got := map[string][]float64{}, map[string][]float64{}
	for _, o := range p.Outputs {
		ct, err := c.Get(o.Name)
		if err != nil {
			t.Fatal(err)
		}
		gt, err := g.Get(o.Name)
		if err != nil {
			t.Fatal(err)
		}
		want[o.Name], got[o.Name] = kernels.Float64s(ct), kernels.Float64s(gt)
	}
	return want, got
}

// close reports whether got is within rtol of want, relative to |want|,
// with atol for values near 0; NaNs and infinities must match.
func close(got, want, rtol, atol float64) bool {
	if math.IsNaN(want) || math.IsNaN(got) {
		return math.IsNaN(want) && math.IsNaN(got)
	}
	if math.IsInf(want, 0) || math.IsInf(got, 0) {
		return got == want
	}
	return math.Abs(got-want) <= rtol*math.Abs(want)+atol
}

func compare(t testing.TB, name string, got, want []float64, rtol, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", name, len(got), len(want))
	}
	bad := 0
	for i := range want {
		if !close(got[i], want[i], rtol, atol) {
			if bad < 5 {
				t.Errorf("%s[%d] = %v on the GPU, %v on the CPU (rtol %g, atol %g)", name, i, got[i], want[i], rtol, atol)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d elements differ", name, bad, len(want))
	}
}

// Kernel tolerances: 1e-4 relative for f32, with an absolute floor of 1e-6
// (elementwise, where values are O(1)) or 1e-5 per ~100 terms summed
// (matmul, reductions: the GPU adds in another order than the CPU).
const (
	rtol   = 1e-4
	atolEw = 1e-6
)

// kernelCase is one graph body whose outputs are compared (shared with
// kernels/wgsl's generation tests).
type kernelCase = wgsltest.Case

// TestKernelsMatchCPU runs every case of wgsltest.Cases on the CPU and the
// GPU (rtol 1e-4, each case's absolute floor).
func TestKernelsMatchCPU(t *testing.T) {
	needGPU(t)
	runCases(t, wgsltest.Cases())
}

// runCases runs each kernel case on the CPU and the GPU and compares every
// output (rtol 1e-4, the case's Atol or atolEw, scaled by the largest
// expected magnitude when the case says so).
func runCases(t *testing.T, cases []kernelCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.Name, " ", "_"), func(t *testing.T) {
			p := plan(t, "graph k\n"+tc.Src)
			want, got := runBoth(t, p, 1, tc.Labels)
			atol := tc.Atol
			if atol == 0 {
				atol = atolEw
			}
			for name := range want {
				scale := 1.0
				if tc.Scaled {
					for _, v := range want[name] {
						scale = max(scale, math.Abs(v))
					}
				}
				compare(t, name, got[name], want[name], rtol, atol*scale)
			}
		})
	}
}
