package onnx_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/onnx"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/internal/gputest"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
)

// fixtures are the models tests/onnx/export.py writes with PyTorch.
var fixtures = []string{"mlp", "cnn", "mixed", "shapes", "dynamic", "mlp64", "resnet_block", "mobilenet_block", "lstm", "gru", "rnn", "nanogpt", "transformer_encoder"}

// fixtureShapes are the static shapes of the inputs of the fixtures
// exported with a symbolic batch dim.
var fixtureShapes = map[string]map[string][]int{
	"dynamic": {"x": {4, 1, 8, 8}, "labels": {4}},
}

func importFixture(t *testing.T, name string) *onnx.Model {
	t.Helper()
	m, err := onnx.Options{Shapes: fixtureShapes[name]}.Import(fixture(name + ".onnx"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fixture(name string) string {
	return filepath.Join("..", "..", "tests", "testdata", "onnx", name)
}

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

func floats(ts safetensors.Tensor) []float64 {
	return kernels.Float64s(kernels.Tensor{Type: ts.Type, Data: ts.Data})
}

// newExecutor compiles m with opts and sets its params to their initial
// values and its inputs from the fixture's inputs file.
func newExecutor(t *testing.T, name string, m *onnx.Model, opts kiln.Options) kiln.Executor {
	t.Helper()
	p, err := kiln.Compile(m.Graph, opts)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	x, err := kiln.NewExecutor(p, kiln.ExecOptions{Device: opts.Device})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	for _, ts := range m.Params {
		if err := x.Set(ts.Name, kernels.Tensor{Type: ts.Type, Data: ts.Data}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ts := range readTensors(t, fixture(name+".inputs.safetensors")) {
		if err := x.Set(ts.Name, kernels.Tensor{Type: ts.Type, Data: ts.Data}); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

func close(got, want, rtol, atol float64) bool {
	return math.Abs(got-want) <= atol+rtol*math.Abs(want)
}

// tolerance is the bound a fixture's values are held to, by the dtype of
// PyTorch's loss: rtol 1e-4 (atol 1e-7) in f32, rtol 1e-7 (atol 1e-12) in
// f64, where the two differ only in summation order.
func tolerance(loss safetensors.Tensor) (rtol, atol float64) {
	if loss.Type.DType == ir.F64 {
		return 1e-7, 1e-12
	}
	return 1e-4, 1e-7
}

// TestPyTorchGrad checks that the loss and every param's gradient of each
// imported fixture equal PyTorch's (f32: rtol 1e-4; f64: rtol 1e-7).
func TestPyTorchGrad(t *testing.T) { checkPyTorchGrad(t, "cpu") }

// TestPyTorchGradGPU is TestPyTorchGrad on the GPU (WebGPU; f32).
func TestPyTorchGradGPU(t *testing.T) {
	gputest.Need(t)
	checkPyTorchGrad(t, "gpu")
}

func checkPyTorchGrad(t *testing.T, device string) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			m := importFixture(t, name)
			want := readTensors(t, fixture(name+".expected.safetensors"))
			rtol, atol := tolerance(want["loss"])
			if device == "gpu" && want["loss"].Type.DType == ir.F64 {
				t.Skip("WGSL has no f64")
			}
			x := newExecutor(t, name, m, kiln.Options{Grad: true, Device: device})
			if err := x.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
			loss, err := x.Get("loss")
			if err != nil {
				t.Fatal(err)
			}
			if got, w := kernels.Float64s(loss)[0], floats(want["loss"])[0]; !close(got, w, rtol, atol) {
				t.Errorf("loss %.7g, PyTorch %.7g", got, w)
			}
			if len(m.Params) == 0 {
				t.Fatal("no params imported")
			}
			for _, p := range m.Params {
				wg, ok := want["grad/"+p.Name]
				if !ok {
					t.Errorf("param %q is not one of PyTorch's", p.Name)
					continue
				}
				g, err := x.Get("grad/" + p.Name)
				if err != nil {
					t.Fatal(err)
				}
				got, w := kernels.Float64s(g), floats(wg)
				if len(got) != len(w) {
					t.Fatalf("grad/%s has %d elements, PyTorch's %d", p.Name, len(got), len(w))
				}
				for i := range w {
					if !close(got[i], w[i], rtol, atol) {
						t.Errorf("grad/%s[%d] = %.7g, PyTorch %.7g", p.Name, i, got[i], w[i])
						break
					}
				}
			}
			if n := len(want) - 2; n != len(m.Params) {
				t.Errorf("%d params imported, PyTorch has %d", len(m.Params), n)
			}
		})
	}
}

// TestPyTorchSGD checks that SGD steps (lr 0.1) from the imported initial
// values give PyTorch's losses.
func TestPyTorchSGD(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			m := importFixture(t, name)
			expected := readTensors(t, fixture(name+".expected.safetensors"))
			want := floats(expected["sgd_losses"])
			rtol, atol := tolerance(expected["loss"])
			opt, err := passes.DefaultOptimizer("sgd")
			if err != nil {
				t.Fatal(err)
			}
			opt.LR = 0.1
			x := newExecutor(t, name, m, kiln.Options{Grad: true, Optimizer: &opt})
			for step, w := range want {
				if err := x.Step(context.Background()); err != nil {
					t.Fatal(err)
				}
				loss, err := x.Get("loss")
				if err != nil {
					t.Fatal(err)
				}
				if got := kernels.Float64s(loss)[0]; !close(got, w, rtol, atol) {
					t.Errorf("step %d: loss %.7g, PyTorch %.7g", step, got, w)
				}
			}
		})
	}
}

// TestSymbolicDims checks that an input with a symbolic dim needs a shape,
// and that a given shape must agree with the model's static dims.
func TestSymbolicDims(t *testing.T) {
	path := fixture("dynamic.onnx")
	for _, tc := range []struct {
		shapes map[string][]int
		want   string
	}{
		{nil, `input "x": dim 0 is symbolic ("batch"); give the input a static shape`},
		{map[string][]int{"x": {4, 1, 8, 9}, "labels": {4}}, `input "x": the shape given has 9 at dim 3, the model states 8`},
		{map[string][]int{"x": {4, 8, 8}, "labels": {4}}, `input "x": the shape given has rank 3, the model's has rank 4`},
		{map[string][]int{"x": {4, 1, 8, 8}, "labels": {4}, "fc.weight": {10, 72}}, `a shape is given for "fc.weight", which is not a graph input`},
	} {
		_, err := onnx.Options{Shapes: tc.shapes}.Import(path)
		if err == nil || err.Error() != path+": "+tc.want {
			t.Errorf("shapes %v: error %v, want %s: %s", tc.shapes, err, path, tc.want)
		}
	}
}
