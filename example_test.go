package kiln_test

import (
	"fmt"
	"log"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// Compile a two-layer perceptron into a whole Adam training step: forward,
// backward and update, planned into one arena.
func ExampleCompile() {
	b := frontends.NewBuilder("mlp")
	x := b.Input("x", ir.F32, 8, 4)
	y := b.Input("y", ir.I64, 8)
	h := b.Relu(b.Add(b.Matmul(x, b.Param("w1", ir.F32, 4, 16)), b.Param("b1", ir.F32, 16)))
	logits := b.Add(b.Matmul(h, b.Param("w2", ir.F32, 16, 3)), b.Param("b2", ir.F32, 3))
	b.Output(b.SoftmaxCrossEntropy(logits, y), logits)
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}

	adam, err := passes.DefaultOptimizer("adam")
	if err != nil {
		log.Fatal(err)
	}
	p, err := kiln.Compile(g, kiln.Options{Optimizer: &adam})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("params:", len(p.Params))
	fmt.Println("states:", len(p.States))        // m and v per param, and the two bias-correction powers
	fmt.Println("gradients kept:", len(p.Grads)) // the update consumes them
	fmt.Println("check ok:", p.Check() == nil)
	// Output:
	// params: 4
	// states: 10
	// gradients kept: 0
	// check ok: true
}
