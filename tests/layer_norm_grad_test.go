package tests

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
)

// layerNormGradComposite is the composite layer_norm_grad computes (ir's
// nnNormGrad), written out op by op in .kir; DT is the dtype, AX the
// normalized axes, EPS the epsilon and G the gradient scaled by the weight
// (%dy or %g).
const layerNormGradComposite = `
%mu = mean %x {axes=AX, keepdims=true}
%xc = sub %x, %mu
%sq = mul %xc, %xc
%var = mean %sq {axes=AX, keepdims=true}
%eps = const {dtype="DT", value=EPS}
%ve = add %var, %eps
%sd = sqrt %ve
%one = const {dtype="DT", value=1}
%rstd = div %one, %sd
%xhat = mul %xc, %rstd
%mg = mean G {axes=AX, keepdims=true}
%gx = mul G, %xhat
%mgx = mean %gx {axes=AX, keepdims=true}
%a = sub G, %mg
%b = mul %xhat, %mgx
%c = sub %a, %b
%dx = mul %rstd, %c
output %dx`

// TestLayerNormGradMatchesComposite runs layer_norm_grad and the composite
// its kernel computes on the same inputs, each compiled with the default
// passes and at -O0, on 1 and 3 workers, and requires the same bits: the
// kernel does the composite's arithmetic op by op in its sums' orders.
// Rows of 1, 5, 40 and 300 elements cover the sums' lane tails, and two
// normalized axes a row spread over them.
func TestLayerNormGradMatchesComposite(t *testing.T) {
	for _, tc := range []struct {
		name, shape, norm, axes string
		weight                  bool
		eps                     float64
	}{
		{"one element", "[3,1]", "[1]", "[-1]", true, 1e-5},
		{"row of 5", "[4,5]", "[5]", "[-1]", false, 1e-5},
		{"row of 40 weight", "[2,3,40]", "[40]", "[2]", true, 1e-5},
		{"two axes weight", "[3,4,5]", "[4,5]", "[-2,-1]", true, 0.1},
		{"rows of 300 weight", "[70,300]", "[300]", "[-1]", true, 1e-5},
	} {
		for _, dt := range []string{"f32", "f64"} {
			t.Run(tc.name+"/"+dt, func(t *testing.T) {
				head := fmt.Sprintf("input %%x: %[1]s%[2]s\ninput %%dy: %[1]s%[2]s\n", dt, tc.shape)
				g := "%dy"
				attrs := fmt.Sprintf("{axes=%s, eps=%g}", tc.axes, tc.eps)
				fused := head + "%dx = layer_norm_grad %dy, %x " + attrs + "\noutput %dx\n"
				if tc.weight {
					head += fmt.Sprintf("input %%w: %s%s\n%%g = mul %%dy, %%w\n", dt, tc.norm)
					fused = head + "%dx = layer_norm_grad %dy, %x, %w " + attrs + "\noutput %dx\n"
					g = "%g"
				}
				composite := head + strings.NewReplacer("DT", dt, "AX", tc.axes, "EPS", fmt.Sprint(tc.eps), "G", g).Replace(strings.TrimSpace(layerNormGradComposite))
				matchComposite(t, composite, fused)
			})
		}
	}
}

// matchComposite runs the graphs composite and fused, each compiled with
// the default passes and at -O0, on 1 and 3 workers, and requires the
// same bits of their first outputs on the same random inputs.
func matchComposite(t *testing.T, composite, fused string) {
	t.Helper()
	var want []float64
	for _, src := range []string{composite, fused} {
		for _, o0 := range []bool{false, true} {
			for _, workers := range []int{1, 3} {
				got := runForward(t, "graph lng\n"+src+"\n", kiln.Options{O0: o0}, workers)
				if want == nil {
					want = got
					continue
				}
				for i := range want {
					if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
						t.Fatalf("fused op (%t) -O0 %t, %d workers: dx[%d] = %v, the composite's %v", src == fused, o0, workers, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// runForward compiles the forward graph src with opts, runs it once on
// workers workers with random inputs (seed 5) and returns its first
// output.
func runForward(t *testing.T, src string, opts kiln.Options, workers int) []float64 {
	t.Helper()
	g, err := ir.Parse("lng.kir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	r := newRunnerWorkers(t, g, opts, workers)
	r.run(randomFeeds(g, 5, nil, nil))
	return r.get(g.Value(g.Outputs[0]).Name)
}
