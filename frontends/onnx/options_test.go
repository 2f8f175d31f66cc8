package onnx_test

import (
	"context"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/onnx"
	"github.com/kilnml/kiln/kernels"
)

// TestFreezeTrainLoss imports the fine-tuning fixture (a model exported
// without a loss) with each choice of trained params and loss, and checks
// the params, the inputs and outputs, and that gradients are taken for the
// trained params only.
func TestFreezeTrainLoss(t *testing.T) {
	all := []string{"body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias", "head.weight", "head.bias"}
	for _, tc := range []struct {
		name   string
		o      onnx.Options
		params []string
		labels string // the type of the labels input
	}{
		{"no loss", onnx.Options{}, all, ""},
		{"ce", onnx.Options{Loss: "ce"}, all, "i64[32]"},
		{"mse", onnx.Options{Loss: "mse"}, all, "f32[32,10]"},
		{"bce", onnx.Options{Loss: "bce"}, all, "f32[32,10]"},
		{"freeze body", onnx.Options{Loss: "ce", Freeze: regexp.MustCompile(`body\.`)}, []string{"head.weight", "head.bias"}, "i64[32]"},
		{"train head", onnx.Options{Loss: "ce", Train: regexp.MustCompile(`^head`)}, []string{"head.weight", "head.bias"}, "i64[32]"},
		{"train biases", onnx.Options{Loss: "mse", Train: regexp.MustCompile(`bias$`)}, []string{"body.0.bias", "body.2.bias", "head.bias"}, "f32[32,10]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.o.Import(fixture("finetune.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range m.Params {
				got = append(got, p.Name)
			}
			if !slices.Equal(got, tc.params) {
				t.Errorf("params %v, want %v", got, tc.params)
			}
			g := m.Graph
			ins := g.Inputs()
			var outs []string
			for _, o := range g.Outputs {
				outs = append(outs, g.Value(o).Name)
			}
			if tc.labels == "" {
				if len(ins) != 1 || !slices.Equal(outs, []string{"logits"}) {
					t.Fatalf("inputs %d, outputs %v; want 1, [logits]", len(ins), outs)
				}
				return
			}
			if len(ins) != 2 || g.Value(ins[1]).Name != "labels" || g.Type(ins[1]).String() != tc.labels {
				t.Fatalf("inputs %d; want x, then labels %s", len(ins), tc.labels)
			}
			if !slices.Equal(outs, []string{"loss", "logits"}) {
				t.Errorf("outputs %v, want [loss logits]", outs)
			}
			tg, err := kiln.Transform(g, kiln.Options{Grad: true})
			if err != nil {
				t.Fatal(err)
			}
			var grads []string
			for _, gp := range tg.Grads {
				grads = append(grads, tg.Value(gp.Param).Name)
			}
			if !slices.Equal(grads, tc.params) {
				t.Errorf("gradients of %v, want %v", grads, tc.params)
			}
		})
	}
}

// TestLossValue checks the loss -loss ce appends against cross-entropy
// computed in float64 from PyTorch's logits (f32: rtol 1e-5).
func TestLossValue(t *testing.T) {
	m, err := onnx.Options{Loss: "ce", Freeze: regexp.MustCompile(`body`)}.Import(fixture("finetune.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	x := newExecutor(t, "finetune", m, kiln.Options{Grad: true})
	labels := make([]float64, 32)
	for i := range labels {
		labels[i] = float64((7 * i) % 10)
	}
	lt := m.Graph.Type(m.Graph.Inputs()[1])
	lv := kernels.New(lt)
	if err := kernels.SetFloat64s(lv, labels); err != nil {
		t.Fatal(err)
	}
	if err := x.Set("labels", lv); err != nil {
		t.Fatal(err)
	}
	if err := x.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	logits := floats(readTensors(t, fixture("finetune.expected.safetensors"))["logits"])
	want := 0.0
	for i := range 32 {
		row := logits[10*i : 10*i+10]
		mx := slices.Max(row)
		s := 0.0
		for _, v := range row {
			s += math.Exp(v - mx)
		}
		want += mx + math.Log(s) - row[int(labels[i])]
	}
	want /= 32
	loss, err := x.Get("loss")
	if err != nil {
		t.Fatal(err)
	}
	if got := kernels.Float64s(loss)[0]; !close(got, want, 1e-5, 0) {
		t.Errorf("loss %.7g, cross-entropy of PyTorch's logits %.7g", got, want)
	}
}

// TestOptionErrors checks the one-line errors of bad options.
func TestOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		model string
		o     onnx.Options
		want  string
	}{
		{"finetune", onnx.Options{Freeze: regexp.MustCompile("x"), Train: regexp.MustCompile("y")}, "both a freeze and a train pattern are given; give one"},
		{"finetune", onnx.Options{Freeze: regexp.MustCompile(`^fc`)}, `freeze pattern "^fc" matches no param; the params are body.0.weight, body.0.bias, body.2.weight, body.2.bias, head.weight, head.bias`},
		{"finetune", onnx.Options{Train: regexp.MustCompile(`conv`)}, `train pattern "conv" matches no param; the params are body.0.weight, body.0.bias, body.2.weight, body.2.bias, head.weight, head.bias`},
		{"finetune", onnx.Options{Loss: "nll"}, `unknown loss "nll": expected ce, mse or bce`},
		{"mlp", onnx.Options{Loss: "ce"}, `loss ce: expected the first output "loss" to be float logits [N,C], found f32[]`},
		{"mlp", onnx.Options{Loss: "mse"}, `loss mse: expected the first output "loss" to be a float tensor of rank >= 1 (a scalar first output is a loss already), found f32[]`},
	} {
		_, err := tc.o.Import(fixture(tc.model + ".onnx"))
		if err == nil || err.Error() != fixture(tc.model+".onnx")+": "+tc.want {
			t.Errorf("%+v: error %v, want %s", tc.o, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: the error is not one line", tc.o)
		}
	}
}
