package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// goPool is a kernels.Parallel for the tests: each Run starts a goroutine
// per part, in reverse order, so the parts run side by side in no fixed
// order.
type goPool int

func (p goPool) Workers() int { return int(p) }

func (p goPool) Run(n int, body func(part int)) {
	var wg sync.WaitGroup
	for i := n - 1; i >= 0; i-- {
		wg.Add(1)
		go func() { defer wg.Done(); body(i) }()
	}
	wg.Wait()
}

// buildWith builds op for args with par and runs it once.
func buildWith(t *testing.T, par kernels.Parallel, op ir.Op, attrs ir.Attrs, args ...kernels.Tensor) kernels.Tensor {
	t.Helper()
	n := node(t, op, attrs, typesOf(args)...)
	n.Par = par
	f, err := Kernels.Build(n)
	if err != nil {
		t.Fatal(err)
	}
	out := emptyOf(n.Out)
	for i := range out.Data {
		out.Data[i] = 0x7f
	}
	if err := f(out, args); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMatmulSplitBitwise checks that matmul and fused_matmul split across
// 2, 3, 5 and 8 parts (every product split, whatever its size) give the
// bits of the unsplit kernel: row counts that are and are not multiples of
// the micro-tile, batches with more and fewer elements than parts, parts
// that cross batch elements, broadcast batches and k deeper than a slice.
func TestMatmulSplitBitwise(t *testing.T) {
	if !gemmAsm {
		t.Skip("products split only with the blocked gemm")
	}
	defer func(v int) { matmulSplitMACs = v }(matmulSplitMACs)
	matmulSplitMACs = 1
	shapes := []struct{ a, b, extra []int }{
		{[]int{130, 70}, []int{70, 90}, []int{90}},
		{[]int{3, 50, 40}, []int{40, 33}, []int{50, 33}},
		{[]int{2, 7, 300}, []int{300, 20}, []int{20}},
		{[]int{2, 1, 13, 6}, []int{3, 6, 17}, []int{17}},
		{[]int{5, 600}, []int{600, 40}, []int{40}},
		{[]int{6}, []int{6, 4}, []int{4}},
	}
	relu := fuseewProgram("t0 = add i0, i1", "t1 = relu t0")
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		r := newRand(5)
		for _, sh := range shapes {
			a := fuseewRandom(r, ir.TensorOf(dt, sh.a...))
			b := fuseewRandom(r, ir.TensorOf(dt, sh.b...))
			e := fuseewRandom(r, ir.TensorOf(dt, sh.extra...))
			want := buildWith(t, nil, ir.OpMatmul, nil, a, b)
			wantF := buildWith(t, nil, ir.OpFusedMatmul, relu, a, b, e)
			for _, w := range []int{2, 3, 5, 8} {
				name := fmt.Sprintf("%s %v@%v on %d", dt, sh.a, sh.b, w)
				if got := buildWith(t, goPool(w), ir.OpMatmul, nil, a, b); !bytes.Equal(got.Data, want.Data) {
					t.Errorf("matmul %s: differs from the unsplit product", name)
				}
				if got := buildWith(t, goPool(w), ir.OpFusedMatmul, relu, a, b, e); !bytes.Equal(got.Data, wantF.Data) {
					t.Errorf("fused_matmul %s: differs from the unsplit product", name)
				}
			}
		}
	}
}

// TestFusedElementwiseSplitBitwise checks that fused_elementwise split
// across 2, 3 and 8 parts gives the bits of the unsplit kernel, with
// broadcast operands and sizes that are not whole blocks.
func TestFusedElementwiseSplitBitwise(t *testing.T) {
	defer func(v int) { fuseewSplitElems = v }(fuseewSplitElems)
	fuseewSplitElems = 1
	prog := fuseewProgram("t0 = mul i0, 0.01", "t1 = sub i1, t0", "t2 = tanh t1")
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		r := newRand(9)
		for _, sh := range [][2][]int{{{37, 100}, {100}}, {{3, 700}, {3, 700}}, {{5}, {5}}} {
			x := fuseewRandom(r, ir.TensorOf(dt, sh[0]...))
			y := fuseewRandom(r, ir.TensorOf(dt, sh[1]...))
			want := buildWith(t, nil, ir.OpFusedElementwise, prog, x, y)
			for _, w := range []int{2, 3, 8} {
				if got := buildWith(t, goPool(w), ir.OpFusedElementwise, prog, x, y); !bytes.Equal(got.Data, want.Data) {
					t.Errorf("%s %v on %d parts: differs from the unsplit result", dt, sh, w)
				}
			}
		}
	}
}

// TestBsplineSplitBitwise checks that bspline (bases and derivatives)
// split across 2, 3, 5 and 8 parts (every x split, whatever its size)
// gives the bits of the unsplit kernel, with x inside and outside the
// grid, on knots, NaN and ±Inf, and with fewer elements than parts.
func TestBsplineSplitBitwise(t *testing.T) {
	defer func(v int) { kanSplitElems = v }(kanSplitElems)
	kanSplitElems = 1
	grids := []ir.Attrs{
		kanGridAttrs(-1, 1, 5, 3, 0),
		kanGridAttrs(-1, 1, 5, 3, 1),
		kanGridAttrs(-1, 1, 4, 2, 0),
		kanGridAttrs(-0.5, 1.5, 9, 6, 2),
		kanGridAttrs(-1, 1, 5, 0, 0),
	}
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		r := newRand(11)
		for _, shape := range [][]int{{37, 29}, {3}, {2, 7}} {
			x := fuseewRandom(r, ir.TensorOf(dt, shape...))
			if n := len(x.Data) / dt.Size(); n > 4 {
				vals := kernels.Float64s(x)
				vals[0], vals[1], vals[2], vals[n-1] = math.NaN(), math.Inf(1), math.Inf(-1), 1e30
				kernels.SetFloat64s(x, vals)
			}
			for _, a := range grids {
				want := buildWith(t, nil, ir.OpBspline, a, x)
				for _, w := range []int{2, 3, 5, 8} {
					if got := buildWith(t, goPool(w), ir.OpBspline, a, x); !bytes.Equal(got.Data, want.Data) {
						t.Errorf("%s %v %v on %d parts: differs from the unsplit result", dt, shape, a, w)
					}
				}
			}
		}
	}
}

// TestTransposeSplitBitwise checks that a transpose split across 2, 3, 5
// and 8 parts (every transpose split, whatever its size) gives the bits of
// the unsplit kernel: matrices with fewer rows than parts·16, ragged tiles,
// permutations of rank 3 and 4, and every dtype.
func TestTransposeSplitBitwise(t *testing.T) {
	defer func(v int) { transposeSplitElems = v }(transposeSplitElems)
	transposeSplitElems = 1
	tests := []struct {
		shape, perm []int
	}{
		{[]int{130, 70}, []int{1, 0}},
		{[]int{5, 40}, []int{1, 0}},
		{[]int{3, 35, 18}, []int{2, 0, 1}},
		{[]int{6, 20, 33}, []int{0, 2, 1}},
		{[]int{2, 3, 17, 19}, []int{3, 1, 0, 2}},
	}
	for _, dt := range []ir.DType{ir.F32, ir.F64, ir.I32, ir.I64, ir.Bool} {
		r := newRand(13)
		for _, tc := range tests {
			x := fuseewRandom(r, ir.TensorOf(dt, tc.shape...))
			attrs := ir.MakeAttrs("perm", ir.Ints(tc.perm...))
			want := buildWith(t, nil, ir.OpTranspose, attrs, x)
			for _, w := range []int{2, 3, 5, 8} {
				if got := buildWith(t, goPool(w), ir.OpTranspose, attrs, x); !bytes.Equal(got.Data, want.Data) {
					t.Errorf("%s %v perm %v on %d parts: differs from the unsplit result", dt, tc.shape, tc.perm, w)
				}
			}
		}
	}
}

// TestMatmulTransposedBitwise checks that matmul and fused_matmul reading
// an operand transposed (transpose_a, transpose_b) give the bits of the
// same product of the transpose kernel's result, as the simplify pass
// assumes when it folds a transpose into the product: unsplit and split
// across 3 parts, for 2-D, batched and broadcast batch operands, edge tiles
// and k deeper than a slice. (TestGonumGemmTransposedBitwise checks the
// gonum fallback on its own.)
func TestMatmulTransposedBitwise(t *testing.T) {
	defer func(v int) { matmulSplitMACs = v }(matmulSplitMACs)
	matmulSplitMACs = 1
	shapes := []struct{ a, b, extra []int }{ // op(a) and op(b), as the product reads them
		{[]int{13, 7}, []int{7, 21}, []int{21}},
		{[]int{130, 300}, []int{300, 40}, []int{40}},
		{[]int{2, 9, 5}, []int{5, 17}, []int{9, 17}},
		{[]int{2, 1, 6, 4}, []int{3, 4, 10}, []int{10}},
	}
	swap := func(s []int) []int {
		s = append([]int(nil), s...)
		s[len(s)-2], s[len(s)-1] = s[len(s)-1], s[len(s)-2]
		return s
	}
	perm := func(rank int) ir.Attrs {
		p := make([]int, rank)
		for i := range p {
			p[i] = i
		}
		p[rank-2], p[rank-1] = rank-1, rank-2
		return ir.MakeAttrs("perm", ir.Ints(p...))
	}
	relu := fuseewProgram("t0 = add i0, i1", "t1 = relu t0")
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		r := newRand(11)
		for _, sh := range shapes {
			// a and b as stored for each flag, and their transposes.
			a := fuseewRandom(r, ir.TensorOf(dt, swap(sh.a)...))
			b := fuseewRandom(r, ir.TensorOf(dt, swap(sh.b)...))
			e := fuseewRandom(r, ir.TensorOf(dt, sh.extra...))
			at := buildWith(t, nil, ir.OpTranspose, perm(len(sh.a)), a)
			bt := buildWith(t, nil, ir.OpTranspose, perm(len(sh.b)), b)
			for _, flags := range [][2]bool{{true, false}, {false, true}, {true, true}} {
				x, xs := at, a // op(a) materialized, and a as the product reads it
				if !flags[0] {
					xs = at
				}
				y, ys := bt, b
				if !flags[1] {
					ys = bt
				}
				var attrs ir.Attrs
				if flags[0] {
					attrs = attrs.With("transpose_a", ir.BoolAttr(true))
				}
				if flags[1] {
					attrs = attrs.With("transpose_b", ir.BoolAttr(true))
				}
				want := buildWith(t, nil, ir.OpMatmul, nil, x, y)
				wantF := buildWith(t, nil, ir.OpFusedMatmul, relu, x, y, e)
				fused := relu
				for _, kv := range attrs {
					fused = fused.With(kv.Key, kv.Value)
				}
				for _, par := range []kernels.Parallel{nil, goPool(3)} {
					name := fmt.Sprintf("%s %v@%v %v split %v", dt, sh.a, sh.b, flags, par != nil)
					if got := buildWith(t, par, ir.OpMatmul, attrs, xs, ys); !bytes.Equal(got.Data, want.Data) {
						t.Errorf("matmul %s: differs from the product of the transposes", name)
					}
					if got := buildWith(t, par, ir.OpFusedMatmul, fused, xs, ys, e); !bytes.Equal(got.Data, wantF.Data) {
						t.Errorf("fused_matmul %s: differs from the product of the transposes", name)
					}
				}
			}
		}
	}
}

// TestReduceSplitBitwise checks that sum and mean split across 2, 3 and 8
// parts (by columns of the kept innermost axis; when the innermost axes
// are reduced, by input rows where there are more rows than outputs, else
// by output elements) give the bits of the unsplit kernel: leading,
// middle and several axes reduced, keepdims, column counts that are and
// are not multiples of a part's rounding.
func TestReduceSplitBitwise(t *testing.T) {
	defer func(e, c, m int) { reduceSplitElems, reduceSplitCols, parMinWork = e, c, m }(reduceSplitElems, reduceSplitCols, parMinWork)
	reduceSplitElems, reduceSplitCols, parMinWork = 1, 16, 1
	cases := []struct {
		shape []int
		attrs ir.Attrs
	}{
		{[]int{37, 100}, ir.MakeAttrs("axes", ir.Ints(0))},
		{[]int{3, 5, 70}, ir.MakeAttrs("axes", ir.Ints(1))},
		{[]int{4, 3, 50}, ir.MakeAttrs("axes", ir.Ints(0, 1), "keepdims", ir.BoolAttr(true))},
		{[]int{6, 130}, ir.MakeAttrs("axes", ir.Ints(0), "keepdims", ir.BoolAttr(true))},
		{[]int{9, 40}, ir.MakeAttrs("axes", ir.Ints(1))},
		{[]int{128, 512}, ir.MakeAttrs("axes", ir.Ints(0))},
		// Rows each summed into one output element: split by rows where
		// several rows go into an output (a bias gradient over N, H, W),
		// by outputs where each row is one.
		{[]int{3, 7, 5, 4}, ir.MakeAttrs("axes", ir.Ints(0, 2, 3))},
		{[]int{4, 16, 9}, ir.MakeAttrs("axes", ir.Ints(0, 2))},
		{[]int{5, 3, 2, 11}, ir.MakeAttrs("axes", ir.Ints(0, 2, 3), "keepdims", ir.BoolAttr(true))},
		{[]int{6, 50}, ir.MakeAttrs("axes", ir.Ints(1))},
	}
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		r := newRand(13)
		for _, c := range cases {
			x := fuseewRandom(r, ir.TensorOf(dt, c.shape...))
			for _, op := range []ir.Op{ir.OpSum, ir.OpMean} {
				want := buildWith(t, nil, op, c.attrs, x)
				for _, w := range []int{2, 3, 8} {
					if got := buildWith(t, goPool(w), op, c.attrs, x); !bytes.Equal(got.Data, want.Data) {
						t.Errorf("%s %s %v %v on %d parts: differs from the unsplit result", op, dt, c.shape, c.attrs, w)
					}
				}
			}
		}
	}
}

// TestGonumGemmTransposedBitwise checks the gonum fallback's gemm with
// transposed operands (copied transposed, then multiplied untransposed)
// against gonum's product of the transposes made beforehand: the same bits.
func TestGonumGemmTransposedBitwise(t *testing.T) {
	testGonumGemmTransposed[float32](t)
	testGonumGemmTransposed[float64](t)
}

func testGonumGemmTransposed[T float](t *testing.T) {
	r := newRand(17)
	const m, n, k = 67, 70, 130
	a := randVals[T](r, m*k, false) // op(a): m×k
	b := randVals[T](r, k*n, false) // op(b): k×n
	at := transposeInto(nil, a, k, m, k)
	bt := transposeInto(nil, b, n, k, n)
	want := make([]T, m*n)
	gonumGemmOf[T]()(false, false, m, n, k, a, k, b, n, want, n)
	g := gonumGemmOf[T]()
	for _, flags := range [][2]bool{{true, false}, {false, true}, {true, true}} {
		x, lda := a, k
		if flags[0] {
			x, lda = at, m
		}
		y, ldb := b, n
		if flags[1] {
			y, ldb = bt, k
		}
		got := make([]T, m*n)
		g(flags[0], flags[1], m, n, k, x, lda, y, ldb, got, n)
		for i := range got {
			if math.Float64bits(float64(got[i])) != math.Float64bits(float64(want[i])) {
				t.Fatalf("%T %v: element %d = %v, want %v", got[0], flags, i, got[i], want[i])
			}
		}
	}
}

// TestPoolSplitBitwise checks that the pooling kernels split across 2, 3
// and 8 parts of their planes give the bits of the unsplit kernels, over
// inputs with ties, NaN and -inf, with and without padding and dilation,
// and windows that overlap.
func TestPoolSplitBitwise(t *testing.T) {
	defer func(v int) { poolSplitTaps = v }(poolSplitTaps)
	poolSplitTaps = 1
	cases := []struct {
		shape    []int
		attrs    ir.Attrs // avg_pool2d's; max_pool2d's add the dilation
		dilation int
	}{
		{[]int{3, 5, 8, 8}, ir.MakeAttrs("kernel", ir.Ints(2)), 1},
		{[]int{2, 3, 6, 38}, ir.MakeAttrs("kernel", ir.Ints(2)), 1},
		{[]int{2, 3, 9, 7}, ir.MakeAttrs("kernel", ir.Ints(3, 2), "stride", ir.Ints(1, 2)), 1},
		{[]int{7, 6, 5}, ir.MakeAttrs("kernel", ir.Ints(3), "stride", ir.Ints(2), "padding", ir.Ints(1)), 1},
		{[]int{2, 4, 9, 9}, ir.MakeAttrs("kernel", ir.Ints(2)), 2},
	}
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		r := newRand(17)
		for _, c := range cases {
			x := poolTestInput(r, dt, c.shape)
			maxAttrs := c.attrs.With("dilation", ir.Ints(c.dilation))
			y := buildWith(t, nil, ir.OpMaxPool2d, maxAttrs, x)
			dy := fuseewRandom(r, y.Type)
			g := fuseewRandom(r, x.Type)
			avgAttrs := c.attrs
			ya := buildWith(t, nil, ir.OpAvgPool2d, avgAttrs, x)
			dya := fuseewRandom(r, ya.Type)
			gradAttrs := avgAttrs.With("input_shape", ir.Ints(c.shape...))
			runs := []struct {
				op    ir.Op
				attrs ir.Attrs
				args  []kernels.Tensor
			}{
				{ir.OpMaxPool2d, maxAttrs, []kernels.Tensor{x}},
				{ir.OpMaxPool2dGrad, maxAttrs, []kernels.Tensor{dy, x}},
				{ir.OpMaxPool2dSelect, maxAttrs, []kernels.Tensor{g, x}},
				{ir.OpAvgPool2d, avgAttrs, []kernels.Tensor{x}},
				{ir.OpAvgPool2dGrad, gradAttrs, []kernels.Tensor{dya}},
			}
			for _, run := range runs {
				want := buildWith(t, nil, run.op, run.attrs, run.args...)
				for _, w := range []int{2, 3, 8} {
					if got := buildWith(t, goPool(w), run.op, run.attrs, run.args...); !bytes.Equal(got.Data, want.Data) {
						t.Errorf("%s %s %v %v on %d parts: differs from the unsplit result", run.op, dt, c.shape, run.attrs, w)
					}
				}
			}
		}
	}
}

// poolTestInput returns random values of dt in shape with runs of equal
// values, NaN and -inf among them.
func poolTestInput(r *rand.Rand, dt ir.DType, shape []int) kernels.Tensor {
	x := fuseewRandom(r, ir.TensorOf(dt, shape...))
	n := ir.Shape(shape).NumElements()
	set := func(i int, v float64) {
		if dt == ir.F32 {
			kernels.View[float32](x)[i] = float32(v)
		} else {
			kernels.View[float64](x)[i] = v
		}
	}
	for i := range n {
		switch r.IntN(10) {
		case 0:
			set(i, math.NaN())
		case 1:
			set(i, math.Inf(-1))
		case 2, 3:
			set(i, 0.5) // ties
		}
	}
	return x
}

// TestMaxPoolArgmaxesFastPath checks the arg maxes of windows without
// padding or dilation (the loops without range checks or branches, and the
// AVX2 kernel for f32 2×2 windows at stride 2: rows of 3, 4, 7, 13, 16, 17
// and 20 windows) against maxPoolArgmax, window by window, on
// inputs with ties, NaN and -inf.
func TestMaxPoolArgmaxesFastPath(t *testing.T) {
	testMaxPoolArgmaxesFastPath[float32](t, ir.F32)
	testMaxPoolArgmaxesFastPath[float64](t, ir.F64)
}

func testMaxPoolArgmaxesFastPath[T float](t *testing.T, dt ir.DType) {
	r := newRand(19)
	for _, c := range []struct{ h, w, kh, kw, sh, sw int }{
		{8, 8, 2, 2, 2, 2}, {6, 40, 2, 2, 2, 2}, {5, 34, 2, 2, 1, 2}, {4, 33, 2, 2, 2, 2}, {6, 14, 2, 2, 2, 2},
		{4, 26, 2, 2, 2, 2}, {2, 6, 2, 2, 2, 2}, {9, 7, 2, 2, 1, 3}, {9, 7, 3, 2, 1, 2}, {10, 10, 3, 3, 2, 2}, {5, 6, 1, 1, 1, 1}, {7, 7, 2, 3, 3, 1},
	} {
		g, err := ir.PoolGeometry(ir.Shape{1, c.h, c.w}, ir.MakeAttrs("kernel", ir.Ints(c.kh, c.kw), "stride", ir.Ints(c.sh, c.sw)))
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			x := kernels.View[T](poolTestInput(r, dt, []int{c.h, c.w}))
			at := make([]int32, g.OH*g.OW)
			maxPoolArgmaxes(&g, x, at)
			for oy := range g.OH {
				for ox := range g.OW {
					want, _ := maxPoolArgmax(&g, x, oy, ox)
					if got := int(at[oy*g.OW+ox]); got != want {
						t.Fatalf("%s %+v window (%d,%d): arg max %d, want %d", dt, c, oy, ox, got, want)
					}
				}
			}
		}
	}
}

// TestConvSplitBitwise checks that the convolution kernels on 1, 2, 3 and
// 7 workers (every convolution split, whatever its size: the batch across
// the parts, or the gemm where the batch is one image) give the bits of
// the kernels run without a pool, with the batch in one chunk and in
// chunks of 2 and 3 images, each chunk's images in one gemm and each image
// in gemms of its own (convDirectL), on nnConvCases and on batches of 5 to
// 11 images (a weight gradient of more slabs than parts, and of fewer).
func TestConvSplitBitwise(t *testing.T) {
	defer func(m, e, c, d int) {
		matmulSplitMACs, convSplitMACs, convChunkElems, convDirectL = m, e, c, d
	}(matmulSplitMACs, convSplitMACs, convChunkElems, convDirectL)
	matmulSplitMACs, convSplitMACs = 1, 1
	cases := append([]nnConvCase{
		{x: []int{9, 3, 6, 5}, w: []int{4, 3, 3, 3}, padding: []int{1}, bias: true},
		{x: []int{11, 4, 7, 6}, w: []int{6, 2, 3, 2}, stride: []int{2, 1}, padding: []int{1, 0}, groups: 2},
		{x: []int{5, 2, 9}, w: []int{3, 2, 3}, dilation: []int{2}, bias: true},
	}, nnConvCases...)
	for _, c := range cases {
		g, err := ir.ConvGeometry(c.x, c.w, c.attrs())
		if err != nil {
			t.Fatal(err)
		}
		k, l := g.CIn/g.Groups*ir.Shape(c.w[2:]).NumElements(), g.OutShape()[2:].NumElements()
		per := max(k, g.COut/g.Groups) * l // one image's chunk size
		for _, dt := range []ir.DType{ir.F32, ir.F64} {
			r := newRand(23)
			x := fuseewRandom(r, ir.TensorOf(dt, c.x...))
			w := fuseewRandom(r, ir.TensorOf(dt, c.w...))
			dy := fuseewRandom(r, ir.TensorOf(dt, g.OutShape()...))
			fwd := []kernels.Tensor{x, w}
			if c.bias {
				fwd = append(fwd, fuseewRandom(r, ir.TensorOf(dt, g.COut)))
			}
			runs := []struct {
				op    ir.Op
				attrs ir.Attrs
				args  []kernels.Tensor
			}{
				{c.op(), c.attrs(), fwd},
				{ir.OpConvInputGrad, c.attrs().With("input_shape", ir.Ints(c.x...)), []kernels.Tensor{dy, w}},
				{ir.OpConvWeightGrad, c.attrs().With("weight_shape", ir.Ints(c.w...)), []kernels.Tensor{x, dy}},
			}
			for _, chunkDirect := range [][2]int{{1 << 18, 1 << 30}, {2 * per, 1 << 30}, {3 * per, 1 << 30}, {1 << 18, 1}, {3 * per, 1}} {
				chunk := chunkDirect[0]
				convChunkElems, convDirectL = chunk, chunkDirect[1]
				for _, run := range runs {
					want := buildWith(t, nil, run.op, run.attrs, run.args...)
					for _, workers := range []int{1, 2, 3, 7} {
						p := &countPool{goPool: goPool(workers)}
						if got := buildWith(t, p, run.op, run.attrs, run.args...); !bytes.Equal(got.Data, want.Data) {
							t.Errorf("%s %s x%v w%v, chunks of %d elements, direct from l=%d, on %d workers: differs from no pool", run.op, dt, c.x, c.w, chunk, convDirectL, workers)
						}
						if gemmAsm && workers > 1 && c.x[0] > 1 && p.parts < 2 {
							t.Errorf("%s %s x%v w%v on %d workers: not split", run.op, dt, c.x, c.w, workers)
						}
					}
				}
			}
		}
	}
}

// TestConvRunTakesOwnSet checks which buffer set a split convolution's
// part takes: its block's (part q of n on W workers: set q·W/n, the set
// of the block of parts the pool hands one core first) when free, else
// the next free one, and that a set given back is free again.
func TestConvRunTakesOwnSet(t *testing.T) {
	defer func(c int) { convSplitMACs = c }(convSplitMACs)
	convSplitMACs = 1
	if !gemmAsm {
		t.Skip("convolutions split on the blocked gemm only")
	}
	g, err := ir.ConvGeometry(ir.Shape{16, 2, 5, 5}, ir.Shape{3, 2, 3, 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := newConvPlan(g)
	cr := newConvRun[float32](p, goPool(2), p.og, p.nb*p.l, p.k, p.n)
	if cr.parts != 2*convPartsPerWorker || len(cr.sets) != 2 {
		t.Fatalf("%d parts and %d sets, want %d and 2", cr.parts, len(cr.sets), 2*convPartsPerWorker)
	}
	var got []int
	cr.body = func(q int, pt *convPart[float32]) {
		for i, s := range cr.sets {
			if s == pt {
				got = append(got, i)
			}
		}
	}
	for q := range cr.parts {
		cr.part(q)
	}
	if want := []int{0, 0, 0, 0, 1, 1, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("parts took sets %v, want %v", got, want)
	}
	cr.taken[1].Store(true) // worker 1's set in use: a part of its block takes the other
	got = got[:0]
	cr.part(5)
	if !slices.Equal(got, []int{0}) || cr.taken[0].Load() {
		t.Errorf("with set 1 taken, part 5 took sets %v (set 0 taken after: %v), want [0] and given back", got, cr.taken[0].Load())
	}
}

// TestConvWeightGradSlabOrder checks the order conv_weight_grad documents
// for a batch cut into slabs (convWeightSlabs): with one image a slab,
// the result is, bit for bit, the f32 sum in slab order of the weight
// gradients of the images alone, whether the slabs' gemms run as og×k or
// transposed (convWeightTransposed), on one worker and split.
func TestConvWeightGradSlabOrder(t *testing.T) {
	defer func(v int) { convSplitMACs = v }(convSplitMACs)
	convSplitMACs = 1
	for _, c := range []struct{ x, w []int }{
		{[]int{convWeightSlabs, 3, 6, 5}, []int{5, 3, 3, 3}},    // og 5, k 27: og×k
		{[]int{convWeightSlabs, 12, 5, 5}, []int{64, 12, 2, 2}}, // og 64, k 48: transposed
		{[]int{convWeightSlabs, 1, 6, 6}, []int{20, 1, 3, 3}},   // a first layer: transposed
	} {
		r := newRand(31)
		attrs := ir.MakeAttrs("padding", ir.Ints(1), "weight_shape", ir.Ints(c.w...))
		x := fuseewRandom(r, ir.TensorOf(ir.F32, c.x...))
		g, err := ir.ConvGeometry(c.x, c.w, attrs)
		if err != nil {
			t.Fatal(err)
		}
		dy := fuseewRandom(r, ir.TensorOf(ir.F32, g.OutShape()...))
		want := make([]float32, ir.Shape(c.w).NumElements())
		for s := range c.x[0] {
			one := func(tt kernels.Tensor) kernels.Tensor {
				sh := slices.Clone(tt.Type.Shape)
				sh[0] = 1
				size := len(tt.Data) / tt.Type.Shape[0]
				return kernels.Tensor{Type: ir.TensorOf(ir.F32, sh...), Data: tt.Data[s*size : (s+1)*size]}
			}
			for i, v := range kernels.View[float32](buildWith(t, nil, ir.OpConvWeightGrad, attrs, one(x), one(dy))) {
				if s == 0 {
					want[i] = v
				} else {
					want[i] += v
				}
			}
		}
		for _, par := range []kernels.Parallel{nil, goPool(2), goPool(3)} {
			got := kernels.View[float32](buildWith(t, par, ir.OpConvWeightGrad, attrs, x, dy))
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("x %v, w %v, %v: element %d is %v, want the slabs' sum in order %v", c.x, c.w, par, i, got[i], want[i])
				}
			}
		}
	}
}
