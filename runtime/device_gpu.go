//go:build !kiln_nogpu

package runtime

import (
	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/planner"
)

var _ Executor = (*gpu.Executor)(nil)

// newGPU makes the GPU executor of exec/gpu (WebGPU through cgo; without
// cgo, exec/gpu's New reports that GPU support was not built in).
func newGPU(p *planner.Plan, seed uint64, comm *dist.Comm) (Executor, error) {
	o := gpu.Options{Seed: seed}
	if comm != nil {
		o.Comm = comm
	}
	x, err := gpu.New(p, o)
	if err != nil {
		return nil, err
	}
	return x, nil
}

// chunkBytesGPU is exec/gpu's ChunkBytes: the GPU's largest storage
// binding.
func chunkBytesGPU() (int64, error) { return gpu.ChunkBytes() }
