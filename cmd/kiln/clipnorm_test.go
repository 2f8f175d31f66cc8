package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// mixedLinearKir is a loss linear in an f32 param a and an f64 param b, so
// their gradients are the inputs c and d at every step.
const mixedLinearKir = `graph mixed
input %c: f32[3]
input %d: f64[2]
param %a: f32[3]
param %b: f64[2]
%ac = mul %a, %c
%sa = sum %ac
%sa64 = cast %sa {dtype="f64"}
%bd = mul %b, %d
%sb = sum %bd
%loss = add %sa64, %sb
output %loss
`

// TestClipNormMixedDtypes runs kiln step -clip-norm on params of two
// dtypes, whose gradients c = (3, 0, 4) in f32 and d = (12, 0) in f64 have
// the joint norm 13: the sums of squares are added in f64, and each
// gradient is scaled by min(1, max/(13 + 1e-6)) in its own dtype (the f32
// factor is the f64 one rounded), as torch.nn.utils.clip_grad_norm_ does.
// The params are compared with that arithmetic done step by step in Go,
// exactly for f64 and to one f32 rounding (2^-23 relative) for f32.
func TestClipNormMixedDtypes(t *testing.T) {
	t.Parallel()
	model := writeFile(t, "mixed.kir", mixedLinearKir)
	in := filepath.Join(t.TempDir(), "in.safetensors")
	a0, b0 := []float64{1, 2, 3}, []float64{-1, 0.5}
	c, d := []float64{3, 0, 4}, []float64{12, 0}
	writeTensors(t, in, []safetensors.Tensor{
		mustTensor(t, "a", ir.F32, ir.Shape{3}, a0), mustTensor(t, "b", ir.F64, ir.Shape{2}, b0),
		mustTensor(t, "c", ir.F32, ir.Shape{3}, c), mustTensor(t, "d", ir.F64, ir.Shape{2}, d),
	})
	const steps, lr = 3, 0.1
	for _, tt := range []struct {
		name    string
		maxNorm float64
	}{
		{"clips", 6.5},
		{"does not clip", 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out.safetensors")
			runKiln(t, "step", model, "-inputs", in, "-out", out, "-steps", "3", "-optimizer", "sgd", "-lr", "0.1", "-clip-norm", ir.Float(tt.maxNorm).String()).want(t, 0)
			got := readStepOut(t, out)
			coef := math.Min(1, tt.maxNorm/(13+1e-6))
			if tt.maxNorm > 13 && coef != 1 {
				t.Fatalf("coefficient %g, want 1", coef)
			}
			coef32 := float32(coef)
			a := make([]float32, 3)
			for i := range a {
				a[i] = float32(a0[i])
			}
			b := append([]float64(nil), b0...)
			for range steps {
				for i := range a {
					a[i] -= float32(c[i]) * coef32 * float32(lr)
				}
				for i := range b {
					b[i] -= d[i] * coef * lr
				}
			}
			for i, v := range got["a"].Float64s() {
				if w := float64(a[i]); math.Abs(v-w) > 0x1p-23*math.Abs(w) {
					t.Errorf("a[%d] = %.9g, want %.9g", i, v, w)
				}
			}
			for i, v := range got["b"].Float64s() {
				if v != b[i] {
					t.Errorf("b[%d] = %.17g, want %.17g", i, v, b[i])
				}
			}
		})
	}
}

// TestClipNormRefusesBadValues checks that a negative, infinite or NaN
// -clip-norm is a usage error naming the value.
func TestClipNormRefusesBadValues(t *testing.T) {
	t.Parallel()
	model := writeFile(t, "mixed.kir", mixedLinearKir)
	for _, v := range []string{"-1", "inf", "NaN"} {
		r := runKiln(t, "compile", model, "-clip-norm", v, "-o", filepath.Join(t.TempDir(), "p.kplan"))
		r.want(t, 2)
		containsAll(t, v, r.stderr, "gradient norm clip must be finite and >= 0 (0: none), found ")
	}
}

// TestRunAppliesPlanSettings checks that norm clipping and gradient
// accumulation are in the plan: kiln run of a plan compiled with one gives
// bitwise the params of kiln train with it, which differ from those of a
// run without it.
func TestRunAppliesPlanSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	tiny := writeFile(t, "tiny.kir", tinyMLPKir)
	data := writeFile(t, "blobs.csv", separableCSV(100, 2, 3))
	read := func(name string) []byte {
		b, err := os.ReadFile(path(name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	runKiln(t, "train", tiny, "-data", data, "-epochs", "2", "-save", path("plain")).want(t, 0)
	for _, setting := range [][]string{{"-clip-norm", "0.05"}, {"-accum", "3"}} {
		name := setting[0][1:]
		runKiln(t, append([]string{"compile", tiny, "-o", path(name + ".kplan")}, setting...)...).want(t, 0)
		runKiln(t, append([]string{"train", tiny, "-data", data, "-epochs", "2", "-save", path(name + ".train")}, setting...)...).want(t, 0)
		runKiln(t, "run", path(name+".kplan"), "-data", data, "-epochs", "2", "-save", path(name+".run")).want(t, 0)
		if !bytes.Equal(read(name+".train"), read(name+".run")) {
			t.Errorf("kiln run of a plan compiled with %s gives other params than kiln train %s", setting, setting)
		}
		if bytes.Equal(read(name+".train"), read("plain")) {
			t.Errorf("%s changed no param", setting)
		}
	}
}
