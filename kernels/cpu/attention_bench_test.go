package cpu

import (
	"testing"

	"github.com/kilnml/kiln/ir"
)

// BenchmarkAttention runs the attention kernels of one GPT block's heads,
// q, k, v [16, 8, 128, 32] f32, causal, on one goroutine: the forward and
// the backward (attention_grad) separately.
//
//	go test ./kernels/cpu -run '^$' -bench 'Attention$'
func BenchmarkAttention(b *testing.B) {
	c := attnCase{lead: []int{16, 8}, t: 128, s: 128, dh: 32, dv: 32, scale: 0.177, causal: true}
	q, k, v, _, dy := c.inputs(1)
	args := attnTensors[float32](c, q, k, v, nil)
	y := mustRun(b, ir.OpAttention, c.attrs(), args...)
	gargs := append(args[:3:3], y, tensorOf(c.shape(c.t, c.dv), conv[float32](dy)))
	for _, op := range []ir.Op{ir.OpAttention, ir.OpAttentionGrad} {
		a := args
		if op == ir.OpAttentionGrad {
			a = gargs
		}
		b.Run(op.String(), func(b *testing.B) {
			n := node(b, op, c.attrs(), typesOf(a)...)
			f, err := Kernels.Build(n)
			if err != nil {
				b.Fatal(err)
			}
			out := emptyOf(n.Out)
			for range b.N {
				if err := f(out, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
