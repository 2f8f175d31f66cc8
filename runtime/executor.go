package runtime

import (
	"context"
	"fmt"

	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/planner"
)

// Executor runs a plan: the CPU executor (exec/cpu) or the GPU executor
// (exec/gpu). Tensors are exchanged by name: Set uploads an input, param or
// state; Get returns an input, param, state, output or grad/PARAM, as a
// tensor that the next Step may overwrite (on the GPU a host copy: writing
// into it changes nothing on the device, so set values with Set).
type Executor interface {
	Plan() *planner.Plan
	Names() []string
	Set(name string, t kernels.Tensor) error
	Get(name string) (kernels.Tensor, error)
	Step(ctx context.Context) error
	Reset(seed uint64) error
	// StepCount is the number of steps run since New or Reset, which
	// step-dependent kernels (dropout) read; SetStepCount restores it.
	StepCount() int64
	SetStepCount(n int64) error
	Close() error
}

var _ Executor = (*cpu.Executor)(nil)

// Devices are the names NewExecutor takes.
var Devices = []string{"cpu", "gpu"}

// ExecOptions choose where and how a plan runs.
type ExecOptions struct {
	// Device is "cpu" (also "") or "gpu".
	Device string
	// Seed selects the initial values of the params.
	Seed uint64
	// CheckNaN stops at the first kernel that produces NaN or Inf (CPU only;
	// KILN_DEBUG=nan).
	CheckNaN bool
	// Workers is the number of goroutines of the CPU executor (0:
	// runtime.NumCPU()).
	Workers int
	// Comm, when set, is the communicator of the data-parallel job this
	// process is a rank of: the plan's collectives run on it, and a
	// Trainer splits the data and reduces its tallies over the ranks.
	Comm *dist.Comm
}

// ChunkBytes returns the arena chunk size (planner.Options.ChunkBytes) a
// plan needs to run on device: the largest storage binding of the GPU for
// "gpu", 0 (no chunks) for "cpu" or "".
func ChunkBytes(device string) (int64, error) {
	switch device {
	case "", "cpu":
		return 0, nil
	case "gpu":
		return chunkBytesGPU()
	}
	return 0, fmt.Errorf("unknown device %q (expected cpu or gpu)", device)
}

// NewExecutor prepares p for running on the device opts names.
func NewExecutor(p *planner.Plan, opts ExecOptions) (Executor, error) {
	switch opts.Device {
	case "", "cpu":
		co := cpu.Options{Seed: opts.Seed, CheckNaN: opts.CheckNaN, Workers: opts.Workers}
		if opts.Comm != nil {
			co.Comm = opts.Comm
		}
		return cpu.New(p, co)
	case "gpu":
		if opts.CheckNaN {
			return nil, fmt.Errorf("the NaN check (KILN_DEBUG=nan) runs on the CPU only; drop it or use -device cpu")
		}
		return newGPU(p, opts.Seed, opts.Comm)
	}
	return nil, fmt.Errorf("unknown device %q (expected cpu or gpu)", opts.Device)
}
