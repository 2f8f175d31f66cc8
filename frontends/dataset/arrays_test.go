package dataset

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// TestLoadArrays reads testdata/train.npz (written by tests/npy/write.py
// with numpy) and the same arrays as a safetensors file, for each kind of
// target, and checks every value.
func TestLoadArrays(t *testing.T) {
	feats := make([]float64, 24)
	for i := range feats {
		feats[i] = (float64(i) - 11) / 4
	}
	arrays, err := func() ([]safetensors.Tensor, error) {
		d, err := LoadArrays("testdata/train.npz", ArraySpec{Features: "x", Targets: "y", FeatureDims: ir.Shape{2, 2}})
		if err != nil {
			return nil, err
		}
		x, _ := safetensors.FromFloat64("x", ir.F32, ir.Shape{6, 2, 2}, d.X)
		y, _ := safetensors.FromFloat64("y", ir.I64, ir.Shape{6}, []float64{0, 1, 2, 0, 1, 2})
		r, _ := safetensors.FromFloat64("r", ir.F64, ir.Shape{6}, []float64{-1, -0.6, -0.2, 0.2, 0.6, 1})
		tok, _ := safetensors.FromFloat64("tok", ir.I32, ir.Shape{6, 2}, []float64{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1})
		return []safetensors.Tensor{x, y, r, tok}, nil
	}()
	if err != nil {
		t.Fatal(err)
	}
	b, err := safetensors.Encode(arrays, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(t.TempDir(), "train.safetensors")
	if err := os.WriteFile(st, b, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"testdata/train.npz", st} {
		for _, tc := range []struct {
			name string
			spec ArraySpec
			want Dataset
		}{
			{"labels", ArraySpec{Features: "x", Targets: "y", FeatureDims: ir.Shape{2, 2}, Classes: 3},
				Dataset{N: 6, D: 4, X: feats, Y: []int64{0, 1, 2, 0, 1, 2}, Classes: 3}},
			{"regression", ArraySpec{Features: "x", Targets: "r", FeatureDims: ir.Shape{2, 2}, FloatTargets: true},
				Dataset{N: 6, D: 4, X: feats, R: []float64{-1, -0.6, -0.2, 0.2, 0.6, 1}}},
			{"token labels", ArraySpec{Features: "tok", Targets: "tok", FeatureDims: ir.Shape{2}, TargetDims: ir.Shape{2}, Tokens: true},
				Dataset{N: 6, D: 2, K: 2, X: []float64{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1}, Y: []int64{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1}, Classes: 5}},
		} {
			t.Run(filepath.Base(file)+"/"+tc.name, func(t *testing.T) {
				d, err := LoadArrays(file, tc.spec)
				if err != nil {
					t.Fatal(err)
				}
				w := tc.want
				if d.N != w.N || d.D != w.D || d.K != w.K || d.Classes != w.Classes || !slices.Equal(d.X, w.X) || !slices.Equal(d.Y, w.Y) {
					t.Errorf("got %+v\nwant %+v", *d, w)
				}
				// linspace's values differ from the decimals in the last bit.
				if len(d.R) != len(w.R) {
					t.Fatalf("R %v, want %v", d.R, w.R)
				}
				for i := range d.R {
					if diff := d.R[i] - w.R[i]; diff > 1e-15 || diff < -1e-15 {
						t.Errorf("R[%d] = %v, want %v", i, d.R[i], w.R[i])
					}
				}
			})
		}
	}
}

// TestFromArraysErrors checks that each array that does not fit the model
// gives one line naming the file and the array.
func TestFromArraysErrors(t *testing.T) {
	a := func(name string, dt ir.DType, shape ir.Shape, v ...float64) safetensors.Tensor {
		if v == nil {
			v = make([]float64, shape.NumElements())
		}
		ts, err := safetensors.FromFloat64(name, dt, shape, v)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	spec := ArraySpec{Features: "x", Targets: "y", FeatureDims: ir.Shape{3}, Classes: 2}
	x := a("x", ir.F32, ir.Shape{2, 3})
	y := a("y", ir.I64, ir.Shape{2})
	for _, tc := range []struct {
		name   string
		arrays []safetensors.Tensor
		spec   ArraySpec
		want   string
	}{
		{"no features", []safetensors.Tensor{y, a("z", ir.F32, ir.Shape{1})}, spec, `d: expected an array "x" (the model's features), found only "y", "z"`},
		{"no targets", []safetensors.Tensor{x}, spec, `d: expected an array "y" (the model's targets), found only "x"`},
		{"feature dims", []safetensors.Tensor{a("x", ir.F32, ir.Shape{2, 4}), y}, spec, `d: array "x": expected shape [N,3] (examples along the first axis), found [2,4]`},
		{"scalar", []safetensors.Tensor{a("x", ir.F32, ir.Shape{}), y}, spec, `d: array "x": expected shape [N,3] (examples along the first axis), found []`},
		{"target dims", []safetensors.Tensor{x, a("y", ir.I64, ir.Shape{2, 1})}, spec, `d: array "y": expected shape [N] (examples along the first axis), found [2,1]`},
		{"examples", []safetensors.Tensor{x, a("y", ir.I64, ir.Shape{3})}, spec, `d: array "y" has 3 examples, array "x" has 2`},
		{"none", []safetensors.Tensor{a("x", ir.F32, ir.Shape{0, 3}), a("y", ir.I64, ir.Shape{0})}, spec, `d: array "x": expected at least one example, found none`},
		{"float labels", []safetensors.Tensor{x, a("y", ir.F32, ir.Shape{2})}, spec, `d: array "y": expected integer labels (i32 or i64) for the model's input, found f32`},
		{"float tokens", []safetensors.Tensor{x, y}, ArraySpec{Features: "x", Targets: "y", FeatureDims: ir.Shape{3}, Tokens: true}, `d: array "x": expected integer tokens (i32 or i64) for the model's input, found f32`},
		{"label range", []safetensors.Tensor{x, a("y", ir.I64, ir.Shape{2}, 1, 2)}, spec, `d: array "y": example 1: expected labels from 0 to 1, found 2`},
		{"negative label", []safetensors.Tensor{x, a("y", ir.I32, ir.Shape{2}, -1, 0)}, spec, `d: array "y": example 0: expected labels from 0 to 1, found -1`},
		{"nan feature", []safetensors.Tensor{a("x", ir.F64, ir.Shape{2, 3}, 0, 0, 0, 0, 1, math.NaN()), y}, spec, `d: array "x": example 1: expected finite features, found NaN`},
		{"inf target", []safetensors.Tensor{x, a("y", ir.F32, ir.Shape{2}, 0, math.Inf(1))}, ArraySpec{Features: "x", Targets: "y", FeatureDims: ir.Shape{3}, FloatTargets: true}, `d: array "y": example 1: expected finite targets, found +Inf`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromArrays("d", tc.arrays, tc.spec)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v\nwant      %s", err, tc.want)
			}
		})
	}
}

// TestLoadArraysFileErrors checks errors of the file itself.
func TestLoadArraysFileErrors(t *testing.T) {
	spec := ArraySpec{Features: "x", Targets: "y"}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.npz")
	os.WriteFile(bad, []byte("hello"), 0o666)
	for _, tc := range []struct{ path, want string }{
		{"data.csv", "data.csv: expected a .safetensors or .npz file of arrays"},
		{"x.npy", `x.npy: expected a file of the arrays "x" and "y", found a .npy file, which holds one array; numpy.savez("data.npz", x=..., y=...) writes both`},
		{bad, bad + ": expected a .npz file (a zip archive of .npy arrays)"},
		{filepath.Join(dir, "none.safetensors"), "no such file"},
	} {
		_, err := LoadArrays(tc.path, spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.path, err, tc.want)
		}
	}
}
