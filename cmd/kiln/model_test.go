package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelFlags checks -shape, -freeze, -train and -loss on each command
// that takes a model, and their errors: one line (then the usage line for
// usage errors).
func TestModelFlags(t *testing.T) {
	t.Parallel()
	ft, dyn := onnxFixture("finetune.onnx"), onnxFixture("dynamic.onnx")
	for _, tc := range []struct {
		args []string
		code int
		want string // in stdout for status 0, else the first line of stderr
	}{
		{[]string{"dump", dyn, "-shape", "x=4x1x8x8", "-shape", "labels=4"}, 0, "input %x: f32[4,1,8,8]"},
		{[]string{"plan", dyn, "-shape", "x=2,1,8,8", "-shape", "labels=2"}, 0, "input   %x: f32[2,1,8,8]"},
		{[]string{"dump", ft, "-loss", "ce", "-freeze", `body\.`}, 0, "input %labels: i64[32]"},
		{[]string{"grad", ft, "-loss", "mse", "-train", "head", "-inputs", onnxFixture("finetune.inputs.safetensors"), "-out", "OUT"}, 1, `finetune.inputs.safetensors: missing tensor(s) for ` + ft + `: labels (f32[32,10])`},
		{[]string{"dump", dyn}, 1, `dim 0 is symbolic ("batch")`},
		{[]string{"dump", dyn, "-shape", "x=4x1x8x8", "-shape", "x=4x1x8x8"}, 2, `invalid value "x=4x1x8x8" for flag -shape: the shape of "x" is given twice`},
		{[]string{"dump", dyn, "-shape", "x"}, 2, `invalid value "x" for flag -shape: expected NAME=DIMS (x=32x64), found "x"`},
		{[]string{"dump", dyn, "-shape", "x=4x0"}, 2, `-shape: x: expected dims of positive integers separated by x or ',' (32x64), found "4x0"`},
		{[]string{"dump", digitsMLP, "-shape", "x=4x64", "-loss", "ce"}, 2, "kiln dump: -shape, -loss is for ONNX models; " + digitsMLP + " is not a .onnx file"},
		{[]string{"train", "-loss", "ce"}, 2, "kiln train: -loss is for ONNX models; give a MODEL.onnx"},
		{[]string{"train", ft, "-data", "digits", "-freeze", "a", "-train", "b"}, 2, "kiln train: -freeze and -train both choose the params that train; give one"},
		{[]string{"train", ft, "-data", "digits", "-freeze", "("}, 2, "kiln train: -freeze: error parsing regexp: missing closing ): `(`"},
		{[]string{"train", ft, "-data", "digits", "-loss", "hinge"}, 2, `kiln train: -loss must be ce, mse or bce, found "hinge"`},
		{[]string{"train", ft, "-data", "digits", "-loss", "ce", "-train", "conv"}, 1, `kiln train: ` + ft + `: train pattern "conv" matches no param; the params are body.0.weight`},
		{[]string{"gradcheck", ft, "-loss", "ce", "-freeze", "^body"}, 0, "head.weight"},
	} {
		args := tc.args
		for i, a := range args {
			if a == "OUT" {
				args[i] = filepath.Join(t.TempDir(), "out.safetensors")
			}
		}
		r := runKiln(t, args...)
		if r.code != tc.code {
			t.Errorf("kiln %s: exit status %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, tc.code, r.stdout, r.stderr)
			continue
		}
		got := r.stdout
		if tc.code != 0 {
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			if want := tc.code; len(lines) != want { // usage errors add the usage line
				t.Errorf("kiln %s: %d lines on stderr, want %d:\n%s", strings.Join(args, " "), len(lines), want, r.stderr)
			}
			got = lines[0]
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("kiln %s: output lacks %q:\n%s", strings.Join(args, " "), tc.want, got)
		}
	}
}

// TestResumeModelFlags checks that -resume refuses a run whose -freeze
// differs from the checkpoint's.
func TestResumeModelFlags(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ck")
	ft := onnxFixture("finetune.onnx")
	runKiln(t, "train", ft, "-data", "digits", "-loss", "ce", "-freeze", `body\.`, "-epochs", "1", "-checkpoint", dir).want(t, 0)
	r := runKiln(t, "train", ft, "-data", "digits", "-loss", "ce", "-freeze", `body\.0`, "-epochs", "2", "-checkpoint", dir, "-resume")
	r.want(t, 1)
	containsAll(t, "stderr", oneLine(t, r.stderr), "was trained with -freeze body\\., model sha256 ", "this run has -freeze body\\.0, model sha256 ")
	runKiln(t, "train", ft, "-data", "digits", "-loss", "ce", "-freeze", `body\.`, "-epochs", "2", "-checkpoint", dir, "-resume").want(t, 0)
}

// TestShapesFromInputs checks that an ONNX input with a symbolic dim takes
// its shape from the -inputs file: kiln grad and kiln eval on the dynamic
// fixture without -shape write what they write with it.
func TestShapesFromInputs(t *testing.T) {
	t.Parallel()
	dyn, in := onnxFixture("dynamic.onnx"), onnxFixture("dynamic.inputs.safetensors")
	for _, cmd := range []string{"grad", "eval"} {
		dir := t.TempDir()
		fed, given := filepath.Join(dir, "fed.safetensors"), filepath.Join(dir, "given.safetensors")
		runKiln(t, cmd, dyn, "-inputs", in, "-out", fed).want(t, 0)
		runKiln(t, cmd, dyn, "-inputs", in, "-shape", "x=4x1x8x8", "-shape", "labels=4", "-out", given).want(t, 0)
		a, b := readTensors(t, fed), readTensors(t, given)
		if len(a) == 0 || len(a) != len(b) {
			t.Fatalf("kiln %s: %d tensors from the inputs' shapes, %d with -shape", cmd, len(a), len(b))
		}
		for name, ta := range a {
			if tb, ok := b[name]; !ok || !ta.Type.Equal(tb.Type) || !bytes.Equal(ta.Data, tb.Data) {
				t.Errorf("kiln %s: %q differs between the inputs' shapes and -shape", cmd, name)
			}
		}
	}
}
