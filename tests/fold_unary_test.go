package tests

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
)

// TestFoldUnaryMatchesKernel checks that constant folding of the unary ops
// of vmath's table gives the kernel's bits: each graph applies the op to a
// const, which the compiler folds, and to an input holding the same
// values, which the kernel computes, in f32 and f64. The values cross the
// points where the f32 code changes branch (0.625 for tanh, 2 for expm1,
// -64 for silu's scaling, overflow and underflow of exp). The bound is
// zero: the results must be the same bits (NaN, not folded, is left out).
func TestFoldUnaryMatchesKernel(t *testing.T) {
	vals := []float64{-100, -80, -64.5, -20, -8.9, -3, -2, -1.5, -0.7, -0.625, -0.3, -1e-3, -1e-30,
		0, 1e-30, 1e-3, 0.3, 0.624, 0.625, 1, 1.999, 2, 5, 9, 20, 25, 88.7, 100}
	ops := []struct {
		op    string
		attrs string
		pos   bool // only positive arguments (log family, rsqrt)
	}{
		{"exp", "", false}, {"log", "", true}, {"tanh", "", false}, {"sigmoid", "", false},
		{"silu", "", false}, {"softplus", "", false}, {"softplus", "{beta=2.5, threshold=10}", false},
		{"gelu", "", false}, {"gelu", `{approximate="tanh"}`, false}, {"log1p", "", false},
		{"expm1", "", false}, {"erf", "", false}, {"sin", "", false}, {"cos", "", false},
		{"rsqrt", "", true}, {"log2", "", true}, {"log10", "", true}, {"elu", "{alpha=0.5}", false},
		{"reciprocal", "", false}, {"floor", "", false}, {"ceil", "", false}, {"round", "", false},
	}
	for _, dt := range []string{"f32", "f64"} {
		for _, o := range ops {
			t.Run(fmt.Sprintf("%s%s/%s", o.op, o.attrs, dt), func(t *testing.T) {
				var in []float64
				for _, v := range vals {
					if !o.pos || v > 0 {
						in = append(in, v)
					}
				}
				list := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(in)), ", "), "[]")
				src := fmt.Sprintf(`graph fold_unary
input %%x: %s[%d]
%%c = const {dtype=%q, shape=[%d], value=[%s]}
%%folded = %s %%c %s
%%kernel = %s %%x %s
output %%folded
output %%kernel
`, dt, len(in), dt, len(in), list, o.op, o.attrs, o.op, o.attrs)
				g, err := ir.Parse("fold_unary.kir", []byte(src))
				if err != nil {
					t.Fatal(err)
				}
				r := newRunner(t, g, kiln.Options{})
				r.run(feeds{"x": in})
				folded, kernel := r.get("folded"), r.get("kernel")
				for i := range in {
					if math.Float64bits(folded[i]) != math.Float64bits(kernel[i]) {
						t.Errorf("%s(%g): folded %v, kernel %v", o.op, in[i], folded[i], kernel[i])
					}
				}
			})
		}
	}
}
