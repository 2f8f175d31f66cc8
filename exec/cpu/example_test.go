package cpu_test

import (
	"context"
	"fmt"
	"log"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Run one forward and backward step of linear regression and read the loss
// and the gradient. Here xw - t = (-0.5, -1.5), so the loss is
// (0.25 + 2.25) / 2 = 1.25 and the gradient 2/n x^T (xw - t) = (-5, -7).
func ExampleExecutor() {
	g, err := ir.Parse("linreg.kir", []byte(`graph linreg
input %x: f64[2,2]
input %t: f64[2]
param %w: f64[2]
%p = matmul %x, %w
%loss = mse_loss %p, %t
output %loss
`))
	if err != nil {
		log.Fatal(err)
	}
	p, err := kiln.Compile(g, kiln.Options{Grad: true})
	if err != nil {
		log.Fatal(err)
	}
	x, err := cpu.New(p, cpu.Options{Seed: 1})
	if err != nil {
		log.Fatal(err)
	}

	// Inputs and params are set through the executor's views of its arena.
	set := func(name string, v ...float64) {
		t, err := x.Get(name)
		if err != nil {
			log.Fatal(err)
		}
		if err := kernels.SetFloat64s(t, v); err != nil {
			log.Fatal(err)
		}
	}
	set("x", 1, 2, 3, 4)
	set("t", 0, 1)
	set("w", 0.5, -0.5)

	if err := x.Step(context.Background()); err != nil {
		log.Fatal(err)
	}
	loss, err := x.Get("loss")
	if err != nil {
		log.Fatal(err)
	}
	grad, err := x.Get("grad/w")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("loss %.4f\n", kernels.Float64s(loss)[0])
	fmt.Printf("grad/w %.4f\n", kernels.Float64s(grad))
	// Output:
	// loss 1.2500
	// grad/w [-5.0000 -7.0000]
}
