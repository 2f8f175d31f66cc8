package runtime_test

import (
	"bytes"
	"context"
	"github.com/kilnml/kiln/internal/golden"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
	"github.com/kilnml/kiln/runtime"
)

// digitsPlan is the plan file the example trains from.
const digitsPlan = "testdata/digits.kplan"

// digitsSeed is the seed digitsPlan records for the params' initial values.
const digitsSeed = 7

// digitsGraph is a perceptron for the digits data (64 features, 10
// classes) in batches of 32.
func digitsGraph(t *testing.T) *ir.Graph {
	t.Helper()
	b := frontends.NewBuilder("digits")
	x := b.Input("x", ir.F32, 32, 64)
	y := b.Input("y", ir.I64, 32)
	h := b.Relu(b.Add(b.Matmul(x, b.Param("w1", ir.F32, 64, 32)), b.Param("b1", ir.F32, 32)))
	logits := b.Add(b.Matmul(h, b.Param("w2", ir.F32, 32, 10)), b.Param("b2", ir.F32, 10))
	b.Output(b.SoftmaxCrossEntropy(logits, y), logits)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// compileDigits compiles digitsGraph with SGD as kiln compile does and
// returns the compiler's trainer with the plan file's bytes.
func compileDigits(t *testing.T) (*kiln.Trainer, []byte) {
	t.Helper()
	opt, err := passes.DefaultOptimizer("sgd")
	if err != nil {
		t.Fatal(err)
	}
	opt.LR = 0.05
	tr, err := kiln.NewTrainer(digitsGraph(t), opt, digitsSeed, kiln.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	f := &planner.File{
		Plans: map[string]*planner.Plan{planner.TrainPlan: tr.Plan, planner.EvalPlan: tr.EvalPlan},
		Meta:  map[string]string{"optimizer": opt.Kind, "lr": strconv.FormatFloat(opt.LR, 'g', -1, 64), "seed": strconv.Itoa(digitsSeed)},
	}
	var buf bytes.Buffer
	if err := planner.Encode(&buf, f); err != nil {
		t.Fatal(err)
	}
	return tr, buf.Bytes()
}

// TestTestdataPlan checks that testdata/digits.kplan is what the compiler
// writes today (go test ./runtime -run TestTestdataPlan -update rewrites
// it).
func TestTestdataPlan(t *testing.T) {
	_, want := compileDigits(t)
	if golden.Update() {
		if err := os.WriteFile(digitsPlan, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(digitsPlan)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the plan file the compiler writes now; rerun with -update", digitsPlan)
	}
}

// TestMatchesCompiledTrainer trains from the plan file and from the
// compiler's trainer side by side: the same seed must give bitwise the same
// losses, params and evaluation.
func TestMatchesCompiledTrainer(t *testing.T) {
	compiled, _ := compileDigits(t)
	p, err := runtime.Load(digitsPlan)
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasSeed || p.Seed != digitsSeed {
		t.Fatalf("seed %d (recorded: %v), want %d", p.Seed, p.HasSeed, digitsSeed)
	}
	loaded, err := runtime.NewTrainer(p, runtime.ExecOptions{Seed: p.Seed, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	d, err := dataset.Digits()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 10 {
		var a, b runtime.Tally
		if err := compiled.TrainBatch(ctx, d, i, &a); err != nil {
			t.Fatal(err)
		}
		if err := loaded.TrainBatch(ctx, d, i, &b); err != nil {
			t.Fatal(err)
		}
		if a.Loss != b.Loss {
			t.Fatalf("batch %d: loss %v from the plan file, %v from the compiler", i, b.Loss, a.Loss)
		}
	}
	want, err := compiled.Params()
	if err != nil {
		t.Fatal(err)
	}
	got, err := loaded.Params()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || !slices.EqualFunc(got, want, sameTensor) {
		t.Fatalf("params after 10 steps differ: %d from the plan file, %d from the compiler", len(got), len(want))
	}
	l1, m1, err := compiled.Evaluate(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	l2, m2, err := loaded.Evaluate(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if l1 != l2 || m1 != m2 {
		t.Fatalf("evaluation: loss %v accuracy %v from the plan file, %v %v from the compiler", l2, m2, l1, m1)
	}
}

func sameTensor(a, b safetensors.Tensor) bool {
	return a.Name == b.Name && a.Type.Equal(b.Type) && bytes.Equal(a.Data, b.Data)
}

func newDigitsTrainer(t *testing.T, seed uint64) *runtime.Trainer {
	t.Helper()
	p, err := runtime.Load(digitsPlan)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := runtime.NewTrainer(p, runtime.ExecOptions{Seed: seed, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// TestParamsRoundTrip saves the params of one trainer and loads them into
// a trainer with other initial values: they must be bitwise the same.
func TestParamsRoundTrip(t *testing.T) {
	a, b := newDigitsTrainer(t, 1), newDigitsTrainer(t, 2)
	pa, err := a.Params()
	if err != nil {
		t.Fatal(err)
	}
	pb, err := b.Params()
	if err != nil {
		t.Fatal(err)
	}
	if slices.EqualFunc(pa, pb, sameTensor) {
		t.Fatal("seeds 1 and 2 give the same params")
	}
	path := filepath.Join(t.TempDir(), "params.safetensors")
	if err := a.SaveParams(path); err != nil {
		t.Fatal(err)
	}
	if err := b.LoadParams(path); err != nil {
		t.Fatal(err)
	}
	if pb, err = b.Params(); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(pa, pb, sameTensor) {
		t.Fatal("params differ after SaveParams and LoadParams")
	}
	// Get returns a copy: writing into it changes nothing.
	w, err := a.Get("b2")
	if err != nil {
		t.Fatal(err)
	}
	kernels.SetFloat64s(w, make([]float64, 10))
	w.Data[0] = 1
	again, err := a.Get("b2")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Data, pa[3].Data) {
		t.Fatal("writing into Get's tensor changed the param")
	}
	// Set changes it.
	if err := a.Set("b2", w); err != nil {
		t.Fatal(err)
	}
	if again, _ = a.Get("b2"); !bytes.Equal(again.Data, w.Data) {
		t.Fatal("Set did not change the param")
	}
}

// TestLoadParamsRefuses feeds LoadParams tensors that are not the model's
// params.
func TestLoadParamsRefuses(t *testing.T) {
	tr := newDigitsTrainer(t, 1)
	f32 := func(shape ...int) ir.Type { return ir.Type{DType: ir.F32, Shape: shape} }
	for _, tc := range []struct {
		name   string
		tensor safetensors.Tensor
		want   string
	}{
		{"unknown", safetensors.Tensor{Name: "w3", Type: f32(2), Data: make([]byte, 8)}, `tensor "w3" is not a param or state of the model`},
		{"shape", safetensors.Tensor{Name: "b2", Type: f32(9), Data: make([]byte, 36)}, `tensor "b2": expected f32[10], found f32[9]`},
		{"input", safetensors.Tensor{Name: "x", Type: f32(32, 64), Data: make([]byte, 32*64*4)}, `tensor "x" is not a param or state of the model`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.safetensors")
			if err := safetensors.WriteFile(path, []safetensors.Tensor{tc.tensor}, nil); err != nil {
				t.Fatal(err)
			}
			err := tr.LoadParams(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), path+": ") {
				t.Fatalf("error %v, want %s: ... %s", err, path, tc.want)
			}
		})
	}
}

// TestLoadRefuses loads plan files that cannot train.
func TestLoadRefuses(t *testing.T) {
	p, err := runtime.Load(digitsPlan)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		file *planner.File
		want string
	}{
		{"no eval", &planner.File{Plans: map[string]*planner.Plan{planner.TrainPlan: p.Train}}, `a trainable plan file holds the plans "train" and "eval"; this one has 1 plans`},
		{"bad seed", &planner.File{Plans: map[string]*planner.Plan{planner.TrainPlan: p.Train, planner.EvalPlan: p.Eval}, Meta: map[string]string{"seed": "-1"}}, `bad seed "-1" in the metadata`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.kplan")
			if err := planner.Save(path, tc.file); err != nil {
				t.Fatal(err)
			}
			_, err := runtime.Load(path)
			if err == nil || err.Error() != path+": "+tc.want {
				t.Fatalf("error %v, want %s: %s", err, path, tc.want)
			}
		})
	}
}

// compiler lists the packages that make up the compiler, which a program
// that trains from a plan file must not link: the graph passes (autodiff,
// optimizer, fusion), the recompute solver, the model frontends (the Go
// builder and the ONNX importer with protobuf), the root package (which
// compiles), the model zoo and the CLI with its plotting. The .kir parser
// is not among them: it is part of ir, and a plan file carries its graphs
// as .kir text.
var compiler = []string{
	"github.com/kilnml/kiln",
	"github.com/kilnml/kiln/passes",
	"github.com/kilnml/kiln/checkpoint",
	"github.com/kilnml/kiln/frontends",
	"github.com/kilnml/kiln/frontends/onnx",
	"github.com/kilnml/kiln/frontends/onnx/onnxpb",
	"github.com/kilnml/kiln/examples",
	"github.com/kilnml/kiln/cmd/kiln",
	"google.golang.org/protobuf/proto",
	"gonum.org/v1/plot",
}

// TestNoCompiler checks runtime's dependencies, with GPU support and
// without (-tags kiln_nogpu, which must also leave WebGPU out).
func TestNoCompiler(t *testing.T) {
	for _, tc := range []struct {
		tags   string
		absent []string
	}{
		{"", compiler},
		{"kiln_nogpu", append(slices.Clone(compiler), "github.com/kilnml/kiln/exec/gpu", "github.com/cogentcore/webgpu/wgpu")},
	} {
		t.Run("tags="+tc.tags, func(t *testing.T) {
			// The package and its tests type-check with the tag too (its
			// own tests run with go test -tags kiln_nogpu ./runtime).
			if tc.tags != "" {
				if out, err := exec.Command("go", "vet", "-tags", tc.tags, "github.com/kilnml/kiln/runtime").CombinedOutput(); err != nil {
					t.Fatalf("go vet -tags %s: %v\n%s", tc.tags, err, out)
				}
			}
			out, err := exec.Command("go", "list", "-tags", tc.tags, "-deps", "github.com/kilnml/kiln/runtime").CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			deps := strings.Fields(string(out))
			if !slices.Contains(deps, "github.com/kilnml/kiln/exec/cpu") || !slices.Contains(deps, "github.com/kilnml/kiln/planner") {
				t.Fatalf("go list -deps lacks exec/cpu or planner: %q", deps)
			}
			for _, d := range deps {
				if slices.Contains(tc.absent, d) {
					t.Errorf("runtime depends on %s", d)
				}
			}
		})
	}
}

// TestPredict checks Predict's logits on every digits row (the last batch
// padded) against the perceptron computed in float64 from the trained
// params, within 1e-4·(1+|logit|) for the f32 sums of 64 and 32 terms, and
// that their arg-max gives Evaluate's accuracy.
func TestPredict(t *testing.T) {
	tr := newDigitsTrainer(t, 3)
	d, err := dataset.Digits()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 5 {
		if err := tr.TrainBatch(ctx, d, i, &runtime.Tally{}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := tr.Predict(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if d.N%32 == 0 || len(got) != d.N*10 {
		t.Fatalf("%d logits for %d rows (the test wants a partial last batch)", len(got), d.N)
	}
	ps, err := tr.Params()
	if err != nil {
		t.Fatal(err)
	}
	p := map[string][]float64{}
	for _, v := range ps {
		p[v.Name] = kernels.Float64s(kernels.Tensor{Type: v.Type, Data: v.Data})
	}
	correct := 0
	for r := range d.N {
		h := make([]float64, 32)
		for j := range 32 {
			s := p["b1"][j]
			for k := range 64 {
				s += d.X[r*64+k] * p["w1"][k*32+j]
			}
			h[j] = max(s, 0)
		}
		best := 0
		for c := range 10 {
			s := p["b2"][c]
			for j := range 32 {
				s += h[j] * p["w2"][j*10+c]
			}
			if g := got[r*10+c]; math.Abs(g-s) > 1e-4*(1+math.Abs(s)) {
				t.Fatalf("row %d class %d: logit %v, float64 reference %v", r, c, g, s)
			}
			if got[r*10+c] > got[r*10+best] {
				best = c
			}
		}
		if int64(best) == d.Y[r] {
			correct++
		}
	}
	_, acc, err := tr.Evaluate(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(correct) / float64(d.N); acc != want {
		t.Fatalf("Evaluate's accuracy %v, Predict's arg-max gives %v", acc, want)
	}
}
