package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// softmaxSeqRow is softmax's arithmetic written out one element at a
// time: the first largest element m, each x - m rounded, its exponential
// (exp's scalar code, which the vector calls match bit for bit), the sum
// in rowSum's order (refRowSum), then each exponential divided by the sum (or
// x - m - log(sum) for log_softmax).
func softmaxSeqRow[T float](x []T, logOut bool) []T {
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	out := make([]T, len(x))
	for i, v := range x {
		out[i] = exp(v - m)
	}
	s := refRowSum(out)
	ls := T(math.Log(float64(s)))
	for i, v := range x {
		if logOut {
			out[i] = v - m - ls
		} else {
			out[i] /= s
		}
	}
	return out
}

// TestSoftmaxRowsBitwise checks softmax and log_softmax over the last axis
// against softmaxSeqRow bit for bit: row counts that are and are not
// multiples of the four rows summed together, rows shorter and longer than
// rowMax's lanes, and rows whose maximum is a tie of -0 and +0, whose
// first or a later element is NaN, or that hold ±inf.
func TestSoftmaxRowsBitwise(t *testing.T) {
	nan, inf, negZero := math.NaN(), math.Inf(1), math.Copysign(0, -1)
	special := [][]float64{
		{negZero, 0, -1, -2},
		{0, negZero, -1, -2},
		{nan, 1, 2, 3},
		{1, 2, nan, 3},
		{-inf, 1, 2, 3},
		{1, inf, 2, 3},
		{-inf, -inf, -inf, -inf},
		{-3, negZero, -5, 0},
	}
	for _, dim := range []int{1, 5, 31, 32, 33, 100, 1024} {
		for _, rows := range []int{1, 3, 4, 9} {
			r := newRand(uint64(dim*rows + 1))
			t.Run(fmt.Sprintf("%dx%d", rows, dim), func(t *testing.T) {
				softmaxRowsCase(t, randVals[float32](r, rows*dim, false), rows, dim, special)
				softmaxRowsCase(t, randVals[float64](r, rows*dim, false), rows, dim, special)
			})
		}
	}
}

func softmaxRowsCase[T float](t *testing.T, x []T, rows, dim int, special [][]float64) {
	t.Helper()
	for i := range x {
		x[i] *= 10
	}
	if dim >= 4 {
		// A special row every other row, at the start, the middle and the end of its row.
		for r := 0; r < rows; r += 2 {
			sp := special[(r/2+dim)%len(special)]
			at := r*dim + (r%3)*(dim-len(sp))/2
			for i, v := range sp {
				x[at+i] = T(v)
			}
		}
	}
	for _, op := range []ir.Op{ir.OpSoftmax, ir.OpLogSoftmax} {
		got := kernels.View[T](mustRun(t, op, nil, tensorOf([]int{rows, dim}, x)))
		for r := range rows {
			want := softmaxSeqRow(x[r*dim:(r+1)*dim], op == ir.OpLogSoftmax)
			fusepatSameBits(t, fmt.Sprintf("%s row %d", op, r), got[r*dim:(r+1)*dim], want)
		}
	}
}

// TestRowMaxTies checks rowMax (its vector lanes where the CPU has them)
// against the sequential loop for ties of -0 and +0 in every lane position
// and NaN first or later.
func TestRowMaxTies(t *testing.T) {
	for _, n := range []int{32, 40, 65} {
		for i := range n {
			for _, a := range []float32{0, float32(math.Copysign(0, -1))} {
				x := make([]float32, n)
				for j := range x {
					x[j] = -1
				}
				x[i] = a
				x[(i+5)%n] = -a
				if got, want := rowMax(x), rowMaxSeq(x); math.Float32bits(got) != math.Float32bits(want) {
					t.Errorf("n %d, %v at %d: rowMax %v, want %v", n, a, i, got, want)
				}
			}
			x := make([]float32, n)
			for j := range x {
				x[j] = float32(j%5) - 7
			}
			x[(i+7)%n] = 3
			x[i] = float32(math.NaN())
			if got, want := rowMax(x), rowMaxSeq(x); math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("n %d, NaN at %d: rowMax %v, want %v", n, i, got, want)
			}
		}
	}
}
