package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/internal/gputest"
	"github.com/kilnml/kiln/ir"
)

// TestEvalONNX runs kiln eval on the PyTorch fixtures, with the params
// taken from the ONNX initializers: the only output, the loss, equals
// PyTorch's (f32: rtol 1e-4, atol 1e-7).
func TestEvalONNX(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"mlp", "cnn", "mixed", "shapes"} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.safetensors")
			r := runKiln(t, "eval", onnxFixture(name+".onnx"), "-inputs", onnxFixture(name+".inputs.safetensors"), "-out", out)
			r.want(t, 0)
			containsAll(t, "stdout", r.stdout, "wrote 1 outputs to "+out)
			got := readTensors(t, out)
			want := readTensors(t, onnxFixture(name+".expected.safetensors"))["loss"]
			if len(got) != 1 {
				t.Fatalf("kiln eval wrote %d tensors, want the loss alone", len(got))
			}
			g, w := got["loss"].Float64s(), want.Float64s()
			if len(g) != 1 || len(w) != 1 || math.Abs(g[0]-w[0]) > 1e-7+1e-4*math.Abs(w[0]) {
				t.Errorf("loss %v, PyTorch %v", g, w)
			}
		})
	}
}

// evalInputs writes the inputs of testdata/eval.kir, and w when withW.
func evalInputs(t *testing.T, withW bool) string {
	t.Helper()
	ts := []safetensors.Tensor{
		mustTensor(t, "x", ir.F32, ir.Shape{2, 3}, []float64{1, -2, 3, -4, 5, -6}),
		mustTensor(t, "d", ir.F64, ir.Shape{2}, []float64{0.5, -1.25}),
		mustTensor(t, "n", ir.I64, ir.Shape{2}, []float64{7, -1 << 40}),
		mustTensor(t, "i", ir.I32, ir.Shape{2}, []float64{3, -46341}),
	}
	if withW {
		ts = append(ts, mustTensor(t, "w", ir.F32, ir.Shape{3}, []float64{0.5, 0.25, 2}))
	}
	path := filepath.Join(t.TempDir(), "in.safetensors")
	if err := safetensors.WriteFile(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustTensor(t *testing.T, name string, dt ir.DType, shape ir.Shape, v []float64) safetensors.Tensor {
	t.Helper()
	ts, err := safetensors.FromFloat64(name, dt, shape, v)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestEvalKir evaluates testdata/eval.kir, whose outputs have every dtype,
// and checks each against values computed here by hand: exactly, as each
// is one rounding of exact arithmetic (the sums of three f32 products are
// exact here) or an integer; exp in f64 within 1 ulp. Dropout is off.
func TestEvalKir(t *testing.T) {
	t.Parallel()
	model := filepath.Join("testdata", "eval.kir")
	out := filepath.Join(t.TempDir(), "out.safetensors")
	runKiln(t, "eval", model, "-inputs", evalInputs(t, true), "-out", out).want(t, 0)
	got := readTensors(t, out)
	x := [][]float64{{1, -2, 3}, {-4, 5, -6}}
	w := []float64{0.5, 0.25, 2}
	var s, drop []float64
	for _, row := range x {
		sum := 0.0
		for j, v := range row {
			sum += v * w[j]
			drop = append(drop, v*w[j])
		}
		s = append(s, sum)
	}
	want := map[string]struct {
		dt ir.DType
		v  []float64
	}{
		"s":    {ir.F32, s},
		"pos":  {ir.Bool, []float64{1, 0}},
		"am":   {ir.I64, []float64{2, 1}},
		"e":    {ir.F64, []float64{math.Exp(0.5), math.Exp(-1.25)}},
		"n2":   {ir.I64, []float64{14, -1 << 41}},
		"i2":   {ir.I32, []float64{9, 46341*46341 - 1<<32}}, // wraps
		"drop": {ir.F32, drop},
	}
	if len(got) != len(want) {
		t.Errorf("kiln eval wrote %d outputs, want %d", len(got), len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("no output %q", name)
			continue
		}
		if g.Type.DType != w.dt {
			t.Errorf("%s: dtype %s, want %s", name, g.Type.DType, w.dt)
		}
		gv := g.Float64s()
		if len(gv) != len(w.v) {
			t.Errorf("%s: %v, want %v", name, gv, w.v)
			continue
		}
		for k := range gv {
			tol := 0.0
			if name == "e" {
				tol = 2.3e-16 * math.Abs(w.v[k])
			}
			if math.Abs(gv[k]-w.v[k]) > tol {
				t.Errorf("%s = %v, want %v", name, gv, w.v)
				break
			}
		}
	}
}

// TestEvalErrors checks kiln eval's refusals: one line naming the tensor
// or file, exit status 1 (2 for usage errors).
func TestEvalErrors(t *testing.T) {
	t.Parallel()
	model := filepath.Join("testdata", "eval.kir")
	dir := t.TempDir()
	out := filepath.Join(dir, "out.safetensors")
	write := func(name string, ts ...safetensors.Tensor) string {
		path := filepath.Join(dir, name)
		if err := safetensors.WriteFile(path, ts, nil); err != nil {
			t.Fatal(err)
		}
		return path
	}
	full := evalInputs(t, true)
	extra := write("extra.safetensors", mustTensor(t, "bogus", ir.F32, ir.Shape{1}, []float64{1}))
	mistyped := write("mistyped.safetensors", mustTensor(t, "x", ir.F64, ir.Shape{2, 3}, make([]float64, 6)))
	initX := write("initx.safetensors", mustTensor(t, "x", ir.F32, ir.Shape{2, 3}, make([]float64, 6)))
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"missing", []string{model, "-inputs", evalInputs(t, false), "-out", out}, 1, []string{"missing tensor(s)", "w (f32[3])", "in.safetensors"}},
		{"no inputs", []string{model, "-out", out}, 1, []string{model, "missing tensor(s)", "d (f64[2])", "give them with -inputs"}},
		{"extra", []string{model, "-inputs", extra, "-out", out}, 1, []string{extra, `tensor "bogus" is not an input or param`}},
		{"mistyped", []string{model, "-inputs", mistyped, "-out", out}, 1, []string{mistyped, `tensor "x": expected f32[2,3], found f64[2,3]`}},
		{"init not a param", []string{model, "-inputs", full, "-init", initX, "-out", out}, 1, []string{initX, `tensor "x" is not a param or state of ` + model}},
		{"out is an input", []string{model, "-inputs", full, "-out", full}, 2, []string{"-out " + full + " is the input -inputs " + full}},
		{"no out", []string{model, "-inputs", full}, 2, []string{"missing -out"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runKiln(t, append([]string{"eval"}, c.args...)...)
			r.want(t, c.code)
			line := r.stderr
			if c.code == 1 {
				line = oneLine(t, r.stderr)
			}
			containsAll(t, "stderr", line, c.want...)
		})
	}
}

// TestEvalInit checks that -init sets params: eval.kir with w from -init
// gives the outputs it gives with w in -inputs, bit for bit.
func TestEvalInit(t *testing.T) {
	t.Parallel()
	model := filepath.Join("testdata", "eval.kir")
	dir := t.TempDir()
	w := filepath.Join(dir, "w.safetensors")
	if err := safetensors.WriteFile(w, []safetensors.Tensor{mustTensor(t, "w", ir.F32, ir.Shape{3}, []float64{0.5, 0.25, 2})}, nil); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	runKiln(t, "eval", model, "-inputs", evalInputs(t, true), "-out", a).want(t, 0)
	runKiln(t, "eval", model, "-inputs", evalInputs(t, false), "-init", w, "-out", b).want(t, 0)
	ta, tb := readTensors(t, a), readTensors(t, b)
	for name, x := range ta {
		if string(tb[name].Data) != string(x.Data) {
			t.Errorf("output %q differs with w from -init", name)
		}
	}
}

// TestEvalDeviceGPU evaluates the CNN fixture on the GPU: the loss is the
// CPU's within rtol 1e-5 (the GPU sums in other orders). An f64 model is
// refused on one line (WGSL has no f64).
func TestEvalDeviceGPU(t *testing.T) {
	gputest.Need(t)
	dir := t.TempDir()
	cpuOut, gpuOut := filepath.Join(dir, "cpu.safetensors"), filepath.Join(dir, "gpu.safetensors")
	in := onnxFixture("cnn.inputs.safetensors")
	runKiln(t, "eval", onnxFixture("cnn.onnx"), "-inputs", in, "-out", cpuOut).want(t, 0)
	runKiln(t, "eval", onnxFixture("cnn.onnx"), "-inputs", in, "-out", gpuOut, "-device", "gpu").want(t, 0)
	c, g := readTensors(t, cpuOut)["loss"].Float64s(), readTensors(t, gpuOut)["loss"].Float64s()
	if len(c) != 1 || len(g) != 1 || math.Abs(c[0]-g[0]) > 1e-5*math.Abs(c[0]) {
		t.Errorf("loss %v on the GPU, %v on the CPU", g, c)
	}
	f64 := writeFile(t, "f64.kir", "graph f\ninput %d: f64[2]\n%e = exp %d\noutput %e\n")
	in64 := filepath.Join(dir, "in64.safetensors")
	if err := safetensors.WriteFile(in64, []safetensors.Tensor{mustTensor(t, "d", ir.F64, ir.Shape{2}, []float64{1, 2})}, nil); err != nil {
		t.Fatal(err)
	}
	r := runKiln(t, "eval", f64, "-inputs", in64, "-out", filepath.Join(dir, "o.safetensors"), "-device", "gpu")
	r.want(t, 1)
	containsAll(t, "stderr", oneLine(t, r.stderr), f64)
}
