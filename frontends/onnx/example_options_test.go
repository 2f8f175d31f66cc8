package onnx_test

import (
	"fmt"
	"log"
	"regexp"

	"github.com/kilnml/kiln/frontends/onnx"
)

// Import a model exported without a loss for fine-tuning: append a
// cross-entropy loss on its logits and freeze its body, so that only the
// head trains.
func ExampleOptions() {
	o := onnx.Options{Loss: "ce", Freeze: regexp.MustCompile(`^body\.`)}
	m, err := o.Import("../../tests/testdata/onnx/finetune.onnx")
	if err != nil {
		log.Fatal(err)
	}
	g := m.Graph
	for _, id := range g.Inputs() {
		fmt.Println("input", g.Value(id).Name, g.Type(id))
	}
	for _, id := range g.Outputs {
		fmt.Println("output", g.Value(id).Name, g.Type(id))
	}
	for _, p := range m.Params {
		fmt.Println("param", p.Name, p.Type)
	}
	// Output:
	// input x f32[32,64]
	// input labels i64[32]
	// output loss f32[]
	// output logits f32[32,10]
	// param head.weight f32[10,32]
	// param head.bias f32[10]
}
