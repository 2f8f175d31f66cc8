package gpu_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/planner"
)

// matmulChain is a plan of k steps y = y0 + tanh(y·w)/100 from the input
// y0, each a 256×256 matmul: a contraction (with w in [-3,3) the
// difference between two ys shrinks about 4-fold a step), so the CPU's
// and the GPU's rounding do not grow along the chain.
func matmulChain(t testing.TB, k int) *planner.Plan {
	var b strings.Builder
	b.WriteString("graph chain\ninput %y0: f32[256,256]\ninput %w: f32[256,256]\n%c = const {dtype=\"f32\", value=0.01}\n")
	for i := range k {
		fmt.Fprintf(&b, "%%m%d = matmul %%y%d, %%w\n%%t%d = tanh %%m%d\n%%s%d = mul %%t%d, %%c\n%%y%d = add %%y0, %%s%d\n", i, i, i, i, i, i, i+1, i)
	}
	fmt.Fprintf(&b, "output %%y%d\n", k)
	return plan(t, b.String())
}

// TestStepLongerThanFiveSeconds runs one step whose work takes about 7
// seconds on the device (a chain of matmuls, as long as the device's speed
// asks, at most 400) and compares its output with the CPU's: a wait for
// the device that gives up after 5 seconds and takes the work as done
// (wgpu-native's blocking poll) reads the output before it is written and
// frees what the work still uses.
func TestStepLongerThanFiveSeconds(t *testing.T) {
	needGPU(t)
	one := matmulChain(t, 1)
	x, err := gpu.New(one, gpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	best := time.Hour
	for range 3 {
		start := time.Now()
		if err := x.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	x.Close()
	k := min(max(int(7*time.Second/best), 1), 400)
	t.Logf("one matmul step %v: a chain of %d", best, k)
	p := matmulChain(t, k)
	start := time.Now()
	want, got := runBoth(t, p, 1, 0)
	t.Logf("the CPU's and the GPU's step took %v", time.Since(start))
	for name, w := range want {
		compare(t, name, got[name], w, rtol, 1e-5)
	}
}
