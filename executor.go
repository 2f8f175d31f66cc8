package kiln

import (
	"github.com/kilnml/kiln/planner"
	"github.com/kilnml/kiln/runtime"
)

// Executor runs a plan on the CPU or the GPU (runtime.Executor).
type Executor = runtime.Executor

// ExecOptions choose where and how a plan runs (runtime.ExecOptions).
type ExecOptions = runtime.ExecOptions

// Devices are the names NewExecutor takes.
var Devices = runtime.Devices

// NewExecutor prepares p for running on the device opts names:
// runtime.NewExecutor.
func NewExecutor(p *planner.Plan, opts ExecOptions) (Executor, error) {
	return runtime.NewExecutor(p, opts)
}
