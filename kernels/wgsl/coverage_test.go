package wgsl_test

import (
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels/cpu"
	"github.com/kilnml/kiln/kernels/wgsl"
)

// TestEveryF32OpHasGPUKernel checks the GPU backend's coverage against the
// CPU's, the reference: every op with an f32 kernel on the CPU has one on
// the GPU. Collectives are the exception: the GPU executor runs them on
// the host (exec/gpu runCollective).
func TestEveryF32OpHasGPUKernel(t *testing.T) {
	n := 0
	for _, k := range cpu.Kernels.Keys() {
		if k.DType != ir.F32 || k.Op.IsCollective() {
			continue
		}
		n++
		if !wgsl.Kernels.Has(k.Op, k.DType) {
			t.Errorf("%s has an %s kernel on the CPU and none on the GPU", k.Op, k.DType)
		}
	}
	if n < 90 {
		t.Fatalf("the CPU registers %d f32 kernels; expected the whole catalog (about 100)", n)
	}
}
