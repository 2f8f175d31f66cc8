package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"google.golang.org/protobuf/proto"
)

// TestSaveONNX trains the fixtures a few steps with -save and -save-onnx,
// re-imports the ONNX model written and checks that its params are the
// saved params bit for bit, that frozen params keep their initial values,
// and that everything but the trained initializers is the original model.
func TestSaveONNX(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		model  string
		flags  []string
		frozen []string
	}{
		{"mlp", nil, nil},
		{"finetune", []string{"-loss", "ce", "-freeze", `^body\.`}, []string{"body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias"}},
	} {
		t.Run(tc.model, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			model := onnxFixture(tc.model + ".onnx")
			saved, out := filepath.Join(dir, "p.safetensors"), filepath.Join(dir, "trained.onnx")
			args := append([]string{"train", model, "-data", "digits", "-epochs", "1", "-save", saved, "-save-onnx", out}, tc.flags...)
			r := runKiln(t, args...)
			r.want(t, 0)
			containsAll(t, "stdout", r.stdout, "saved the trained model to "+out)
			params := readTensors(t, saved)
			mf := &modelFlags{loss: ""}
			for i := 0; i+1 < len(tc.flags); i += 2 {
				switch tc.flags[i] {
				case "-loss":
					mf.loss = tc.flags[i+1]
				case "-freeze":
					mf.freeze = tc.flags[i+1]
				}
			}
			_, got, err := loadGraph(out, mf)
			if err != nil {
				t.Fatal(err)
			}
			_, orig, err := loadGraph(model, mf)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(params) || len(got) != len(orig) {
				t.Fatalf("re-imported %d params, saved %d, the original has %d", len(got), len(params), len(orig))
			}
			for i, p := range got {
				if !bytes.Equal(p.Data, params[p.Name].Data) {
					t.Errorf("param %q of %s differs from -save's", p.Name, out)
				}
				if bytes.Equal(p.Data, orig[i].Data) {
					t.Errorf("param %q did not change in training", p.Name)
				}
			}
			a, b := readModel(t, model), readModel(t, out)
			init := map[string]*onnxpb.TensorProto{}
			for _, x := range a.Graph.Initializer {
				init[x.GetName()] = x
			}
			for _, name := range tc.frozen {
				if _, ok := params[name]; ok {
					t.Errorf("frozen param %q was saved as trained", name)
				}
			}
			// Put the original initializers back: the rest must be equal.
			for i, x := range b.Graph.Initializer {
				if _, trained := params[x.GetName()]; !trained && !proto.Equal(x, init[x.GetName()]) {
					t.Errorf("initializer %q changed, but it is not trained", x.GetName())
				}
				b.Graph.Initializer[i] = init[x.GetName()]
			}
			if !proto.Equal(a, b) {
				t.Errorf("%s differs from %s beyond the trained initializers", out, model)
			}
		})
	}
}

func readModel(t *testing.T, path string) *onnxpb.ModelProto {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

// TestSaveONNXErrors checks that -save-onnx is refused before training:
// for a model that is not ONNX, over the model itself, and in a folder that
// cannot be written.
func TestSaveONNXErrors(t *testing.T) {
	t.Parallel()
	model := onnxFixture("mlp.onnx")
	missing := filepath.Join(t.TempDir(), "no", "such", "x.onnx")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"train", digitsMLP, "-save-onnx", "x.onnx"}, 2, "kiln train: -save-onnx writes an ONNX model back; " + digitsMLP + " is not a .onnx file (-save writes the params)"},
		{[]string{"train", "-save-onnx", "x.onnx"}, 2, "kiln train: -save-onnx is for ONNX models; give a MODEL.onnx"},
		{[]string{"train", model, "-data", "digits", "-save-onnx", model}, 2, "kiln train: -save-onnx " + model + " is the input MODEL.kir " + model + "; it would be overwritten: give another output path"},
		{[]string{"train", model, "-data", "digits", "-save-onnx", missing}, 1, "kiln train: -save-onnx " + missing + ": cannot write in " + filepath.Dir(missing)},
	} {
		r := runKiln(t, tc.args...)
		r.want(t, tc.code)
		if r.stdout != "" {
			t.Errorf("%v: stdout %q, want nothing (refused before training)", tc.args, r.stdout)
		}
		containsAll(t, "stderr", r.stderr, tc.want)
	}
}

// TestSaveONNXRunningStats trains the bnstats fixture (training-mode
// BatchNorm) one epoch with -save-onnx and -checkpoint, and checks that the
// model written holds the running statistics training left, bit for bit
// those of the checkpoint, and that they moved from the original's.
func TestSaveONNXRunningStats(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := onnxFixture("bnstats.onnx")
	out, ck := filepath.Join(dir, "trained.onnx"), filepath.Join(dir, "ck")
	runKiln(t, "train", model, "-data", "digits", "-epochs", "1", "-save-onnx", out, "-checkpoint", ck).want(t, 0)
	states, err := filepath.Glob(filepath.Join(ck, "state-*.safetensors"))
	if err != nil || len(states) != 1 {
		t.Fatalf("checkpoint state files %v (%v), want one", states, err)
	}
	saved := readTensors(t, states[0])
	_, orig, m, err := loadModel(model, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, got, m2, err := loadModel(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.States) != 4 || len(m2.States) != 4 || len(got) != len(orig) {
		t.Fatalf("%d and %d running statistics, want 4", len(m.States), len(m2.States))
	}
	for i, s := range m2.States {
		if !bytes.Equal(s.Data, saved[s.Name].Data) {
			t.Errorf("running statistic %q of %s differs from the checkpoint's", s.Name, out)
		}
		if bytes.Equal(s.Data, m.States[i].Data) {
			t.Errorf("running statistic %q did not change in training", s.Name)
		}
	}
}
