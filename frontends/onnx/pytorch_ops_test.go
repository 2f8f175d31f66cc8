package onnx_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/kernels"
)

// opFixtures are the fixtures of the array, normalization and composed ops,
// written by tests/onnx/export_ops.py; TestPyTorchGrad, TestPyTorchGradGPU
// and TestPyTorchSGD run them with the models' fixtures.
var opFixtures = []string{"ops_norm", "ops_einsum", "ops_convt", "ops_pad", "ops_3d", "ops_act", "ops_resize", "ops_loss", "ops_topk", "ops_grid"}

func init() { fixtures = append(fixtures, opFixtures...) }

// TestOpFixturesWorkersBitwise runs a training step's loss and gradients of
// each op fixture on 1 and on 3 CPU workers: every gradient is equal, bit
// for bit.
func TestOpFixturesWorkersBitwise(t *testing.T) {
	for _, name := range opFixtures {
		t.Run(name, func(t *testing.T) {
			m := importFixture(t, name)
			p, err := kiln.Compile(m.Graph, kiln.Options{Grad: true})
			if err != nil {
				t.Fatal(err)
			}
			run := func(workers int) map[string][]byte {
				x, err := kiln.NewExecutor(p, kiln.ExecOptions{Workers: workers})
				if err != nil {
					t.Fatal(err)
				}
				defer x.Close()
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
				if err := x.Step(context.Background()); err != nil {
					t.Fatal(err)
				}
				out := map[string][]byte{}
				for _, ts := range m.Params {
					g, err := x.Get("grad/" + ts.Name)
					if err != nil {
						t.Fatal(err)
					}
					out[ts.Name] = append([]byte(nil), g.Data...)
				}
				return out
			}
			one, three := run(1), run(3)
			for name, g := range one {
				if !bytes.Equal(g, three[name]) {
					t.Errorf("grad/%s differs between 1 and 3 workers", name)
				}
			}
		})
	}
}
