package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// BenchmarkSoftmaxStepKernels times the kernels of bench/softmax_step.kir's
// step on its [4096,1024] f32 tensors, on 1 and 2 workers: softmax,
// softmax_grad, the loss's fused_reduce of a product into one value, mul,
// and fused_softmax and fused_softmax_grad, which take the muls before
// softmax and after softmax_grad (softmax_grad's y is random: the timing
// does not depend on it), fused_softmax_grad with the SGD update too, as
// a training step fuses it, and that update alone. The fused ops run
// with their prefetching (prefetch.go) and, as NAME_noprefetch, without.
// cpu-ms/op is the process's CPU time per call (all workers together,
// where it can be read), which the machine's load inflates less than the
// time per call.
func BenchmarkSoftmaxStepKernels(b *testing.B) {
	r := newRand(1)
	x := fuseewRandom(r, ir.TensorOf(ir.F32, 4096, 1024))
	t := fuseewRandom(r, ir.TensorOf(ir.F32, 4096, 1024))
	p := fuseewRandom(r, ir.TensorOf(ir.F32, 4096, 1024)) // the param
	for _, w := range []int{1, 2} {
		pool := goPool(w)
		for _, c := range []struct {
			name  string
			op    ir.Op
			attrs ir.Attrs
			args  []kernels.Tensor
		}{
			{"softmax", ir.OpSoftmax, nil, []kernels.Tensor{x}},
			{"softmax_grad", ir.OpSoftmaxGrad, nil, []kernels.Tensor{t, x}},
			{"fused_reduce", ir.OpFusedReduce, fuseewProgram("t0 = mul i0, i1").With("op", ir.String("sum")), []kernels.Tensor{x, t}},
			{"mul", ir.OpMul, nil, []kernels.Tensor{x, t}},
			{"fused_softmax", ir.OpFusedSoftmax, fuseewProgram("t0 = mul i0, i1"), []kernels.Tensor{x, t}},
			{"fused_softmax_grad", ir.OpFusedSoftmaxGrad, fuseewProgram("t0 = mul i0, i1"), []kernels.Tensor{t, x, x}},
			{"fused_softmax_grad_sgd", ir.OpFusedSoftmaxGrad, fuseewProgram("t0 = mul i0, i1", "t1 = mul t0, 0.01", "t2 = sub i2, t1"), []kernels.Tensor{t, x, x, p}},
			{"sgd", ir.OpFusedElementwise, fuseewProgram("t0 = mul i0, 0.01", "t1 = sub i1, t0"), []kernels.Tensor{x, p}},
		} {
			n := node(b, c.op, c.attrs, typesOf(c.args)...)
			n.Par = pool
			f, err := Kernels.Build(n)
			if err != nil {
				b.Fatal(err)
			}
			out := emptyOf(n.Out)
			for _, off := range []bool{false, true} {
				name := c.name
				if off {
					if c.op != ir.OpFusedSoftmax && c.op != ir.OpFusedSoftmaxGrad && c.op != ir.OpFusedReduce {
						continue
					}
					name += "_noprefetch"
				}
				b.Run(fmt.Sprintf("%s/workers=%d", name, w), func(b *testing.B) {
					noPrefetch = off
					defer func() { noPrefetch = false }()
					c0 := cpuSeconds()
					for range b.N {
						if err := f(out, c.args); err != nil {
							b.Fatal(err)
						}
					}
					if c0 > 0 {
						b.ReportMetric((cpuSeconds()-c0)*1e3/float64(b.N), "cpu-ms/op")
					}
				})
			}
		}
	}
}
