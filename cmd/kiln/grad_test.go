package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// The linear-regression problem of the grad tests: n = 4 rows, 3 features.
var (
	linX = []float64{
		1, 2, 3,
		0.5, -1, 2,
		-2, 0.25, 1,
		3, 1, -1.5,
	}
	linT = []float64{1, -1, 0.5, 2}
	linW = []float64{0.1, -0.2, 0.3}
)

// linregModel returns linregKir with its float dtype replaced by dt.
func linregModel(dt ir.DType) string {
	return strings.ReplaceAll(linregKir, "f64", dt.String())
}

// closedForm returns the mean squared error loss = mean((xw - t)^2) and its
// gradient 2/n x^T (xw - t), computed in float64 from x, t and w.
func closedForm(x, t, w []float64) (loss float64, grad []float64) {
	n, d := len(t), len(w)
	grad = make([]float64, d)
	for i := 0; i < n; i++ {
		r := -t[i]
		for j := 0; j < d; j++ {
			r += x[i*d+j] * w[j]
		}
		loss += r * r
		for j := 0; j < d; j++ {
			grad[j] += 2 * x[i*d+j] * r / float64(n)
		}
	}
	return loss / float64(n), grad
}

// roundF32 rounds every element to float32, as an f32 tensor stores it.
func roundF32(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(float32(x))
	}
	return out
}

// tensor builds a safetensors tensor or fails the test.
func tensor(t *testing.T, name string, dt ir.DType, shape ir.Shape, v []float64) safetensors.Tensor {
	t.Helper()
	ts, err := safetensors.FromFloat64(name, dt, shape, v)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// linregInputs returns the tensors kiln grad needs for linregModel(dt).
func linregInputs(t *testing.T, dt ir.DType) []safetensors.Tensor {
	return []safetensors.Tensor{
		tensor(t, "x", dt, ir.Shape{4, 3}, linX),
		tensor(t, "t", dt, ir.Shape{4}, linT),
		tensor(t, "w", dt, ir.Shape{3}, linW),
	}
}

func writeTensors(t *testing.T, path string, ts []safetensors.Tensor) {
	t.Helper()
	if err := safetensors.WriteFile(path, ts, nil); err != nil {
		t.Fatal(err)
	}
}

// readTensors reads a safetensors file into a map by name.
func readTensors(t *testing.T, path string) map[string]safetensors.Tensor {
	t.Helper()
	ts, _, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]safetensors.Tensor{}
	for _, x := range ts {
		m[x.Name] = x
	}
	return m
}

func checkClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if d := math.Abs(got[i] - want[i]); !(d <= tol*math.Abs(want[i])) {
			t.Errorf("%s[%d] = %.17g, want %.17g (relative error %.3g > %g)", what, i, got[i], want[i], d/math.Abs(want[i]), tol)
		}
	}
}

func TestGrad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dt  ir.DType
		tol float64
	}{
		{ir.F64, 1e-12},
		{ir.F32, 1e-5},
	}
	for _, tt := range tests {
		t.Run(tt.dt.String(), func(t *testing.T) {
			dir := t.TempDir()
			model := filepath.Join(dir, "linreg.kir")
			if err := os.WriteFile(model, []byte(linregModel(tt.dt)), 0o644); err != nil {
				t.Fatal(err)
			}
			in := filepath.Join(dir, "in.safetensors")
			writeTensors(t, in, linregInputs(t, tt.dt))

			x, tg, w := linX, linT, linW
			if tt.dt == ir.F32 {
				x, tg, w = roundF32(x), roundF32(tg), roundF32(w)
			}
			wantLoss, wantGrad := closedForm(x, tg, w)

			// Flags may come before or after the file.
			for i, args := range [][]string{
				{"grad", model, "-inputs", in, "-out", filepath.Join(dir, "out0.safetensors")},
				{"grad", "-inputs", in, "-out", filepath.Join(dir, "out1.safetensors"), model},
				{"grad", "-inputs", in, model, "-out", filepath.Join(dir, "out2.safetensors")},
			} {
				out := args[len(args)-1]
				if i == 1 {
					out = args[4]
				}
				r := runKiln(t, args...)
				r.want(t, 0)
				if r.stderr != "" {
					t.Errorf("unexpected stderr:\n%s", r.stderr)
				}
				containsAll(t, "stdout", r.stdout, "wrote 1 outputs and 1 gradients to "+out)
				got := readTensors(t, out)
				if len(got) != 2 {
					t.Errorf("%s holds %d tensors, want loss and grad/w", out, len(got))
				}
				loss, ok := got["loss"]
				if !ok {
					t.Fatalf("%s has no loss", out)
				}
				if want := ir.TensorOf(tt.dt); !loss.Type.Equal(want) {
					t.Errorf("loss is %s, want %s", loss.Type, want)
				}
				checkClose(t, "loss", loss.Float64s(), []float64{wantLoss}, tt.tol)
				gw, ok := got["grad/w"]
				if !ok {
					t.Fatalf("%s has no grad/w", out)
				}
				if want := ir.TensorOf(tt.dt, 3); !gw.Type.Equal(want) {
					t.Errorf("grad/w is %s, want %s", gw.Type, want)
				}
				checkClose(t, "grad/w", gw.Float64s(), wantGrad, tt.tol)
			}
		})
	}
}

func TestGradErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := filepath.Join(dir, "linreg.kir")
	if err := os.WriteFile(model, []byte(linregKir), 0o644); err != nil {
		t.Fatal(err)
	}
	// The first output is the prediction [4], which has no gradient.
	vector := filepath.Join(dir, "vector.kir")
	if err := os.WriteFile(vector, []byte(strings.Replace(linregKir, "output %loss", "output %p, %loss", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	good := linregInputs(t, ir.F64)
	inputs := func(name string, ts ...safetensors.Tensor) string {
		path := filepath.Join(dir, name)
		writeTensors(t, path, ts)
		return path
	}
	missing := inputs("missing.safetensors", good[0], good[2])
	extra := inputs("extra.safetensors", append(good, tensor(t, "bias", ir.F64, ir.Shape{}, []float64{1}))...)
	dtype := inputs("dtype.safetensors", tensor(t, "x", ir.F32, ir.Shape{4, 3}, linX), good[1], good[2])
	shape := inputs("shape.safetensors", good[0], good[1], tensor(t, "w", ir.F64, ir.Shape{4}, []float64{1, 2, 3, 4}))
	okIn := inputs("ok.safetensors", good...)
	notST := filepath.Join(dir, "not.safetensors")
	if err := os.WriteFile(notST, []byte("x,t,w\n1,2,3\nthis is a CSV file, not safetensors\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noFile := filepath.Join(dir, "nosuch.safetensors")

	tests := []struct {
		name  string
		model string
		in    string
		msg   []string // substrings of the one line on stderr
	}{
		{"missing tensor", model, missing, []string{missing, "missing tensor", `t (f64[4])`}},
		{"extra tensor", model, extra, []string{extra, `"bias"`, "not an input or param", "expected: x, t, w"}},
		{"wrong dtype", model, dtype, []string{dtype, `"x"`, "expected f64[4,3], found f32[4,3]"}},
		{"wrong shape", model, shape, []string{shape, `"w"`, "expected f64[3], found f64[4]"}},
		{"not safetensors", model, notST, []string{notST, "header length"}},
		{"no inputs file", model, noFile, []string{noFile, "no such file"}},
		{"non-scalar loss", vector, okIn, []string{vector, "autodiff", "first output %p", "found f64[4]"}},
		{"no model file", filepath.Join(dir, "nosuch.kir"), okIn, []string{filepath.Join(dir, "nosuch.kir"), "no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outDir := t.TempDir()
			out := filepath.Join(outDir, "out.safetensors")
			r := runKiln(t, "grad", tt.model, "-inputs", tt.in, "-out", out)
			r.want(t, 1)
			line := oneLine(t, r.stderr)
			t.Log(line)
			containsAll(t, "stderr", line, append([]string{"kiln grad: "}, tt.msg...)...)
			if r.stdout != "" {
				t.Errorf("unexpected stdout:\n%s", r.stdout)
			}
			if entries, err := os.ReadDir(outDir); err != nil || len(entries) != 0 {
				t.Errorf("a failed run left files in the -out directory: %v %v", entries, err)
			}
		})
	}

	t.Run("usage", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out.safetensors")
		for _, args := range [][]string{
			{"grad", model, "-out", out},
			{"grad", model, "-inputs", okIn},
			{"grad", "-inputs", okIn, "-out", out},
			{"grad", model, model, "-inputs", okIn, "-out", out},
			{"grad", model, "-inputs"},
		} {
			r := runKiln(t, args...)
			if r.code != 2 {
				t.Errorf("kiln %s: exit status %d, want 2\n%s", strings.Join(args, " "), r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, "usage: kiln grad ") {
				t.Errorf("kiln %s: no usage line on stderr:\n%s", strings.Join(args, " "), r.stderr)
			}
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("a usage error created %s (%v)", out, err)
		}
	})

	t.Run("unwritable out", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "nosuchdir", "out.safetensors")
		r := runKiln(t, "grad", model, "-inputs", okIn, "-out", out)
		r.want(t, 1)
		containsAll(t, "stderr", oneLine(t, r.stderr), out)
	})
}

// TestGradNoParams runs a graph without params: kiln grad writes its
// outputs and no gradient.
func TestGradNoParams(t *testing.T) {
	t.Parallel()
	model := writeFile(t, "forward.kir", strings.Replace(noParamsKir, "output %s", "output %s, %y", 1))
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.safetensors"), filepath.Join(dir, "out.safetensors")
	writeTensors(t, in, []safetensors.Tensor{tensor(t, "x", ir.F32, ir.Shape{2, 3}, []float64{1, -2, 3, -4, 5, 6})})
	r := runKiln(t, "grad", model, "-inputs", in, "-out", out)
	r.want(t, 0)
	containsAll(t, "stdout", r.stdout, "wrote 2 outputs and 0 gradients")
	got := readTensors(t, out)
	if len(got) != 2 {
		t.Errorf("%s holds %d tensors, want s and y", out, len(got))
	}
	checkClose(t, "s", got["s"].Float64s(), []float64{15}, 0)
	if y := got["y"]; !y.Type.Equal(ir.TensorOf(ir.F32, 2, 3)) {
		t.Errorf("y is %s, want f32[2,3]", y.Type)
	}
	checkClose(t, "y", got["y"].Float64s(), []float64{1, 0, 3, 0, 5, 6}, 0)
}

// TestGradInitErrors checks that a tensor of -init that is no param of the
// model is refused on one line naming the -init file.
func TestGradInitErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.safetensors")
	x, err := safetensors.FromFloat64("x", ir.F32, ir.Shape{1}, []float64{0})
	if err != nil {
		t.Fatal(err)
	}
	if err := safetensors.WriteFile(bad, []safetensors.Tensor{x}, nil); err != nil {
		t.Fatal(err)
	}
	r := runKiln(t, "grad", onnxFixture("mlp.onnx"), "-init", bad, "-inputs", onnxFixture("mlp.inputs.safetensors"), "-out", filepath.Join(dir, "out.safetensors"))
	r.want(t, 1)
	containsAll(t, "stderr", oneLine(t, r.stderr), bad, `tensor "x" is not a param or state of`)
}
