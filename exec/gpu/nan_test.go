package gpu_test

import (
	"context"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/internal/nanref"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// TestNaNMatchesPyTorch runs the f32 NaN/Inf reference cases
// (tests/pytorch/nan_reference.py) on the GPU, at -O0 and at the default
// -O2, and compares the result and every gradient with PyTorch's as the
// CPU test does: NaN where PyTorch gives NaN, the same infinities, and
// finite values within 1e-4 relative (the GPU's special functions are not
// the CPU's); where kiln departs from PyTorch on purpose
// (nanref.Deviations), the elements where either side is NaN are skipped.
func TestNaNMatchesPyTorch(t *testing.T) {
	needGPU(t)
	cases, err := nanref.Load("../../tests/testdata/pytorch")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		for _, o0 := range []bool{true, false} {
			name := c.Name + "/O2"
			if o0 {
				name = c.Name + "/O0"
			}
			t.Run(name, func(t *testing.T) {
				g, err := c.Parse(ir.F32)
				if err != nil {
					t.Fatal(err)
				}
				p, err := kiln.Compile(g, kiln.Options{Grad: c.Grad, O0: o0, Device: "gpu"})
				if err != nil {
					t.Fatal(err)
				}
				x, err := gpu.New(p, gpu.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer x.Close()
				for _, i := range append(append([]int(nil), p.Inputs...), p.Params...) {
					b := p.Buffers[i]
					tn := kernels.New(b.Type)
					if err := kernels.SetFloat64s(tn, c.Inputs[b.Name]); err != nil {
						t.Fatalf("%s: %v", b.Name, err)
					}
					if err := x.Set(b.Name, tn); err != nil {
						t.Fatal(err)
					}
				}
				if err := x.Step(context.Background()); err != nil {
					t.Fatalf("step: %v", err)
				}
				for k, want := range c.Want["f32"] {
					tn, err := x.Get(k)
					if err != nil {
						t.Fatal(err)
					}
					got := kernels.Float64s(tn)
					if _, ok := c.Deviation(ir.F32, k); ok {
						got, want = nanref.DropNaNs(got, want)
					}
					if msg := nanref.Compare(got, want, 1e-4, 1e-5); msg != "" {
						t.Errorf("%s%s (GPU %v, torch %v)", k, msg, got, want)
					}
				}
			})
		}
	}
}
