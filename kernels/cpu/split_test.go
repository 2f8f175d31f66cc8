package cpu

import (
	"bytes"
	"fmt"
	"math"
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
