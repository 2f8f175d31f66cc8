package main

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/planner"
)

// onnxFixture is a file tests/onnx/export.py writes with PyTorch.
func onnxFixture(name string) string {
	return filepath.Join("..", "..", "tests", "testdata", "onnx", name)
}

// TestGradONNX runs kiln grad on the PyTorch fixtures, with the params'
// values taken from the ONNX initializers, and checks the loss and every
// gradient against PyTorch's (f32: rtol 1e-4, atol 1e-7; f64: rtol 1e-7,
// atol 1e-12).
func TestGradONNX(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"mlp", "cnn", "mixed", "shapes", "mlp64", "resnet_block", "mobilenet_block", "lstm", "gru", "rnn", "nanogpt", "transformer_encoder"} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.safetensors")
			runKiln(t, "grad", onnxFixture(name+".onnx"), "-inputs", onnxFixture(name+".inputs.safetensors"), "-out", out).want(t, 0)
			got := readTensors(t, out)
			want := readTensors(t, onnxFixture(name+".expected.safetensors"))
			rtol, atol := 1e-4, 1e-7
			if want["loss"].Type.DType == ir.F64 {
				rtol, atol = 1e-7, 1e-12
			}
			n := 0
			for k, w := range want {
				if k == "sgd_losses" {
					continue
				}
				g, ok := got[k]
				if !ok {
					t.Errorf("kiln grad wrote no %q", k)
					continue
				}
				gv, wv := g.Float64s(), w.Float64s()
				if len(gv) != len(wv) {
					t.Fatalf("%s: %d values, PyTorch %d", k, len(gv), len(wv))
				}
				for i := range wv {
					if !(math.Abs(gv[i]-wv[i]) <= atol+rtol*math.Abs(wv[i])) {
						t.Errorf("%s[%d] = %.7g, PyTorch %.7g", k, i, gv[i], wv[i])
						break
					}
				}
				n++
			}
			if n != len(got) {
				t.Errorf("kiln grad wrote %d tensors, PyTorch's file has %d", len(got), n)
			}
		})
	}
}

// TestCompileONNX checks that kiln compile stores the ONNX initializers as
// the plan file's initial params.
func TestCompileONNX(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "mlp.kplan")
	runKiln(t, "compile", onnxFixture("mlp.onnx"), "-o", out).want(t, 0)
	f, err := planner.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	_, params, err := loadGraph(onnxFixture("mlp.onnx"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for _, p := range params {
		want[p.Name] = p.Data
	}
	if len(f.Params) != 4 || len(want) != 4 {
		t.Fatalf("the plan file has %d params, the model %d; want 4", len(f.Params), len(want))
	}
	for _, p := range f.Params {
		if !bytes.Equal(p.Data, want[p.Name]) {
			t.Errorf("param %q of the plan file differs from the ONNX initializer", p.Name)
		}
	}
}

// TestBadONNX checks that a damaged ONNX model gets one line naming the
// file and exit status 1.
func TestBadONNX(t *testing.T) {
	t.Parallel()
	bad := writeFile(t, "bad.onnx", "\x0a\xff\xff\xff")
	r := runKiln(t, "dump", bad)
	r.want(t, 1)
	containsAll(t, "stderr", oneLine(t, r.stderr), bad, "not an ONNX model")
}

// TestTrainONNX checks that kiln train starts from the ONNX initializers:
// with a learning rate too small to move an f32, the saved params are the
// initializers bit for bit.
func TestTrainONNX(t *testing.T) {
	t.Parallel()
	model := onnxFixture("mlp.onnx")
	saved := filepath.Join(t.TempDir(), "p.safetensors")
	runKiln(t, "train", model, "-data", "digits", "-epochs", "1", "-optimizer", "sgd", "-lr", "1e-30", "-save", saved).want(t, 0)
	_, params, err := loadGraph(model, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := readTensors(t, saved)
	if len(got) != len(params) {
		t.Fatalf("saved %d params, the model has %d", len(got), len(params))
	}
	for _, p := range params {
		if !bytes.Equal(got[p.Name].Data, p.Data) {
			t.Errorf("param %q does not start from its ONNX initializer", p.Name)
		}
	}
}

// TestTrainONNXImages trains the CNN fixture, whose input is images
// [B,1,8,8], on the digits (64 pixels a row): the training loss falls.
func TestTrainONNXImages(t *testing.T) {
	t.Parallel()
	r := runKiln(t, "train", onnxFixture("cnn.onnx"), "-data", "digits", "-epochs", "2")
	r.want(t, 0)
	var losses []float64
	for _, line := range strings.Split(r.stdout, "\n") {
		var e, n int
		var loss float64
		if _, err := fmt.Sscanf(line, "epoch %d/%d loss %g", &e, &n, &loss); err == nil {
			losses = append(losses, loss)
		}
	}
	if len(losses) != 2 || !(losses[1] < 0.9*losses[0]) {
		t.Errorf("epoch losses %v; want two, the second below 0.9 times the first\n%s", losses, r.stdout)
	}
}
