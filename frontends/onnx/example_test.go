package onnx_test

import (
	"context"
	"fmt"
	"log"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/onnx"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/kernels"
)

// Import an MLP exported from PyTorch with its loss inside the forward,
// set its params to the ONNX initializers and take one gradient.
func ExampleImport() {
	m, err := onnx.Import("../../tests/testdata/onnx/mlp.onnx")
	if err != nil {
		log.Fatal(err)
	}
	p, err := kiln.Compile(m.Graph, kiln.Options{Grad: true})
	if err != nil {
		log.Fatal(err)
	}
	x, err := kiln.NewExecutor(p, kiln.ExecOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()
	inputs, _, err := safetensors.ReadFile("../../tests/testdata/onnx/mlp.inputs.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range append(m.Params, inputs...) {
		if err := x.Set(t.Name, kernels.Tensor{Type: t.Type, Data: t.Data}); err != nil {
			log.Fatal(err)
		}
	}
	if err := x.Step(context.Background()); err != nil {
		log.Fatal(err)
	}
	for _, t := range m.Params {
		fmt.Println("param", t.Name, t.Type)
	}
	loss, _ := x.Get("loss")
	fmt.Printf("loss %.4f\n", kernels.Float64s(loss)[0])
	// Output:
	// param fc1.weight f32[32,64]
	// param fc1.bias f32[32]
	// param fc2.weight f32[10,32]
	// param fc2.bias f32[10]
	// loss 2.2896
}
