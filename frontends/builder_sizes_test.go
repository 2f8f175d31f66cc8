package frontends

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
)

// TestBuilderRefusesHugeShapes checks that a declared or inferred shape over
// ir.MaxTensorBytes is recorded as the builder's error, naming the call,
// rather than built (or panicking later).
func TestBuilderRefusesHugeShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"param wraps", func(b *Builder) {
			b.Param("w", ir.F32, 4611686018427387904, 4)
		}, "builder_sizes_test.go:21: param %w: shape [4611686018427387904,4] has a dimension of 4611686018427387904; the limit is 2^40"},
		{"input too many bytes", func(b *Builder) {
			b.Input("x", ir.F64, 1<<38)
		}, "builder_sizes_test.go:24: input %x: f64[274877906944] is too large: 2199023255552 bytes; the limit is 1 TiB"},
		{"matmul result", func(b *Builder) {
			x := b.Input("x", ir.F32, 1<<20, 1)
			w := b.Param("w", ir.F32, 1, 1<<20)
			b.Matmul(x, w)
		}, "builder_sizes_test.go:29: matmul: result f32[1048576,1048576] is too large: 4398046511104 bytes"},
		{"long name", func(b *Builder) {
			b.Input(strings.Repeat("x", 300), ir.F32, 2)
		}, `builder_sizes_test.go:32: input %xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...: value name "xxx`},
	}
	for _, tc := range tests {
		b := NewBuilder("g")
		tc.build(b)
		if err := b.Err(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
