package cpu

import (
	"testing"

	"github.com/kilnml/kiln/kernels"
)

// TestOverlapsAny checks overlapsAny on slices of one array that share
// bytes, touch end to end, and are empty.
func TestOverlapsAny(t *testing.T) {
	mem := make([]byte, 64)
	tensor := func(lo, hi int) kernels.Tensor { return kernels.Tensor{Data: mem[lo:hi:hi]} }
	for _, c := range []struct {
		name   string
		b      []byte
		ts     []kernels.Tensor
		expect bool
	}{
		{"the same bytes", mem[8:16], []kernels.Tensor{tensor(8, 16)}, true},
		{"one byte shared", mem[8:16], []kernels.Tensor{tensor(0, 4), tensor(15, 20)}, true},
		{"inside", mem[0:64], []kernels.Tensor{tensor(30, 31)}, true},
		{"end to end", mem[8:16], []kernels.Tensor{tensor(0, 8), tensor(16, 24)}, false},
		{"another array", mem[8:16], []kernels.Tensor{{Data: make([]byte, 8)}}, false},
		{"empty result", mem[8:8], []kernels.Tensor{tensor(0, 64)}, false},
		{"empty argument", mem[8:16], []kernels.Tensor{tensor(10, 10)}, false},
		{"no arguments", mem[8:16], nil, false},
	} {
		if got := overlapsAny(c.b, c.ts); got != c.expect {
			t.Errorf("%s: overlapsAny = %v, want %v", c.name, got, c.expect)
		}
	}
}
