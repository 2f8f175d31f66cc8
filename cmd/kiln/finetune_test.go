package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"google.golang.org/protobuf/proto"
)

var heldOutAccuracy = regexp.MustCompile(`(?m)^held-out accuracy ([0-9.]+)% on 359 rows$`)
var firstEpochAccuracy = regexp.MustCompile(`(?m)^epoch +1/[0-9]+ .* acc ([0-9.]+)%`)

// percent returns the number re's first group matches in s.
func percent(t *testing.T, re *regexp.Regexp, s string) float64 {
	t.Helper()
	m := re.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no match of %s in\n%s", re, s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFinetuneExample runs the fine-tuning session of docs/ONNX.md and
// docs/ONNX.md: the head of the exported model trained with its body
// frozen, written back with -save-onnx, and that file imported again to
// train every layer. It checks that the body's initializers are the
// original's bit for bit and the head's changed, that the head alone
// reaches 80% held-out accuracy, that the second run starts from the
// first's weights (its first epoch is above 80%, where a new head starts
// near 10%) and ends above 90%.
func TestFinetuneExample(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := onnxFixture("finetune.onnx")
	tuned, tuned2 := filepath.Join(dir, "tuned.onnx"), filepath.Join(dir, "tuned2.onnx")
	r1 := runKiln(t, "train", model, "-data", "digits", "-loss", "ce", "-freeze", "body", "-lr", "0.01", "-epochs", "10", "-save-onnx", tuned)
	r1.want(t, 0)
	containsAll(t, "stdout", r1.stdout, "model torch_jit: 2 params (650 values), batch 32, adam lr 0.01; 1438 training rows, 359 held out\n", "saved the trained model to "+tuned+"\n")
	if acc := percent(t, heldOutAccuracy, r1.stdout); acc < 80 {
		t.Errorf("the head alone reaches %.2f%% held-out accuracy, want >= 80%%", acc)
	}
	r2 := runKiln(t, "train", tuned, "-data", "digits", "-loss", "ce", "-lr", "0.001", "-epochs", "5", "-save-onnx", tuned2)
	r2.want(t, 0)
	containsAll(t, "stdout", r2.stdout, "model torch_jit: 6 params (8970 values), batch 32, adam lr 0.001; 1438 training rows, 359 held out\n")
	if acc := percent(t, firstEpochAccuracy, r2.stdout); acc < 80 {
		t.Errorf("the second run's first epoch has %.2f%% held-out accuracy, want >= 80%% (from the tuned head)", acc)
	}
	if acc := percent(t, heldOutAccuracy, r2.stdout); acc < 90 {
		t.Errorf("training every layer reaches %.2f%% held-out accuracy, want >= 90%%", acc)
	}
	orig, got := map[string]*onnxpb.TensorProto{}, readModel(t, tuned)
	for _, x := range readModel(t, model).Graph.Initializer {
		orig[x.GetName()] = x
	}
	for _, x := range got.Graph.Initializer {
		frozen := x.GetName() != "head.weight" && x.GetName() != "head.bias"
		if same := proto.Equal(x, orig[x.GetName()]); same != frozen {
			t.Errorf("initializer %q: unchanged %v, want %v", x.GetName(), same, frozen)
		}
	}
}
