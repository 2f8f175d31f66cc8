package passes_test

import (
	"fmt"

	"github.com/kilnml/kiln/passes"
)

// ExampleDefaultOptimizer configures torch.optim.AdamW(lr=3e-4,
// amsgrad=True): the defaults of the kind, then the settings that differ.
func ExampleDefaultOptimizer() {
	c, err := passes.DefaultOptimizer("adamw")
	if err != nil {
		panic(err)
	}
	c.LR, c.AMSGrad = 3e-4, true
	fmt.Println(c.Validate(), c.IsAdam(), c.WeightDecay)
	c.Nesterov = true
	fmt.Println(c.Validate())
	fmt.Println(passes.OptimizerKinds)
	// Output:
	// <nil> true 0.01
	// dampening and nesterov are for sgd, not adamw
	// [sgd adam adamw rmsprop]
}
