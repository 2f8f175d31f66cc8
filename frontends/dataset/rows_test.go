package dataset

import (
	"runtime/debug"
	"testing"
)

// TestGeneratedRowsTooMany checks that KAN2D and Reverse refuse more rows
// than can be allocated, before allocating them, with the count and size:
// past what any process can address, and (under a Go memory limit, which
// the memory available honours) past the memory available. It changes the
// process's memory limit, so it does not run in parallel.
func TestGeneratedRowsTooMany(t *testing.T) {
	tests := []struct {
		name string
		make func() (*Dataset, error)
		want string
	}{
		{"kan2d wraps", func() (*Dataset, error) { return KAN2D(1<<62, 1) },
			"kan2d: 4611686018427387904 rows of 24 bytes each exceed the 128.0 TiB any process can address"},
		{"reverse wraps", func() (*Dataset, error) { return Reverse(1<<40, 1<<30, 10, 1) },
			"reverse: 1099511627776 rows of 17179869184 bytes each exceed the 128.0 TiB any process can address"},
		{"reverse length", func() (*Dataset, error) { return Reverse(1, 1<<62, 10, 1) },
			"reverse: a sequence length of 4611686018427387904 cannot be addressed"},
		{"kan2d memory", func() (*Dataset, error) { return KAN2D(100_000_000, 1) },
			"kan2d: 100000000 rows of 2.2 GiB exceeds the 256.0 MiB of memory available"},
		{"reverse memory", func() (*Dataset, error) { return Reverse(10_000_000, 100, 10, 1) },
			"reverse: 10000000 rows of 14.9 GiB exceeds the 256.0 MiB of memory available"},
	}
	old := debug.SetMemoryLimit(256 << 20)
	defer debug.SetMemoryLimit(old)
	for _, tc := range tests {
		d, err := tc.make()
		if err == nil || err.Error() != tc.want {
			n := 0
			if d != nil {
				n = d.N
			}
			t.Errorf("%s: %d rows, error %v; want %s", tc.name, n, err, tc.want)
		}
	}
}
