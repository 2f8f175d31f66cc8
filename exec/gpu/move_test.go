package gpu_test

import (
	"math/rand/v2"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// TestIndexedSumsBitwise checks that scatter_add and index_add, which sum
// in gather form, give the CPU's bits (the same additions in the same
// order) and the same bits on two GPU runs.
func TestIndexedSumsBitwise(t *testing.T) {
	needGPU(t)
	p := plan(t, "graph k\ninput %a: f32[9,17]\ninput %i: i64[500]\ninput %s: f32[500,17]\ninput %j: i32[31,17]\ninput %r: f32[31,17]\n%y = index_add %a, %i, %s {axis=0}\n%z = scatter_add %a, %j, %r {axis=0}\noutput %y, %z")
	want, got := runBoth(t, p, 4, 9)
	_, again := runBoth(t, p, 4, 9)
	for name := range want {
		for i := range want[name] {
			if got[name][i] != want[name][i] || again[name][i] != got[name][i] {
				t.Fatalf("%s[%d]: GPU %v then %v, CPU %v; want equal bits", name, i, got[name][i], again[name][i], want[name][i])
			}
		}
	}
}

// TestIndexOutOfRange checks that an index outside the axis is reported
// by the GPU with the CPU's message, for each indexed op.
func TestIndexOutOfRange(t *testing.T) {
	needGPU(t)
	for _, tc := range []struct{ name, src, want string }{
		{"gather", "%y = gather %a, %i {axis=0}", "index[2,0] = 7 is out of range for axis 0 of size 4"},
		{"index_select", "%y = index_select %a, %k {axis=1}", "index[2] = 7 is out of range for axis 1 of size 3"},
		{"embedding", "%y = embedding %a, %i", "indices[2,0] = 7 is out of range for axis 0 of size 4"},
		{"scatter_add", "%y = scatter_add %a, %i, %a {axis=0}", "index[2,0] = 7 is out of range for axis 0 of size 4"},
		{"index_add", "%s = index_select %a, %k {axis=0}\n%y = index_add %a, %k, %s {axis=0}", "index[2] = 7 is out of range for axis 0 of size 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(t, "graph e\ninput %a: f32[4,3]\ninput %i: i64[4,3]\ninput %k: i32[4]\n"+tc.src+"\noutput %y")
			c, g := executors(t, p)
			a := randomTensor(rand.New(rand.NewPCG(1, 1)), ir.Type{DType: ir.F32, Shape: ir.Shape{4, 3}}, 0)
			i := kernels.New(ir.Type{DType: ir.I64, Shape: ir.Shape{4, 3}})
			k := kernels.New(ir.Type{DType: ir.I32, Shape: ir.Shape{4}})
			if err := kernels.SetFloat64s(i, []float64{0, 1, 2, 3, 0, 1, 7, 2, 1, 0, 9, 1}); err != nil {
				t.Fatal(err)
			}
			if err := kernels.SetFloat64s(k, []float64{0, 2, 7, 1}); err != nil {
				t.Fatal(err)
			}
			sameStepError(t, c, g, map[string]kernels.Tensor{"a": a, "i": i, "k": k}, tc.want)
		})
	}
}
