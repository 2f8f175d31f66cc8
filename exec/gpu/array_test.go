package gpu_test

import (
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/kernels/wgsl/wgsltest"
)

// TestArrayKernelsBitwise runs the array cases (casts, integer comparisons
// and where) on the CPU and the GPU: every result is exact, so the two
// must be equal element for element.
func TestArrayKernelsBitwise(t *testing.T) {
	needGPU(t)
	for _, tc := range wgsltest.Array() {
		t.Run(strings.ReplaceAll(tc.Name, " ", "_"), func(t *testing.T) {
			p := plan(t, "graph k\n"+tc.Src)
			want, got := runBoth(t, p, 1, tc.Labels)
			for name := range want {
				bad := 0
				for i, w := range want[name] {
					g := got[name][i]
					if g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
						if bad < 5 {
							t.Errorf("%s[%d] = %v on the GPU, %v on the CPU", name, i, g, w)
						}
						bad++
					}
				}
			}
		})
	}
}
