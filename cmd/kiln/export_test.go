package main

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// forward runs g's forward graph with params and inputs (by name) and
// returns the value of output name.
func forward(t *testing.T, g *ir.Graph, params []safetensors.Tensor, inputs map[string]kernels.Tensor, name string) []float64 {
	t.Helper()
	p, err := kiln.Compile(g, kiln.Options{Inference: true})
	if err != nil {
		t.Fatal(err)
	}
	x, err := kiln.NewExecutor(p, kiln.ExecOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for _, ts := range params {
		if err := x.Set(ts.Name, kernels.Tensor{Type: ts.Type, Data: ts.Data}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range g.Inputs() {
		v := g.Value(id)
		in, ok := inputs[v.Name]
		if !ok {
			t.Fatalf("no input %q", v.Name)
		}
		if err := x.Set(v.Name, in); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, err := x.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return kernels.Float64s(out)
}

// digitsBatch returns the first 32 rows of the digits data as the inputs
// x (f32[32,64]) and y (i64[32]) of the digits examples.
func digitsBatch(t *testing.T) map[string]kernels.Tensor {
	t.Helper()
	d, err := dataset.Digits()
	if err != nil {
		t.Fatal(err)
	}
	x := kernels.New(ir.Type{DType: ir.F32, Shape: ir.Shape{32, 64}})
	y := kernels.New(ir.Type{DType: ir.I64, Shape: ir.Shape{32}})
	xs := make([]float64, 32*64)
	for i := range xs {
		xs[i] = d.X[i] / 16 // the pixels are 0..16
	}
	ys := make([]float64, 32)
	for i := range ys {
		ys[i] = float64(d.Y[i])
	}
	if err := kernels.SetFloat64s(x, xs); err != nil {
		t.Fatal(err)
	}
	if err := kernels.SetFloat64s(y, ys); err != nil {
		t.Fatal(err)
	}
	return map[string]kernels.Tensor{"x": x, "y": y}
}

// TestExport trains the digits MLP and CNN one epoch, exports them with
// kiln export, re-imports the ONNX files and checks that their logits on a
// batch of digits equal the .kir models' with the trained params: bitwise
// for the MLP (the same ops), within 1e-5 + 1e-5*|x| for the CNN, whose
// batch_norm is exported as ReduceMean, Sub, Div and so on (float32
// rounding in another order). With /usr/bin/python3 and its onnx package
// present, onnx.checker checks the files too (tests/onnx/check.py).
func TestExport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tol  float64
	}{{"mlp", 0}, {"cnn", 1e-5}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			model := filepath.Join("..", "..", "examples", "digits", tc.name+".kir")
			params, out := filepath.Join(dir, "p.safetensors"), filepath.Join(dir, tc.name+".onnx")
			runKiln(t, "train", model, "-data", "digits", "-epochs", "1", "-save", params).want(t, 0)
			r := runKiln(t, "export", model, "-params", params, "-o", out)
			r.want(t, 0)
			containsAll(t, "stdout", r.stdout, "wrote "+out+": the forward graph of digits_"+tc.name+" to [%logits] (ONNX opset 17, ")
			g, _, err := loadGraph(model, nil)
			if err != nil {
				t.Fatal(err)
			}
			trained, _, err := safetensors.ReadFile(params)
			if err != nil {
				t.Fatal(err)
			}
			og, oparams, err := loadGraph(out, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(og.Inputs()); n != 1 {
				t.Errorf("the exported model has %d inputs, want 1 (x)", n)
			}
			in := digitsBatch(t)
			want := forward(t, g, trained, in, "logits")
			got := forward(t, og, oparams, in, "logits")
			for i := range want {
				if d := math.Abs(got[i] - want[i]); d > tc.tol*(1+math.Abs(want[i])) || math.IsNaN(got[i]) {
					t.Fatalf("logits[%d] = %.9g after export, %.9g in kiln", i, got[i], want[i])
				}
			}
			checkONNX(t, out)
		})
	}
}

// checkONNX runs onnx.checker on path through tests/onnx/check.py when
// /usr/bin/python3 has the onnx package (CI has not: it skips).
func checkONNX(t *testing.T, path string) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import onnx").Run(); err != nil {
		t.Logf("onnx.checker not run: /usr/bin/python3 with onnx is not installed")
		return
	}
	outb, err := exec.Command("/usr/bin/python3", filepath.Join("..", "..", "tests", "onnx", "check.py"), path).CombinedOutput()
	if err != nil {
		t.Errorf("onnx.checker on %s: %v\n%s", path, err, outb)
	}
}

// TestExportErrors checks kiln export's one-line errors.
func TestExportErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lp := writeFile(t, "lp.kir", "graph lp\ninput %x: f32[4]\n%a = log1p %x\n%l = sum %a\noutput %l, %a\n")
	only := writeFile(t, "only.kir", "graph only\nparam %w: f32[3]\n%l = sum %w\noutput %l\n")
	bad := filepath.Join(dir, "bad.safetensors")
	if err := os.WriteFile(bad, mustEncode(t, []safetensors.Tensor{{Name: "w9", Type: ir.Type{DType: ir.F32, Shape: ir.Shape{1}}, Data: make([]byte, 4)}}), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "o.onnx")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"export", digitsMLP, "-o", out}, 2, "kiln export: missing -params P.safetensors: " + digitsMLP + " has 4 params and no values for them"},
		{[]string{"export", digitsMLP, "-params", bad}, 2, "kiln export: missing -o FILE.onnx"},
		{[]string{"export", digitsMLP, "-params", bad, "-o", out}, 1, "kiln export: " + digitsMLP + ` with -params ` + bad + `: tensor "w9" of the params is not a param of graph digits_mlp`},
		{[]string{"export", only, "-o", out, "-params", bad}, 1, "kiln export: " + only + ": the only output, %l, is the loss; -with-loss exports it"},
		{[]string{"export", lp, "-o", out}, 1, "kiln export: " + lp + ": %a: op log1p has no ONNX form in kiln's export"},
	} {
		r := runKiln(t, tc.args...)
		r.want(t, tc.code)
		if first, _, _ := strings.Cut(r.stderr, "\n"); !strings.Contains(first, tc.want) {
			t.Errorf("kiln %s: stderr lacks %q:\n%s", strings.Join(tc.args, " "), tc.want, r.stderr)
		}
	}
}

func mustEncode(t *testing.T, ts []safetensors.Tensor) []byte {
	t.Helper()
	b, err := safetensors.Encode(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
