package cpu

import "unsafe"

// The order of a sum along a contiguous run of elements.
//
// Every sum whose terms lie next to each other in memory (a sum or mean
// over trailing axes, the row sums of softmax and its gradient, the blocks
// of a sum of a whole tensor, fused_reduce over trailing axes) adds them
// in one fixed order, which depends on the run's length alone:
//
//   - the run is cut into blocks of sumAllBlock elements, and the block
//     sums are added from zero in block order (rowSum);
//   - a block of n elements is summed in laneCount lanes: lane j adds the
//     elements j, j+16, j+32, ... of the block's first 16⌊n/16⌋ from zero
//     in order; the lanes are folded in halves (lane j gets lane j+8, then
//     j+4, j+2, j+1), and the last n mod 16 elements are added to lane 0
//     in order (blockSum).
//
// A run of fewer than 16 elements is thus summed from zero in index
// order. The lanes are a vector register's (AVX2: two of 8 float32, four
// of 4 float64), so a block is summed at the speed of memory rather than
// at one dependent add per element; the Go loops give the same bits where
// the assembly does not run. The order is the same for any number of
// workers (a part always sums whole runs), and fused kernels use these
// functions, so fused and unfused graphs agree bit for bit. Sums across
// runs (a column of a matrix, rows into a kept axis) add in index order,
// one vector of columns at a time.

// laneCount is the number of lanes a block is summed in.
const laneCount = 16

// foldLanes folds the lanes in halves and returns their sum: lane j gets
// lane j+8, then j+4, j+2 and j+1, written out (a row of a hundred
// elements spends as long folding its lanes in a loop as adding them).
func foldLanes[T float](acc *[laneCount]T) T {
	a0, a1, a2, a3 := acc[0]+acc[8], acc[1]+acc[9], acc[2]+acc[10], acc[3]+acc[11]
	a4, a5, a6, a7 := acc[4]+acc[12], acc[5]+acc[13], acc[6]+acc[14], acc[7]+acc[15]
	a0, a1, a2, a3 = a0+a4, a1+a5, a2+a6, a3+a7
	a0, a1 = a0+a2, a1+a3
	return a0 + a1
}

// blockSum returns the sum of the block x (at most sumAllBlock elements)
// in lanes.
func blockSum[T float](x []T) T {
	full := len(x) &^ (laneCount - 1)
	var s T
	if full > 0 {
		var acc [laneCount]T
		laneSums(&acc, x[:full])
		s = foldLanes(&acc)
	}
	for _, v := range x[full:] {
		s += v
	}
	return s
}

// blockDot returns the sum of a[i]*b[i], each product rounded to T, over
// the block a (at most sumAllBlock elements) in blockSum's lanes.
func blockDot[T float](a, b []T) T {
	b = b[:len(a)]
	full := len(a) &^ (laneCount - 1)
	var s T
	if full > 0 {
		var acc [laneCount]T
		laneDots(&acc, a[:full], b[:full])
		s = foldLanes(&acc)
	}
	for i, v := range a[full:] {
		s += T(v * b[full+i])
	}
	return s
}

// rowSum returns the sum of the run x in blocks of sumAllBlock: each
// block's blockSum, added from zero in block order. Integers add in index
// order (their sums do not depend on the order).
func rowSum[T number](x []T) T {
	var s T
	switch x := any(x).(type) {
	case []float32:
		return T(floatRowSum(x))
	case []float64:
		return T(floatRowSum(x))
	}
	for _, v := range x {
		s += v
	}
	return s
}

// floatRowSum is rowSum for floats.
func floatRowSum[T float](x []T) T {
	var s T
	for lo := 0; lo < len(x); lo += sumAllBlock {
		s += blockSum(x[lo:min(lo+sumAllBlock, len(x))])
	}
	return s
}

// rowDot returns the sum of a[i]*b[i] (each product rounded to T) in
// rowSum's order.
func rowDot[T float](a, b []T) T {
	b = b[:len(a)]
	var s T
	for lo := 0; lo < len(a); lo += sumAllBlock {
		hi := min(lo+sumAllBlock, len(a))
		s += blockDot(a[lo:hi], b[lo:hi])
	}
	return s
}

// laneSums adds x (a multiple of laneCount elements) into the lanes acc:
// acc[j] += x[j], x[j+16], ... in order.
func laneSums[T float](acc *[laneCount]T, x []T) {
	if rowsumAsm && len(x) > 0 {
		switch x := any(x).(type) {
		case []float32:
			laneSumF32((*[laneCount]float32)(unsafe.Pointer(acc)), unsafe.Pointer(&x[0]), len(x))
			return
		case []float64:
			laneSumF64((*[laneCount]float64)(unsafe.Pointer(acc)), unsafe.Pointer(&x[0]), len(x))
			return
		}
	}
	laneSumsGo(acc, x)
}

// laneSumsGo is laneSums' Go loop.
func laneSumsGo[T float](acc *[laneCount]T, x []T) {
	for i := 0; i+laneCount <= len(x); i += laneCount {
		v := x[i : i+laneCount : i+laneCount]
		for j := range laneCount {
			acc[j] += v[j]
		}
	}
}

// laneDots adds the products a[i]*b[i] (each rounded to T; a and b of
// one length, a multiple of laneCount) into the lanes acc as laneSums
// adds x.
func laneDots[T float](acc *[laneCount]T, a, b []T) {
	if rowsumAsm && len(a) > 0 {
		switch a := any(a).(type) {
		case []float32:
			laneDotF32((*[laneCount]float32)(unsafe.Pointer(acc)), unsafe.Pointer(&a[0]), unsafe.Pointer(&any(b).([]float32)[0]), len(a))
			return
		case []float64:
			laneDotF64((*[laneCount]float64)(unsafe.Pointer(acc)), unsafe.Pointer(&a[0]), unsafe.Pointer(&any(b).([]float64)[0]), len(a))
			return
		}
	}
	laneDotsGo(acc, a, b)
}

// laneDotsGo is laneDots' Go loop.
func laneDotsGo[T float](acc *[laneCount]T, a, b []T) {
	b = b[:len(a)]
	for i := 0; i+laneCount <= len(a); i += laneCount {
		u, v := a[i:i+laneCount:i+laneCount], b[i:i+laneCount:i+laneCount]
		for j := range laneCount {
			acc[j] += T(u[j] * v[j])
		}
	}
}
