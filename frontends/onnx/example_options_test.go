package onnx_test

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"regexp"

	"github.com/kilnml/kiln/examples"
	"github.com/kilnml/kiln/frontends/onnx"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
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
	// param head.weight f32[10,64]
	// param head.bias f32[10]
}

// Write a model back with new values for its params (here the initial
// values halved; after training, the trained params) and read it again.
func ExampleModel_WriteTrained() {
	path := "../../tests/testdata/onnx/mlp.onnx"
	m, err := onnx.Import(path)
	if err != nil {
		log.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	var trained []safetensors.Tensor
	for _, p := range m.Params {
		v := kernels.Float64s(kernels.Tensor{Type: p.Type, Data: p.Data})
		t := kernels.New(p.Type)
		for i := range v {
			v[i] /= 2
		}
		if err := kernels.SetFloat64s(t, v); err != nil {
			log.Fatal(err)
		}
		trained = append(trained, safetensors.Tensor{Name: p.Name, Type: p.Type, Data: t.Data})
	}
	var b bytes.Buffer
	if err := m.WriteTrained(src, trained, &b); err != nil {
		log.Fatal(err)
	}
	m2, err := onnx.Decode(b.Bytes(), "")
	if err != nil {
		log.Fatal(err)
	}
	p, q := m.Params[3], m2.Params[3]
	fmt.Printf("%s: %.4f, written %.4f\n", p.Name,
		kernels.Float64s(kernels.Tensor{Type: p.Type, Data: p.Data})[0],
		kernels.Float64s(kernels.Tensor{Type: q.Type, Data: q.Data})[0])
	// Output:
	// fc2.bias: 0.1708, written 0.0854
}

// Export the forward graph of the digits MLP (its logits, without the
// loss) as ONNX, with zeros for its params, and read it back.
func ExampleExport() {
	g, err := ir.Parse(examples.DigitsMLPFile, examples.DigitsMLP)
	if err != nil {
		log.Fatal(err)
	}
	g.Outputs = g.Outputs[1:] // the logits; the first output is the loss
	var params []safetensors.Tensor
	for _, id := range g.Params() {
		v := g.Value(id)
		params = append(params, safetensors.Tensor{Name: v.Name, Type: v.Type, Data: make([]byte, v.Type.Bytes())})
	}
	var b bytes.Buffer
	if err := onnx.Export(g, params, &b); err != nil {
		log.Fatal(err)
	}
	m, err := onnx.Decode(b.Bytes(), "")
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range m.Graph.Inputs() {
		fmt.Println("input", m.Graph.Value(id).Name, m.Graph.Type(id))
	}
	for _, id := range m.Graph.Outputs {
		fmt.Println("output", m.Graph.Value(id).Name, m.Graph.Type(id))
	}
	fmt.Println("opset", m.Opset, "params", len(m.Params))
	// Output:
	// input x f32[32,64]
	// output logits f32[32,10]
	// opset 17 params 4
}
