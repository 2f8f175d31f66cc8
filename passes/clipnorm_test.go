package passes_test

import (
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// TestClipNormKernels checks what global-norm clipping adds to a training
// step after fusion, for a model of N = 4 params: one fused_reduce per
// gradient (its sum of squares, reading it once), one fused_elementwise for
// the scalar arithmetic (the sums added, sqrt, the factor, its clamp); the
// scaling of each gradient joins its param's update kernel for SGD, and is
// a mul of its own for Adam, whose two moments both read the scaled
// gradient (the fuse pass does not compute a value in two kernels).
func TestClipNormKernels(t *testing.T) {
	const src = `graph mlp
input %x: f32[4,3]
input %y: i64[4]
param %w1: f32[3,5]
param %b1: f32[5]
param %w2: f32[5,2]
param %b2: f32[2]
%h = matmul %x, %w1
%hb = add %h, %b1
%r = tanh %hb
%z0 = matmul %r, %w2
%z = add %z0, %b2
%loss = softmax_cross_entropy %z, %y
output %loss
`
	count := func(kind string, clipNorm float64) map[ir.Op]int {
		g := mustParse(t, src)
		c, _ := passes.DefaultOptimizer(kind)
		c.ClipNorm = clipNorm
		if err := passes.Run(g, passes.Pipeline(passes.Options{Optimizer: &c}), passes.Debug{Check: true}, nil); err != nil {
			t.Fatal(err)
		}
		n := map[ir.Op]int{}
		for _, v := range g.Values {
			n[v.Op]++
		}
		return n
	}
	for _, tt := range []struct {
		kind string
		muls int
	}{
		{"sgd", 0},
		{"adam", 4},
	} {
		off, on := count(tt.kind, 0), count(tt.kind, 1)
		want := map[ir.Op]int{ir.OpFusedReduce: 4, ir.OpFusedElementwise: 1, ir.OpMul: tt.muls}
		for _, op := range ir.Ops() {
			if d := on[op] - off[op]; d != want[op] {
				t.Errorf("%s: ClipNorm adds %d %s, want %d", tt.kind, d, op.Info().Name, want[op])
			}
		}
	}
}
