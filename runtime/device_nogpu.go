//go:build kiln_nogpu

package runtime

import (
	"errors"

	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/planner"
)

// errNoGPU is the error of NewExecutor for device "gpu" in a program built
// with the kiln_nogpu tag, which leaves exec/gpu (and WebGPU) out.
var errNoGPU = errors.New("GPU support was not built in (the program was built with -tags kiln_nogpu)")

func newGPU(*planner.Plan, uint64, *dist.Comm) (Executor, error) { return nil, errNoGPU }

func chunkBytesGPU() (int64, error) { return 0, errNoGPU }
