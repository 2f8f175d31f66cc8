package gpu_test

import (
	"context"
	"math"
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
				p, err := kiln.Compile(g, kiln.Options{Grad: c.Grad, O0: o0})
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

// TestDropoutKeepsNaN checks that dropout, whose mask no PyTorch reference
// can share, keeps a NaN or an infinity where it drops the element as
// PyTorch's input * mask does (NaN * 0 and Inf * 0 are NaN), on the CPU
// and the GPU.
func TestDropoutKeepsNaN(t *testing.T) {
	needGPU(t)
	p := compile(t, []byte("graph d\ninput %x: f32[64]\n%y = dropout %x {p=0.5, seed=7}\noutput %y"), kiln.Options{})
	c, g := executors(t, p)
	x := kernels.New(p.Buffers[p.Inputs[0]].Type)
	vals := make([]float64, 64)
	for i := range vals {
		vals[i] = []float64{math.NaN(), math.Inf(1), math.Inf(-1)}[i%3]
	}
	if err := kernels.SetFloat64s(x, vals); err != nil {
		t.Fatal(err)
	}
	for _, ex := range []interface {
		setter
		getter
		Step(context.Context) error
	}{c, g} {
		if err := ex.Set("x", x); err != nil {
			t.Fatal(err)
		}
		if err := ex.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		y, err := ex.Get("y")
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range kernels.Float64s(y) {
			if !math.IsNaN(v) && v != vals[i]*2 {
				t.Fatalf("%T: dropout of %v at %d = %v, want NaN (dropped) or %v", ex, vals[i], i, v, vals[i]*2)
			}
		}
	}
}
