package exec_test

import (
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/exec"
	"github.com/kilnml/kiln/ir"
)

func param(t *testing.T, dt ir.DType, shape []int, kv ...any) *ir.Value {
	t.Helper()
	g := ir.New("g")
	id, err := g.Leaf(ir.OpParam, "w", ir.TensorOf(dt, shape...), ir.MakeAttrs(kv...))
	if err != nil {
		t.Fatal(err)
	}
	return g.Value(id)
}

func TestInitialValues(t *testing.T) {
	tests := []struct {
		name  string
		v     *ir.Value
		check func(vals []float64) string
	}{
		{"default matrix is glorot", param(t, ir.F32, []int{100, 50}), bounded(math.Sqrt(6.0 / 150))},
		{"default vector is zeros", param(t, ir.F32, []int{7}), all(0)},
		{"zeros", param(t, ir.F64, []int{3, 3}, "init", ir.String("zeros")), all(0)},
		{"ones", param(t, ir.F64, []int{4}, "init", ir.String("ones")), all(1)},
		{"uniform", param(t, ir.F64, []int{1000}, "init", ir.String("uniform"), "scale", ir.Float(0.3)), bounded(0.3)},
		{"normal", param(t, ir.F64, []int{20000}, "init", ir.String("normal"), "scale", ir.Float(2)), func(v []float64) string {
			var s, s2 float64
			for _, x := range v {
				s += x
				s2 += x * x
			}
			mean, std := s/float64(len(v)), math.Sqrt(s2/float64(len(v)))
			// 20000 draws: the mean's standard error is 2/sqrt(20000) = 0.014.
			if math.Abs(mean) > 0.06 || math.Abs(std-2) > 0.06 {
				return "mean or std off"
			}
			return ""
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := exec.InitialValues(tc.v, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.check(vals); msg != "" {
				t.Error(msg)
			}
			again, _ := exec.InitialValues(tc.v, 1, 0)
			other, _ := exec.InitialValues(tc.v, 1, 1)
			for i := range vals {
				if vals[i] != again[i] {
					t.Fatal("same seed and index gave different values")
				}
			}
			random := vals[0] != vals[1]
			if random && vals[0] == other[0] && vals[1] == other[1] {
				t.Error("another param index gave the same values")
			}
		})
	}
}

func bounded(limit float64) func([]float64) string {
	return func(v []float64) string {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range v {
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
		if lo < -limit || hi > limit || hi-lo < limit {
			return "values outside the bound or not spread over it"
		}
		return ""
	}
}

func all(c float64) func([]float64) string {
	return func(v []float64) string {
		for _, x := range v {
			if x != c {
				return "not constant"
			}
		}
		return ""
	}
}

func TestInitialValuesErrors(t *testing.T) {
	tests := []struct {
		v    *ir.Value
		want string
	}{
		{param(t, ir.F32, []int{2}, "init", ir.String("he")), `unknown init "he"`},
		{param(t, ir.I32, []int{2}, "init", ir.String("normal")), `init "normal" needs a float param`},
	}
	for _, tc := range tests {
		_, err := exec.InitialValues(tc.v, 1, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}
