package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/safetensors"
)

// TestImportGrad imports each PyTorch fixture as .kir and safetensors:
// kiln grad on the .kir, with the params from the safetensors file, gives
// every output and gradient of kiln grad on the .onnx bit for bit.
func TestImportGrad(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"mlp", "cnn", "mixed", "shapes"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			kir := filepath.Join(dir, name+".kir")
			params := filepath.Join(dir, name+".safetensors")
			r := runKiln(t, "import", onnxFixture(name+".onnx"), "-o", kir)
			r.want(t, 0)
			containsAll(t, "stdout", r.stdout, "wrote "+kir, params)
			// kiln grad reads the params with the inputs, from one file.
			ins, _, err := safetensors.ReadFile(onnxFixture(name + ".inputs.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			ps, _, err := safetensors.ReadFile(params)
			if err != nil {
				t.Fatal(err)
			}
			both := filepath.Join(dir, "both.safetensors")
			if err := safetensors.WriteFile(both, append(ins, ps...), nil); err != nil {
				t.Fatal(err)
			}
			a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
			runKiln(t, "grad", onnxFixture(name+".onnx"), "-inputs", onnxFixture(name+".inputs.safetensors"), "-out", a).want(t, 0)
			runKiln(t, "grad", kir, "-inputs", both, "-out", b).want(t, 0)
			sameTensors(t, readTensors(t, a), readTensors(t, b))
			// Or with the params file as -init.
			c := filepath.Join(dir, "c.safetensors")
			runKiln(t, "grad", kir, "-init", params, "-inputs", onnxFixture(name+".inputs.safetensors"), "-out", c).want(t, 0)
			sameTensors(t, readTensors(t, a), readTensors(t, c))
		})
	}
}

// sameTensors checks that got and want hold the same tensors bit for bit.
func sameTensors(t *testing.T, want, got map[string]safetensors.Tensor) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d tensors, want %d", len(got), len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("no tensor %q", name)
		case !g.Type.Equal(w.Type) || !bytes.Equal(g.Data, w.Data):
			t.Errorf("tensor %q differs: %s %v, want %s %v", name, g.Type, g.Float64s(), w.Type, w.Float64s())
		}
	}
}

// TestImportTrain trains the MLP fixture for an epoch of the digits data
// from the .onnx and from its import (.kir with -init): the printed losses
// and the trained params are the same bit for bit.
func TestImportTrain(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"mlp", "bnstats"} { // bnstats: running statistics in the -init file
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			kir := filepath.Join(dir, name+".kir")
			runKiln(t, "import", onnxFixture(name+".onnx"), "-o", kir).want(t, 0)
			a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
			args := []string{"-data", "digits", "-epochs", "1", "-optimizer", "adam"}
			ra := runKiln(t, append([]string{"train", onnxFixture(name + ".onnx"), "-save", a}, args...)...)
			ra.want(t, 0)
			rb := runKiln(t, append([]string{"train", kir, "-init", filepath.Join(dir, name+".safetensors"), "-save", b}, args...)...)
			rb.want(t, 0)
			if la, lb := lossLines(ra.stdout), lossLines(rb.stdout); la != lb || la == "" {
				t.Errorf("training from the .onnx printed\n%s\nfrom the .kir\n%s", la, lb)
			}
			sameTensors(t, readTensors(t, a), readTensors(t, b))
		})
	}
}

// lossLines returns the lines of kiln train's output that carry a loss,
// without their times.
func lossLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "loss") {
			out = append(out, elapsed.ReplaceAllString(l, ""))
		}
	}
	return strings.Join(out, "\n")
}

var elapsed = regexp.MustCompile(`\([0-9.]+[µmn]?s\)`)

// TestImportErrors checks kiln import's refusals: writing over the model,
// a model that is not .onnx, no -o.
func TestImportErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := filepath.Join(dir, "m.onnx")
	data, err := os.ReadFile(onnxFixture("mlp.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model, data, 0o644); err != nil {
		t.Fatal(err)
	}
	kir := filepath.Join("testdata", "eval.kir")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"over the model", []string{model, "-o", model}, "-o " + model + " is the input FILE.onnx " + model},
		{"params over the model", []string{model, "-o", filepath.Join(dir, "m.safetensors")}, "is also -o"},
		{"not onnx", []string{kir, "-o", filepath.Join(dir, "x.kir")}, "expected an ONNX model (FILE.onnx)"},
		{"no -o", []string{model}, "missing -o FILE.kir"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runKiln(t, append([]string{"import"}, c.args...)...)
			r.want(t, 2)
			containsAll(t, "stderr", r.stderr, c.want)
		})
	}
	if got, err := os.ReadFile(model); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the model was changed")
	}
}
