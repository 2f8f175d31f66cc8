package kiln_test

import (
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
)

func parse(t *testing.T, src string) *ir.Graph {
	t.Helper()
	g, err := ir.Parse("t.kir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGradCheckSmooth(t *testing.T) {
	g := parse(t, `graph g
input %x: f32[4,3]
input %y: i64[4]
param %w: f32[3,5]
%z = matmul %x, %w
%t = tanh %z
%loss = softmax_cross_entropy %t, %y
output %loss
`)
	f := kiln.RandomFeeds(g, 3)
	for _, l := range f["y"] {
		if l < 0 || l >= 5 || l != float64(int(l)) {
			t.Fatalf("label %v outside [0,5): RandomFeeds did not see the classes", l)
		}
	}
	for _, native := range []bool{false, true} {
		res, err := kiln.GradCheck(g, f, kiln.GradCheckOptions{Native: native})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || !res[0].OK() || res[0].Skipped != 0 {
			t.Errorf("native=%v: %+v", native, res)
		}
	}
}

// TestGradCheckSkipsKinks puts a relu input 1e-4 from its kink, inside the
// stencil: that element is skipped, the others are compared.
func TestGradCheckSkipsKinks(t *testing.T) {
	g2 := parse(t, `graph g
param %w: f64[3]
%r = relu %w
%loss = sum %r
output %loss
`)
	res, err := kiln.GradCheck(g2, map[string][]float64{"w": {0.5, 1e-4, -0.7}}, kiln.GradCheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Skipped != 1 || !res[0].OK() {
		t.Errorf("relu kink at 1e-4: %+v, want one element skipped and the rest ok", res[0])
	}
}

// TestGradCheckAllSkipped takes a step so large that every element of the
// param lies within 2h of relu's kink: nothing is compared, and the result
// says so (AllSkipped) instead of naming a worst element.
func TestGradCheckAllSkipped(t *testing.T) {
	g := parse(t, `graph g
param %w: f64[3]
%r = relu %w
%loss = sum %r
output %loss
`)
	res, err := kiln.GradCheck(g, map[string][]float64{"w": {0.5, 0.2, -0.7}}, kiln.GradCheckOptions{Step: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if !r.AllSkipped() || r.Skipped != 3 || r.Index != -1 || r.OK() {
		t.Errorf("step 1 around relu's kink: %+v (AllSkipped %v), want all 3 elements skipped and not OK", r, r.AllSkipped())
	}
	res, err = kiln.GradCheck(g, map[string][]float64{"w": {0.5, 0.2, -0.7}}, kiln.GradCheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].AllSkipped() || !res[0].OK() {
		t.Errorf("default step: %+v, want checked and OK", res[0])
	}
}
