package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// BenchmarkConvLayer times conv2d, conv_input_grad and conv_weight_grad on
// 1 and 2 workers (goroutines started per part, as goPool does) at the
// first and second layers of bench/cnn28.kir (64 images of 32×14×14,
// 64 filters of 3×3, padding 1) and at the 4×4 layer of the digits CNN (32
// images of 16×4×4, 32 filters), and reports GFLOP/s and GFLOP per
// CPU-second (on a loaded machine the second moves less).
func BenchmarkConvLayer(b *testing.B) {
	for _, s := range []struct {
		name             string
		n, cin, hw, cout int
	}{
		{"cnn28_conv1", 64, 1, 28, 32},
		{"cnn28_conv2", 64, 32, 14, 64},
		{"digits_conv2", 32, 16, 4, 32},
	} {
		r := newRand(1)
		x := fuseewRandom(r, ir.TensorOf(ir.F32, s.n, s.cin, s.hw, s.hw))
		w := fuseewRandom(r, ir.TensorOf(ir.F32, s.cout, s.cin, 3, 3))
		bias := fuseewRandom(r, ir.TensorOf(ir.F32, s.cout))
		dy := fuseewRandom(r, ir.TensorOf(ir.F32, s.n, s.cout, s.hw, s.hw))
		at := ir.MakeAttrs("padding", ir.Ints(1))
		flops := 2 * float64(s.n*s.cout*s.hw*s.hw*s.cin*9)
		for _, c := range []struct {
			name  string
			op    ir.Op
			attrs ir.Attrs
			args  []kernels.Tensor
		}{
			{"forward", ir.OpConv2d, at, []kernels.Tensor{x, w, bias}},
			{"input_grad", ir.OpConvInputGrad, at.With("input_shape", ir.Ints(s.n, s.cin, s.hw, s.hw)), []kernels.Tensor{dy, w}},
			{"weight_grad", ir.OpConvWeightGrad, at.With("weight_shape", ir.Ints(s.cout, s.cin, 3, 3)), []kernels.Tensor{x, dy}},
		} {
			for _, workers := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s/%s/workers=%d", s.name, c.name, workers), func(b *testing.B) {
					n := node(b, c.op, c.attrs, typesOf(c.args)...)
					n.Par = goPool(workers)
					f, err := Kernels.Build(n)
					if err != nil {
						b.Fatal(err)
					}
					out := emptyOf(n.Out)
					cpu0 := cpuSeconds()
					for b.Loop() {
						if err := f(out, c.args); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
					reportPerCPU(b, flops*float64(b.N)/1e9, "GFLOP/cpu-s", cpu0)
				})
			}
		}
	}
}

// BenchmarkMaxPool2x2 times max_pool2d with 2×2 windows at stride 2 on one
// thread over 2048 planes of 28×28 and of 14×14 (rows of 14 and 7 windows),
// f32 and f64, and reports the time per window.
func BenchmarkMaxPool2x2(b *testing.B) {
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		for _, hw := range []int{28, 14} {
			b.Run(fmt.Sprintf("%s/%dx%d", dt, hw, hw), func(b *testing.B) {
				x := poolTestInput(newRand(1), dt, []int{2048, hw, hw})
				n := node(b, ir.OpMaxPool2d, ir.MakeAttrs("kernel", ir.Ints(2)), x.Type)
				f, err := Kernels.Build(n)
				if err != nil {
					b.Fatal(err)
				}
				out := emptyOf(n.Out)
				for b.Loop() {
					if err := f(out, []kernels.Tensor{x}); err != nil {
						b.Fatal(err)
					}
				}
				windows := float64(n.Out.Shape.NumElements())
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/windows, "ns/window")
			})
		}
	}
}
