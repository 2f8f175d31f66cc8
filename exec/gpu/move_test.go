package gpu_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// runCases runs each kernel case on the CPU and the GPU and compares every
// output (rtol 1e-4, the case's atol or atolEw).
func runCases(t *testing.T, cases []kernelCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			p := plan(t, "graph k\n"+tc.src)
			want, got := runBoth(t, p, 1, tc.labels)
			atol := tc.atol
			if atol == 0 {
				atol = atolEw
			}
			for name := range want {
				compare(t, name, got[name], want[name], rtol, atol)
			}
		})
	}
}

// TestMoveKernelsMatchCPU checks the movement family on odd shapes, for
// f32 and for the integer and bool element types moved as raw words and
// bytes. Moves and the indexed sums are exact (the sums add in the CPU's
// order), so the bound is the default one.
func TestMoveKernelsMatchCPU(t *testing.T) {
	needGPU(t)
	runCases(t, []kernelCase{
		{name: "squeeze unsqueeze", src: "input %a: f32[3,1,7]\ninput %b: bool[5,1]\n%y = squeeze %a\n%z = unsqueeze %a {axes=[0,3]}\n%w = squeeze %b {axes=[1]}\noutput %y, %z, %w"},
		{name: "flip", src: "input %a: f32[3,5,7]\ninput %b: i64[9,3]\ninput %c: bool[3,7]\n%y = flip %a {axes=[0,2]}\n%z = flip %b {axes=[0]}\n%w = flip %c {axes=[1]}\noutput %y, %z, %w", labels: 100},
		{name: "slice", src: "input %a: f32[4,37]\ninput %b: bool[3,11]\ninput %c: i32[17]\n%y = slice %a {axis=1, start=3, end=-2, step=4}\n%z = slice %b {axis=1, start=1, step=3}\n%w = slice %c {start=-5}\noutput %y, %z, %w", labels: 50},
		{name: "pad", src: "input %a: f32[3,5,7]\ninput %b: bool[5,3]\ninput %c: i64[6]\n%y = pad %a {pads=[2,-1,1,3], value=1.5}\n%z = pad %b {pads=[1,2,0,1], value=1.0}\n%w = pad %c {pads=[3,-2], value=-7.0}\noutput %y, %z, %w", labels: 9},
		{name: "concat", src: "input %a: f32[3,5]\ninput %b: f32[3,2]\ninput %c: f32[3,9]\n%y = concat %a, %b, %c, %a, %b, %c, %a, %b, %c {axis=1}\n%z = concat %a, %a {axis=0}\noutput %y, %z"},
		{name: "concat bool i64", src: "input %a: bool[3,5]\ninput %b: bool[3,2]\ninput %c: i64[2,3]\n%y = concat %a, %b, %a, %b, %a, %b, %a, %b, %a {axis=1}\n%z = concat %c, %c, %c {axis=0}\noutput %y, %z", labels: 1000},
		{name: "stack", src: "input %a: f32[3,5]\ninput %b: f32[3,5]\ninput %c: bool[7]\n%y = stack %a, %b, %a {axis=1}\n%z = stack %a, %b\n%w = stack %c, %c, %c {axis=1}\noutput %y, %z, %w"},
		{name: "gather", src: "input %a: f32[5,7,3]\ninput %i: i64[4,6,3]\ninput %j: i32[5,7,2]\n%y = gather %a, %i {axis=0}\n%z = gather %a, %j {axis=2}\noutput %y, %z", labels: 3},
		{name: "index_select embedding", src: "input %a: f32[5,9,3]\ninput %i: i64[13]\ninput %t: f32[9,33]\ninput %e: i32[4,7]\n%y = index_select %a, %i {axis=1}\n%z = embedding %t, %e\noutput %y, %z", labels: 9},
		{name: "index_select bool", src: "input %a: bool[9,7]\ninput %i: i32[11]\n%y = index_select %a, %i {axis=0}\noutput %y", labels: 9},
		{name: "scatter_add", src: "input %a: f32[5,7,3]\ninput %i: i64[4,6,3]\ninput %s: f32[4,6,5]\ninput %j: i32[4,3,2]\n%y = scatter_add %a, %i, %s {axis=0}\n%z = scatter_add %a, %j, %s {axis=1}\noutput %y, %z", labels: 3},
		{name: "index_add", src: "input %a: f32[5,9,3]\ninput %i: i64[300]\ninput %s: f32[5,300,3]\ninput %t: f32[9,33]\ninput %j: i32[7]\ninput %u: f32[7,33]\n%y = index_add %a, %i, %s {axis=1}\n%z = index_add %t, %j, %u {axis=0}\noutput %y, %z", labels: 9},
		{name: "index_add i32", src: "input %a: i32[9,3]\ninput %i: i32[40]\ninput %s: i32[40,3]\ninput %j: i64[40,3]\n%y = index_add %a, %i, %s {axis=0}\n%z = scatter_add %a, %j, %s {axis=0}\noutput %y, %z", labels: 9},
	})
}

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
			var msgs []string
			for _, x := range []interface {
				setter
				Step(context.Context) error
			}{c, g} {
				for name, v := range map[string]kernels.Tensor{"a": a, "i": i, "k": k} {
					if err := x.Set(name, v); err != nil {
						t.Fatal(err)
					}
				}
				err := x.Step(context.Background())
				if err == nil {
					t.Fatal("an index out of range gave no error")
				}
				msgs = append(msgs, err.Error())
			}
			if msgs[0] != msgs[1] {
				t.Errorf("GPU error %q, CPU error %q", msgs[1], msgs[0])
			}
			if !strings.Contains(msgs[1], tc.want) {
				t.Errorf("GPU error %q does not contain %q", msgs[1], tc.want)
			}
		})
	}
}
