package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// TestSoftmaxStreamingBitwise checks softmax and softmax_grad over the
// last axis written with streaming stores (fuseewStreamBytes at 1, so
// every output is large; where the CPU has the loops) against the same
// kernels writing normally, bit for bit, on 1 and 3 workers, rows of
// lengths that leave the output unaligned.
func TestSoftmaxStreamingBitwise(t *testing.T) {
	defer func(v, w int) { fuseewStreamBytes, parMinWork = v, w }(fuseewStreamBytes, parMinWork)
	parMinWork = 1
	for _, shape := range [][]int{{9, 5}, {3, 33}, {9, 1024}, {1, 100}} {
		r := newRand(uint64(shape[1]))
		x := fuseewRandom(r, ir.TensorOf(ir.F32, shape...))
		dy := fuseewRandom(r, ir.TensorOf(ir.F32, shape...))
		fuseewStreamBytes = 16 << 20
		y := mustRun(t, ir.OpSoftmax, nil, x)
		dx := mustRun(t, ir.OpSoftmaxGrad, nil, dy, y)
		fuseewStreamBytes = 1
		if ewAVX2 && softmaxStreamer[float32](y.Type, shape[1], false, 1) == nil {
			t.Fatalf("%v: the streaming softmax does not apply", shape)
		}
		for _, w := range []int{1, 3} {
			fusepatSameBits(t, fmt.Sprintf("softmax %v on %d workers", shape, w), kernels.View[float32](buildWith(t, goPool(w), ir.OpSoftmax, nil, x)), kernels.View[float32](y))
			fusepatSameBits(t, fmt.Sprintf("softmax_grad %v on %d workers", shape, w), kernels.View[float32](buildWith(t, goPool(w), ir.OpSoftmaxGrad, nil, dy, y)), kernels.View[float32](dx))
		}
	}
}

// TestBinaryStreamingBitwise checks add, sub, mul and div of two operands
// of one shape written with streaming stores (fuseewStreamBytes at 1)
// against the same ops writing normally, bit for bit, on 1 and 3
// workers, for lengths that leave a tail.
func TestBinaryStreamingBitwise(t *testing.T) {
	defer func(v, w int) { fuseewStreamBytes, parMinWork = v, w }(fuseewStreamBytes, parMinWork)
	parMinWork = 1
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		for _, shape := range [][]int{{7, 143}, {1001}, {3}} {
			r := newRand(uint64(len(shape)))
			a, b := fuseewRandom(r, ir.TensorOf(dt, shape...)), fuseewRandom(r, ir.TensorOf(dt, shape...))
			for _, op := range []ir.Op{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv} {
				fuseewStreamBytes = 16 << 20
				want := mustRun(t, op, nil, a, b)
				fuseewStreamBytes = 1
				for _, w := range []int{1, 3} {
					fuseewSame(t, fmt.Sprintf("%s %s %v on %d workers", op, dt, shape, w), buildWith(t, goPool(w), op, nil, a, b), want)
				}
			}
		}
	}
}
