package cpu

import (
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// BenchmarkFusedElementwiseChain runs the program of
// bench/elementwise_chain.kir (mul, add, mul, sub, mul, add over two
// inputs) through fused_elementwise on f32 inputs of n elements: the
// interpreter alone, without the executor. The 4096x4096 size streams from
// memory; the 64K size stays in cache and measures the interpreter's own
// work. Where the CPU has AVX-512, .../avx2 runs the AVX2 block runner.
func BenchmarkFusedElementwiseChain(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"8K", 1 << 13}, {"64K", 1 << 16}, {"16M", 4096 * 4096}} {
		for _, runner := range []string{"", "/avx2"} {
			b.Run(size.name+runner, func(b *testing.B) {
				if runner != "" {
					if !ewAVX512 {
						b.Skip("the default run was the AVX2 runner")
					}
					defer func(v bool) { ewAVX512 = v }(ewAVX512)
					ewAVX512 = false
				}
				attrs := fuseewProgram("t0 = mul i0, i1", "t1 = add t0, i1", "t2 = mul t1, i0",
					"t3 = sub t2, i1", "t4 = mul t3, t3", "t5 = add t4, i0")
				ty := ir.TensorOf(ir.F32, size.n)
				r := newRand(1)
				in := []kernels.Tensor{fuseewRandom(r, ty), fuseewRandom(r, ty)}
				f, err := Kernels.Build(node(b, ir.OpFusedElementwise, attrs, ty, ty))
				if err != nil {
					b.Fatal(err)
				}
				out := emptyOf(ty)
				b.SetBytes(int64(3 * ty.Bytes()))
				cpu0 := cpuSeconds()
				for b.Loop() {
					if err := f(out, in); err != nil {
						b.Fatal(err)
					}
				}
				reportPerCPU(b, float64(3*ty.Bytes())*float64(b.N)/1e9, "GB/cpu-s", cpu0)
			})
		}
	}
}

// BenchmarkFusedElementwiseRowBroadcast runs the last kernel of a layer
// norm's backward in bench/gpt.kir through fused_elementwise on one
// thread: dx + rstd·((g - mean(g)) - xhat·mean(g·xhat)) over [16,128,256]
// f32, three of its six inputs one value a row ([16,128,1]), which the
// interpreter broadcasts into a block row by row (gatherRow).
func BenchmarkFusedElementwiseRowBroadcast(b *testing.B) {
	attrs := fuseewProgram("t0 = sub i0, i1", "t1 = mul i2, i3", "t2 = sub t0, t1", "t3 = mul i4, t2", "t4 = add i5, t3")
	full, row := ir.TensorOf(ir.F32, 16, 128, 256), ir.TensorOf(ir.F32, 16, 128, 1)
	r := newRand(3)
	in := []kernels.Tensor{fuseewRandom(r, full), fuseewRandom(r, row), fuseewRandom(r, full), fuseewRandom(r, row), fuseewRandom(r, row), fuseewRandom(r, full)}
	f, err := Kernels.Build(node(b, ir.OpFusedElementwise, attrs, typesOf(in)...))
	if err != nil {
		b.Fatal(err)
	}
	out := emptyOf(full)
	for b.Loop() {
		if err := f(out, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFusedMatmulGPT runs fused_matmul at the GPT bench's shapes
// (bench/gpt.kir: 2048 token rows, width 256, MLP 1024) on one goroutine:
// a projection and the MLP's first layer with their bias, and the MLP's
// input gradient with gelu_grad as its epilogue.
func BenchmarkFusedMatmulGPT(b *testing.B) {
	r := newRand(3)
	f32 := func(dims ...int) kernels.Tensor { return fuseewRandom(r, ir.TensorOf(ir.F32, dims...)) }
	bias := fuseewProgram("t0 = add i0, i1")
	for _, c := range []struct {
		name  string
		attrs ir.Attrs
		args  []kernels.Tensor
	}{
		{"proj_2048x256x256_bias", bias, []kernels.Tensor{f32(2048, 256), f32(256, 256), f32(256)}},
		{"fc1_2048x1024x256_bias", bias, []kernels.Tensor{f32(2048, 256), f32(256, 1024), f32(1024)}},
		{"fc2_dx_2048x1024x256_gelu_grad", fuseewProgram("t0 = gelu_grad i0, i1 {approximate=\"none\"}").With("transpose_b", ir.BoolAttr(true)),
			[]kernels.Tensor{f32(2048, 256), f32(1024, 256), f32(2048, 1024)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			n := node(b, ir.OpFusedMatmul, c.attrs, typesOf(c.args)...)
			f, err := Kernels.Build(n)
			if err != nil {
				b.Fatal(err)
			}
			out := emptyOf(n.Out)
			for b.Loop() {
				if err := f(out, c.args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
