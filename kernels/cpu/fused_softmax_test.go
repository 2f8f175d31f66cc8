package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// fsmSameBits fails unless got and want hold the same bits (any NaN
// matching any NaN).
func fsmSameBits(t *testing.T, what string, got, want kernels.Tensor) {
	t.Helper()
	if !got.Type.Equal(want.Type) {
		t.Fatalf("%s: %s, want %s", what, got.Type, want.Type)
	}
	if got.Type.DType == ir.F32 {
		fusepatSameBits(t, what, kernels.View[float32](got), kernels.View[float32](want))
	} else {
		fusepatSameBits(t, what, kernels.View[float64](got), kernels.View[float64](want))
	}
}

// fsmSpecials puts NaN, +Inf and -Inf into a few rows of the float tensor
// x of rows of length dim: a NaN in row 1, a +Inf in row 2, a -Inf in row
// 3 and a row 4 of only -Inf, where x has them.
func fsmSpecials(x kernels.Tensor, dim int) {
	v := kernels.Float64s(x)
	rows := len(v) / dim
	if rows > 1 {
		v[dim+dim/2] = math.NaN()
	}
	if rows > 2 {
		v[2*dim] = math.Inf(1)
	}
	if rows > 3 {
		v[3*dim+dim-1] = math.Inf(-1)
	}
	if rows > 4 {
		for i := range dim {
			v[4*dim+i] = math.Inf(-1)
		}
	}
	if err := kernels.SetFloat64s(x, v); err != nil {
		panic(err)
	}
}

// fsmCase is a shape and the programs tried on it: a prologue over x (of
// the shape) and extra inputs, an epilogue over the gradient and extras.
type fsmCase struct {
	shape          []int
	pro, epi       []string
	proIn, epiIn   [][]int // the shapes of the extra inputs
	specials, many bool    // NaN and Inf in x; run on 2 and 3 workers
}

var fsmCases = []fsmCase{
	{shape: []int{1, 1000}, pro: []string{"t0 = mul i0, i1"}, proIn: [][]int{{1, 1000}}, epi: []string{"t0 = mul i0, i1"}, epiIn: [][]int{{1, 1000}}, many: true},
	{shape: []int{1, 5000}, pro: []string{"t0 = mul i0, i1"}, proIn: [][]int{{1, 5000}}, epi: []string{"t0 = mul i0, i1"}, epiIn: [][]int{{5000}}, specials: true},
	{shape: []int{10, 33}, pro: []string{"t0 = mul i0, i1", "t1 = add t0, i2"}, proIn: [][]int{{10, 33}, {33}},
		epi: []string{"t0 = mul i0, i1", "t1 = mul t0, 0.5", "t2 = sub i2, t1"}, epiIn: [][]int{{10, 33}, {10, 1}}, specials: true, many: true},
	{shape: []int{1000, 10}, pro: []string{"t0 = tanh i0"}, epi: []string{"t0 = mul i0, i1"}, epiIn: [][]int{{1000, 10}}, specials: true, many: true},
	{shape: []int{1024, 7}, pro: []string{"t0 = mul i0, i1"}, proIn: [][]int{{1024, 7}}, epi: []string{"t0 = neg i0"}, many: true},
	{shape: []int{4097, 5}, pro: []string{"t0 = mul i0, 3.0"}, epi: []string{"t0 = add i0, i1"}, epiIn: [][]int{{4097, 5}}, specials: true, many: true},
	{shape: []int{2, 3, 300}, pro: []string{"t0 = mul i0, i1"}, proIn: [][]int{{2, 3, 300}}, epi: []string{"t0 = mul i0, i1"}, epiIn: [][]int{{2, 3, 300}}, specials: true},
	{shape: []int{6}, pro: []string{"t0 = sub i0, i1"}, proIn: [][]int{{}}, epi: []string{"t0 = mul i0, i1"}, epiIn: [][]int{{6}}},
	{shape: []int{3, 0}, pro: []string{"t0 = mul i0, i1"}, proIn: [][]int{{3, 0}}, epi: []string{"t0 = mul i0, i1"}, epiIn: [][]int{{3, 0}}},
}

// TestFusedSoftmaxBitwise checks fused_softmax and fused_softmax_grad,
// with and without log, f32 and f64, against the unfused ops each run by
// its own kernel (the program instruction by instruction, then softmax;
// softmax_grad, then the program), bit for bit: rows of 1, 10, 1000, 1024
// and 4097, rows with NaN and ±Inf, on 1, 2 and 3 workers, with the
// streaming stores of a large output and without.
func TestFusedSoftmaxBitwise(t *testing.T) {
	defer func(v, w int) { fuseewStreamBytes, parMinWork = v, w }(fuseewStreamBytes, parMinWork)
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		for ci, c := range fsmCases {
			for _, logOut := range []bool{false, true} {
				name := fmt.Sprintf("%s %v log=%v", dt, c.shape, logOut)
				r := newRand(uint64(ci + 1))
				dim := c.shape[len(c.shape)-1]
				x := fuseewRandom(r, ir.TensorOf(dt, c.shape...))
				if c.specials {
					fsmSpecials(x, dim)
				}
				proIn := []kernels.Tensor{x}
				for _, s := range c.proIn {
					proIn = append(proIn, fuseewRandom(r, ir.TensorOf(dt, s...)))
				}
				pro := fuseewProgram(c.pro...)
				soft, grad := ir.OpSoftmax, ir.OpSoftmaxGrad
				if logOut {
					soft, grad = ir.OpLogSoftmax, ir.OpLogSoftmaxGrad
					pro = pro.With("log", ir.BoolAttr(true))
				}
				p, err := ir.EwProgramOf(pro)
				if err != nil {
					t.Fatal(err)
				}
				ref := fuseewReference(t, p, proIn)
				wantY := mustRun(t, soft, nil, ref[len(ref)-1])

				dy := fuseewRandom(r, ir.TensorOf(dt, c.shape...))
				epiIn := []kernels.Tensor{dy, wantY}
				for _, s := range c.epiIn {
					epiIn = append(epiIn, fuseewRandom(r, ir.TensorOf(dt, s...)))
				}
				epi := fuseewProgram(c.epi...)
				if logOut {
					epi = epi.With("log", ir.BoolAttr(true))
				}
				ep, err := ir.EwProgramOf(epi)
				if err != nil {
					t.Fatal(err)
				}
				g := mustRun(t, grad, nil, dy, wantY)
				ref = fuseewReference(t, ep, append([]kernels.Tensor{g}, epiIn[2:]...))
				wantG := ref[len(ref)-1]

				for _, stream := range []int{16 << 20, 1} {
					fuseewStreamBytes, parMinWork = stream, 1<<15
					what := fmt.Sprintf("%s stream=%v", name, stream == 1)
					fsmSameBits(t, "fused_softmax "+what, mustRun(t, ir.OpFusedSoftmax, pro, proIn...), wantY)
					fsmSameBits(t, "fused_softmax_grad "+what, mustRun(t, ir.OpFusedSoftmaxGrad, epi, epiIn...), wantG)
					if !c.many {
						continue
					}
					parMinWork = 1
					for _, w := range []int{2, 3} {
						what := fmt.Sprintf("%s on %d workers", what, w)
						fsmSameBits(t, "fused_softmax "+what, buildWith(t, goPool(w), ir.OpFusedSoftmax, pro, proIn...), wantY)
						fsmSameBits(t, "fused_softmax_grad "+what, buildWith(t, goPool(w), ir.OpFusedSoftmaxGrad, epi, epiIn...), wantG)
					}
				}
			}
		}
	}
}
