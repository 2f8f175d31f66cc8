package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/internal/gputest"
	"github.com/kilnml/kiln/ir"
)

// optimMLP returns the float64 MLP of the PyTorch optimizer fixtures with
// its batch of 8 rows set to batch rows, in dtype dt, and the path of its
// 8-row inputs file (in dt).
func optimMLP(t *testing.T, batch int, dt ir.DType) (model, inputs string) {
	t.Helper()
	dir := "../../tests/testdata/pytorch/optim"
	src, err := os.ReadFile(filepath.Join(dir, "mlp.kir"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(src), "[8,", fmt.Sprintf("[%d,", batch))
	text = strings.ReplaceAll(text, "f64", dt.String())
	model = writeFile(t, fmt.Sprintf("mlp%d%s.kir", batch, dt), text)
	ts, _, err := safetensors.ReadFile(filepath.Join(dir, "mlp.inputs.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	var in []safetensors.Tensor
	for _, x := range ts {
		in = append(in, tensor(t, x.Name, dt, x.Type.Shape, x.Float64s()))
	}
	inputs = filepath.Join(t.TempDir(), "in"+dt.String()+".safetensors")
	writeTensors(t, inputs, in)
	return model, inputs
}

// TestAccumEqualsConcatenatedBatch checks the contract of -accum K: on a
// mean loss, K batches accumulated per update give the params and losses
// of one batch of K times the rows, the K batches concatenated (float64,
// within 1e-12 relative), for each optimizer with its state, a schedule
// with warmup (which counts updates, not batches), and both clippings
// (applied to the mean gradient).
func TestAccumEqualsConcatenatedBatch(t *testing.T) {
	t.Parallel()
	for _, args := range []string{
		"-optimizer sgd -lr 0.1 -momentum 0.8 -dampening 0.3 -weight-decay 0.02",
		"-optimizer sgd -lr 0.1 -momentum 0.9 -nesterov -clip-grad 0.05",
		"-optimizer adamw -lr 0.05 -weight-decay 0.5 -amsgrad -lr-schedule cosine -warmup 2 -clip-norm 0.1",
		"-optimizer adam -lr 0.05 -lr-schedule linear -warmup 1",
		"-optimizer rmsprop -lr 0.01 -centered -momentum 0.5 -lr-schedule step -lr-step-size 2 -lr-gamma 0.5",
	} {
		wholeModel, in := optimMLP(t, 8, ir.F64)
		whole := filepath.Join(t.TempDir(), "whole.safetensors")
		runKiln(t, append([]string{"step", wholeModel, "-inputs", in, "-out", whole, "-steps", "5"}, strings.Fields(args)...)...).want(t, 0)
		want := readStepOut(t, whole)
		for _, k := range []int{2, 4} {
			model, _ := optimMLP(t, 8/k, ir.F64)
			out := filepath.Join(t.TempDir(), "accum.safetensors")
			r := runKiln(t, append([]string{"step", model, "-inputs", in, "-out", out, "-steps", "5", "-accum", fmt.Sprint(k)}, strings.Fields(args)...)...)
			r.want(t, 0)
			got := readStepOut(t, out)
			if len(got) != len(want) {
				t.Fatalf("%s -accum %d: %d tensors, want %d", args, k, len(got), len(want))
			}
			for name, w := range want {
				wv, gv := w.Float64s(), got[name].Float64s()
				if len(gv) != len(wv) {
					t.Fatalf("%s -accum %d: %s has %d elements, want %d", args, k, name, len(gv), len(wv))
				}
				for i := range wv {
					if d := math.Abs(gv[i] - wv[i]); !(d <= 1e-12*math.Abs(wv[i])+1e-15) {
						t.Errorf("%s -accum %d: %s[%d] = %.17g, the concatenated batch gives %.17g", args, k, name, i, gv[i], wv[i])
					}
				}
			}
		}
	}
}

// TestAccumGPU checks accumulation on the GPU against the CPU (float32,
// within 1e-5 + 1e-4 relative): the counter, the sums, and the updates
// that apply only at the last batch of each update.
func TestAccumGPU(t *testing.T) {
	gputest.Need(t)
	model, in := optimMLP(t, 4, ir.F32)
	out := map[string]map[string]safetensors.Tensor{}
	for _, d := range []string{"cpu", "gpu"} {
		path := filepath.Join(t.TempDir(), d+".safetensors")
		runKiln(t, "step", model, "-inputs", in, "-out", path, "-steps", "4", "-accum", "2", "-optimizer", "adamw", "-lr", "0.05",
			"-lr-schedule", "cosine", "-warmup", "1", "-clip-norm", "0.5", "-device", d).want(t, 0)
		out[d] = readStepOut(t, path)
	}
	for name, c := range out["cpu"] {
		cv, gv := c.Float64s(), out["gpu"][name].Float64s()
		for i := range cv {
			if d := math.Abs(gv[i] - cv[i]); !(d <= 1e-5+1e-4*math.Abs(cv[i])) {
				t.Errorf("%s[%d]: gpu %g, cpu %g", name, i, gv[i], cv[i])
			}
		}
	}
}

// TestAccumErrors checks the errors of -accum: a count below 1, inputs of
// neither the model's batch nor K of them, and a run of steps that are
// not whole updates.
func TestAccumErrors(t *testing.T) {
	t.Parallel()
	model, in := optimMLP(t, 4, ir.F64)
	out := filepath.Join(t.TempDir(), "out.safetensors")
	r := runKiln(t, "step", model, "-inputs", in, "-out", out, "-accum", "0")
	r.want(t, 2)
	containsAll(t, "stderr", r.stderr, "-accum must be at least 1 batch an update, found 0")
	r = runKiln(t, "step", model, "-inputs", in, "-out", out, "-accum", "3")
	r.want(t, 1)
	containsAll(t, "stderr", oneLine(t, r.stderr), in+`: tensor "`, "expected f64[4,", "or f64[12,", "holding the 3 batches of -accum 3, found f64[8,")
	seek := writeFile(t, "seek.kir", seekKir)
	r = runKiln(t, "train", seek, "-steps", "10", "-accum", "4")
	r.want(t, 2)
	containsAll(t, "stderr", r.stderr, "10 steps are not whole updates of -accum 4 steps")
}
