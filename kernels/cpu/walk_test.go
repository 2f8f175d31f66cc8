package cpu

import (
	"fmt"
	"slices"
	"testing"
)

// TestGatherRow checks gatherRow against a plain loop for strides 0 (a
// value broadcast: fillRow, doubling past 16 elements), 1 and 3, at
// lengths around the doubling's steps, for float32 and bool.
func TestGatherRow(t *testing.T) {
	src := make([]float32, 4000)
	for i := range src {
		src[i] = float32(i) + 0.5
	}
	bools := make([]bool, 4000)
	for i := range bools {
		bools[i] = i%3 == 1
	}
	for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 100, 256, 1000} {
		for _, s := range []int{0, 1, 3} {
			for _, a := range []int{0, 7} {
				t.Run(fmt.Sprintf("n=%d/s=%d/a=%d", n, s, a), func(t *testing.T) {
					want, got := make([]float32, n), make([]float32, n)
					wantB, gotB := make([]bool, n), make([]bool, n)
					for i := range want {
						want[i], wantB[i] = src[a+i*s], bools[a+i*s]
						got[i] = -1 // overwritten
					}
					gatherRow(got, src, a, s)
					gatherRow(gotB, bools, a, s)
					if !slices.Equal(got, want) {
						t.Errorf("float32: got %v, want %v", got, want)
					}
					if !slices.Equal(gotB, wantB) {
						t.Errorf("bool: got %v, want %v", gotB, wantB)
					}
				})
			}
		}
	}
}
