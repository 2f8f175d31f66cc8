package kiln_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/frontends/safetensors"
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

// Train a graph with no inputs (its target is a const), save a checkpoint
// and continue from it in a new trainer.
func ExampleTrainer_Step() {
	b := frontends.NewBuilder("seek")
	w := b.Param("w", ir.F32, 3)
	b.Output(b.MSELoss(w, b.Const(ir.F32, []int{3}, 0.5, -0.25, 1)))
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	adam, _ := passes.DefaultOptimizer("adam")
	adam.LR = 0.05
	tr, err := kiln.NewTrainer(g, adam, 1, kiln.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	ctx := context.Background()
	var a kiln.Tally
	for range 100 {
		if err := tr.Step(ctx, &a); err != nil {
			log.Fatal(err)
		}
	}
	dir, err := os.MkdirTemp("", "ckpt")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := tr.SaveCheckpoint(dir, kiln.TrainState{Step: 100, Tally: a}); err != nil {
		log.Fatal(err)
	}
	again, err := kiln.NewTrainer(g, adam, 1, kiln.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer again.Close()
	st, err := again.LoadCheckpoint(dir)
	if err != nil {
		log.Fatal(err)
	}
	loss, _, err := again.Evaluate(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("signature without data:", tr.Signature().Kind == kiln.NoData)
	fmt.Println("resumed at step", st.Step, "with", again.Executor().StepCount(), "executor steps")
	fmt.Printf("loss below 0.01: %v\n", loss < 0.01)
	// Output:
	// signature without data: true
	// resumed at step 100 with 100 executor steps
	// loss below 0.01: true
}

// Run a model's forward graph once on given inputs and params; the outputs
// come back by name, each with its own dtype.
func ExampleEval() {
	b := frontends.NewBuilder("affine")
	x := b.Input("x", ir.F32, 2)
	y := b.Add(b.Mul(x, b.Param("w", ir.F32, 2)), b.Const(ir.F32, []int{2}, 1, 1))
	b.Output(y)
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	xs, _ := safetensors.FromFloat64("x", ir.F32, ir.Shape{2}, []float64{3, 4})
	ws, _ := safetensors.FromFloat64("w", ir.F32, ir.Shape{2}, []float64{0.5, -2})
	out, err := kiln.Eval(context.Background(), g, []safetensors.Tensor{xs, ws}, kiln.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range out {
		fmt.Println(t.Type, t.Float64s())
	}
	// Output:
	// f32[2] [2.5 -7]
}
