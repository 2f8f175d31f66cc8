package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// elems returns n distinct-ish elements of type T for data-movement tests.
func elems[T kernels.Elem](n int) []T {
	out := make([]T, n)
	for i := range out {
		switch p := any(&out[i]).(type) {
		case *float32:
			*p = float32(i) + 0.5
		case *float64:
			*p = float64(i) + 0.25
		case *int32:
			*p = int32(i*3 - 7)
		case *int64:
			*p = int64(i)<<33 + 1
		case *bool:
			*p = i%3 == 1
		}
	}
	return out
}

// TestTranspose checks a hand-computed transpose and random permutations in
// every dtype against index arithmetic.
func TestTranspose(t *testing.T) {
	out := mustRun(t, ir.OpTranspose, nil, tensorOf([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6}))
	checkEqual(t, "[2,3]ᵀ", kernels.View[float32](out), []float32{1, 4, 2, 5, 3, 6})

	testTranspose[float32](t)
	testTranspose[float64](t)
	testTranspose[int32](t)
	testTranspose[int64](t)
	testTranspose[bool](t)
}

func testTranspose[T kernels.Elem](t *testing.T) {
	tests := []struct {
		shape []int
		perm  []int // nil: absent (reverse)
	}{
		{[]int{4}, nil},
		{[]int{3, 5}, nil},
		{[]int{3, 5}, []int{0, 1}},
		{[]int{2, 3, 4}, []int{0, 2, 1}},
		{[]int{2, 3, 4}, []int{1, 0, 2}},
		{[]int{2, 3, 4}, []int{1, 2, 0}},
		{[]int{2, 3, 4}, []int{2, 0, 1}},
		{[]int{2, 3, 4}, nil},
		{[]int{1, 5, 1, 3}, []int{3, 1, 2, 0}},
		{[]int{2, 3, 4, 5}, []int{0, 1, 3, 2}},
		{[]int{2, 3, 4, 5}, []int{2, 3, 0, 1}},
		{[]int{37, 50}, nil},               // tiles of 16, with ragged edges
		{[]int{3, 35, 18}, []int{2, 0, 1}}, // rows whose offsets are not neighbours
		{[]int{4, 33, 17}, []int{0, 2, 1}},
	}
	for _, tc := range tests {
		xs := ir.Shape(tc.shape)
		var attrs ir.Attrs
		perm := make([]int, len(xs))
		for i := range perm {
			perm[i] = len(xs) - 1 - i
		}
		if tc.perm != nil {
			attrs = ir.MakeAttrs("perm", ir.Ints(tc.perm...))
			perm = tc.perm
		}
		t.Run(fmt.Sprintf("%s/%v/%v", kernels.DTypeOf[T](), xs, tc.perm), func(t *testing.T) {
			x := elems[T](xs.NumElements())
			out := mustRun(t, ir.OpTranspose, attrs, tensorOf(xs, x))
			st := xs.Strides()
			want := make([]T, len(x))
			for i := range want {
				idx := unravel(out.Type.Shape, i)
				src := 0
				for j, p := range perm {
					src += idx[j] * st[p]
				}
				want[i] = x[src]
			}
			checkEqual(t, "transpose", kernels.View[T](out), want)
		})
	}
}

// TestReshape checks that reshape keeps the elements in order in every
// dtype, including -1 and rank changes.
func TestReshape(t *testing.T) {
	testReshape[float32](t)
	testReshape[float64](t)
	testReshape[int32](t)
	testReshape[int64](t)
	testReshape[bool](t)
}

func testReshape[T kernels.Elem](t *testing.T) {
	tests := []struct {
		in, shape, want []int
	}{
		{[]int{2, 3}, []int{3, 2}, []int{3, 2}},
		{[]int{2, 3, 4}, []int{-1}, []int{24}},
		{[]int{2, 3, 4}, []int{4, -1, 2}, []int{4, 3, 2}},
		{[]int{1}, []int{}, []int{}},
		{[]int{}, []int{1, 1, 1}, []int{1, 1, 1}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%v->%v", kernels.DTypeOf[T](), tc.in, tc.shape), func(t *testing.T) {
			x := elems[T](ir.Shape(tc.in).NumElements())
			out := mustRun(t, ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(tc.shape...)), tensorOf(tc.in, x))
			if !out.Type.Shape.Equal(tc.want) {
				t.Fatalf("shape %s, want %v", out.Type.Shape, tc.want)
			}
			checkEqual(t, "reshape", kernels.View[T](out), x)
		})
	}
}

// TestBroadcastTo checks broadcast_to against the broadcasting index map in
// every dtype.
func TestBroadcastTo(t *testing.T) {
	out := mustRun(t, ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(2, 3)), tensorOf([]int{2, 1}, []float64{1, 2}))
	checkEqual(t, "[2,1]->[2,3]", kernels.View[float64](out), []float64{1, 1, 1, 2, 2, 2})

	testBroadcastTo[float32](t)
	testBroadcastTo[float64](t)
	testBroadcastTo[int32](t)
	testBroadcastTo[int64](t)
	testBroadcastTo[bool](t)
}

func testBroadcastTo[T kernels.Elem](t *testing.T) {
	tests := [][2][]int{
		{{3}, {2, 3}},
		{{2, 1}, {2, 3}},
		{{}, {2, 2}},
		{{1, 3, 1}, {2, 3, 4}},
		{{2, 1, 4}, {3, 2, 5, 4}},
		{{2, 3}, {2, 3}},
		{{1}, {1}},
	}
	for _, tc := range tests {
		xs, os := ir.Shape(tc[0]), ir.Shape(tc[1])
		t.Run(fmt.Sprintf("%s/%v->%v", kernels.DTypeOf[T](), xs, os), func(t *testing.T) {
			x := elems[T](xs.NumElements())
			out := mustRun(t, ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(os...)), tensorOf(xs, x))
			want := make([]T, os.NumElements())
			for i := range want {
				want[i] = x[bcastIndex(xs, unravel(os, i))]
			}
			checkEqual(t, "broadcast_to", kernels.View[T](out), want)
		})
	}
}
