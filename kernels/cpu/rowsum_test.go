package cpu

import (
	"math"
	"testing"
)

// TestLaneSumsAsm checks the assembly lane sums against their Go loops,
// bit for bit, on random values of mixed magnitudes and on runs holding
// infinities and NaNs.
func TestLaneSumsAsm(t *testing.T) {
	if !rowsumAsm {
		t.Skip("no lane sum assembly on this CPU or build: the Go loops are the only path")
	}
	laneSumsCase[float32](t)
	laneSumsCase[float64](t)
}

func laneSumsCase[T float](t *testing.T) {
	r := newRand(7)
	for _, n := range []int{16, 32, 48, 1024, 4096} {
		for _, special := range []float64{0, math.Inf(1), math.NaN()} {
			a, b := make([]T, n), make([]T, n)
			for i := range a {
				a[i] = T(r.NormFloat64() * math.Exp(8*r.Float64()-4))
				b[i] = T(r.NormFloat64())
			}
			if special != 0 {
				a[n/3] = T(special)
			}
			var got, want [laneCount]T
			laneSums(&got, a)
			laneSumsGo(&want, a)
			if !sameBits(got[:], want[:]) {
				t.Errorf("%T n=%d special %v: laneSums %v, Go loop %v", a[0], n, special, got, want)
			}
			got, want = [laneCount]T{}, [laneCount]T{}
			laneDots(&got, a, b)
			laneDotsGo(&want, a, b)
			if !sameBits(got[:], want[:]) {
				t.Errorf("%T n=%d special %v: laneDots %v, Go loop %v", a[0], n, special, got, want)
			}
		}
	}
}

// sameBits reports whether a and b hold the same bits (NaNs compare by
// their NaN-ness: their payloads may differ).
func sameBits[T float](a, b []T) bool {
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		if math.IsNaN(x) != math.IsNaN(y) || !math.IsNaN(x) && math.Float64bits(x) != math.Float64bits(y) {
			return false
		}
	}
	return true
}

// TestRowSumOrder checks rowSum, rowDot and blockSum against the order
// rowsum.go defines, written out with float64 arithmetic rounded to T at
// every add: lanes of 16, folded in halves, the tail in order, blocks of
// sumAllBlock added in order. Runs shorter than 16 are the sequential sum.
func TestRowSumOrder(t *testing.T) {
	rowSumOrderCase[float32](t)
	rowSumOrderCase[float64](t)
}

// refRowSum is the order of a sum along a run, written out as rowsum.go
// defines it: blocks of 4096 added from zero in order, each block in 16
// lanes (lane j adds elements j, j+16, ... of its first 16⌊n/16⌋), the
// lanes folded in halves, then the block's last n mod 16 elements in
// order. Integers add in index order.
func refRowSum[T number](x []T) T {
	var s T
	if _, ok := any(s).(float32); !ok {
		if _, ok := any(s).(float64); !ok {
			for _, v := range x {
				s += v
			}
			return s
		}
	}
	for lo := 0; lo < len(x); lo += 4096 {
		blk := x[lo:min(lo+4096, len(x))]
		full := len(blk) / 16 * 16
		var lanes [16]T
		for i := range full {
			lanes[i%16] += blk[i]
		}
		for _, w := range []int{8, 4, 2, 1} {
			for j := range w {
				lanes[j] += lanes[j+w]
			}
		}
		bs := lanes[0]
		for _, v := range blk[full:] {
			bs += v
		}
		s += bs
	}
	return s
}

func rowSumOrderCase[T float](t *testing.T) {
	r := newRand(3)
	ref := refRowSum[T]
	for _, n := range []int{0, 1, 5, 15, 16, 17, 31, 100, 1024, 4095, 4096, 4097, 10000} {
		a, b := make([]T, n), make([]T, n)
		p := make([]T, n)
		for i := range a {
			a[i] = T(r.NormFloat64() * math.Exp(6*r.Float64()-3))
			b[i] = T(r.NormFloat64())
			p[i] = a[i] * b[i]
		}
		if got, want := rowSum(a), ref(a); !sameBits([]T{got}, []T{want}) {
			t.Errorf("%T n=%d: rowSum %v, want %v", a[0], n, got, want)
		}
		if got, want := rowDot(a, b), ref(p); !sameBits([]T{got}, []T{want}) {
			t.Errorf("%T n=%d: rowDot %v, want %v", a[0], n, got, want)
		}
		if n < 16 {
			var seq T
			for _, v := range a {
				seq += v
			}
			if got := rowSum(a); got != seq {
				t.Errorf("%T n=%d: rowSum %v, the sequential sum %v", a[0], n, got, seq)
			}
		}
	}
}

// TestSqrtRow checks sqrt's row code against float32(math.Sqrt(float64(x)))
// and math.Sqrt, bit for bit (NaNs by NaN-ness), on inputs from random bits
// (every sign, exponent and NaN) and on ±0, ±Inf, subnormals and the
// largest finite values, in rows of every length up to 40 so that the
// vector loop and the Go tail both run.
func TestSqrtRow(t *testing.T) {
	r := newRand(11)
	in32 := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), math.SmallestNonzeroFloat32, math.MaxFloat32, -1, 2, float32(math.NaN())}
	in64 := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.SmallestNonzeroFloat64, math.MaxFloat64, -1, 2, math.NaN()}
	for range 100000 {
		u := r.Uint64()
		in32 = append(in32, math.Float32frombits(uint32(u)))
		in64 = append(in64, math.Float64frombits(u))
	}
	sqrtRowCase(t, in32, func(x float32) float32 { return float32(math.Sqrt(float64(x))) })
	sqrtRowCase(t, in64, math.Sqrt)
}

func sqrtRowCase[T float](t *testing.T, in []T, ref func(T) T) {
	got := make([]T, len(in))
	for lo, n := 0, 1; lo < len(in); lo, n = lo+n, n%40+1 {
		hi := min(lo+n, len(in))
		sqrtRow(got[lo:hi], in[lo:hi])
	}
	for i, x := range in {
		if want := ref(x); !sameBits([]T{got[i]}, []T{want}) {
			t.Fatalf("%T sqrt(%v) = %v, want %v", x, x, got[i], want)
		}
	}
}
