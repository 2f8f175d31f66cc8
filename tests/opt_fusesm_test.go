package tests

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// Softmax fusion against -O0: each graph is compiled at -O0 and at -O0
// followed by the fuse pass, both are run on the same inputs (random, then
// with NaN and ±Inf in x), and every output and gradient must agree
// bitwise: fused_softmax computes its program and then each row as softmax
// does, fused_softmax_grad each row as softmax_grad does and then its
// program, with the same per-element code.

// fusesmPatterns are the graphs ("DT" is f32 or f64) and the fused
// softmax ops each must end with.
var fusesmPatterns = []struct {
	name    string
	src     string
	softmax int // fused_softmax ops
	grad    int // fused_softmax_grad ops
}{
	{"softmax step", `graph step
input %x: DT[37,50]
input %t: DT[37,50]
param %w: DT[37,50] {init="normal", scale=1.0}
%z = mul %x, %w
%y = softmax %z
%p = mul %y, %t
%loss = sum %p
output %loss`, 1, 1},
	{"log_softmax chain", `graph chain
input %x: DT[3,5,40]
input %t: DT[3,5,40]
param %w: DT[3,5,40] {init="normal", scale=1.0}
input %b: DT[40]
%a = mul %x, %w
%c = add %a, %b
%y = log_softmax %c
%p = mul %y, %t
%loss = mean %p
output %loss, %y`, 1, 1},
	{"one row", `graph row
input %x: DT[1,5000]
input %t: DT[1,5000]
param %w: DT[1,5000] {init="normal", scale=1.0}
%z = mul %x, %w
%y = softmax %z
%p = mul %y, %t
%loss = sum %p
output %loss`, 1, 1},
	{"other axis", `graph axis0
input %x: DT[6,7]
input %t: DT[6,7]
param %w: DT[6,7] {init="normal", scale=1.0}
%z = mul %x, %w
%y = softmax %z {axis=0}
%p = mul %y, %t
%loss = sum %p
output %loss`, 0, 0},
	{"shared input", `graph shared
input %x: DT[8,9]
input %t: DT[8,9]
param %w: DT[8,9] {init="normal", scale=1.0}
%z = mul %x, %w
%y = softmax %z
%p = mul %y, %t
%q = mul %p, %z
%loss = sum %q
output %loss`, 0, 1},
}

// TestFuseSoftmaxMatchesO0 checks each graph, forward and backward, in f32
// and f64: the fused softmax ops it must have, and every output and
// gradient bitwise the -O0 plan's, on random inputs and on inputs with
// NaN, +Inf and -Inf in x.
//
// Each graph is also compiled as an SGD training step, whose updated
// params must agree bitwise too: the softmax step's update becomes the
// epilogue of its fused_softmax_grad, computed in the param's memory.
func TestFuseSoftmaxMatchesO0(t *testing.T) {
	sgd, err := passes.DefaultOptimizer("sgd")
	if err != nil {
		t.Fatal(err)
	}
	for _, pat := range fusesmPatterns {
		for _, mode := range []string{"f32", "f64", "f32 sgd", "f64 sgd"} {
			dt, train := strings.CutSuffix(mode, " sgd")
			t.Run(pat.name+"/"+mode, func(t *testing.T) {
				g, err := ir.Parse(pat.name, []byte(strings.ReplaceAll(pat.src, "DT", dt)))
				if err != nil {
					t.Fatal(err)
				}
				opts := kiln.Options{Grad: true}
				if train {
					opts.Optimizer = &sgd
				}
				o0, fused, _ := fuseewPlans(t, g, opts)
				if train && pat.name == "softmax step" {
					for _, st := range fused.Steps {
						if st.Kind == planner.Copy {
							t.Errorf("the update of %%w is copied, want it computed in place by fused_softmax_grad:\n%s", fused.Format())
						}
					}
				}
				count := map[ir.Op]int{}
				for _, v := range fused.Graph.Values {
					count[v.Op]++
				}
				if count[ir.OpFusedSoftmax] != pat.softmax || count[ir.OpFusedSoftmaxGrad] != pat.grad {
					t.Fatalf("%d fused_softmax and %d fused_softmax_grad, want %d and %d:\n%s",
						count[ir.OpFusedSoftmax], count[ir.OpFusedSoftmaxGrad], pat.softmax, pat.grad, fused.Graph.Format())
				}
				for seed := uint64(1); seed <= 3; seed++ {
					f := randomFeeds(g, seed, nil, nil)
					if seed == 3 {
						x := f["x"]
						x[1], x[len(x)/2], x[len(x)-1] = math.NaN(), math.Inf(1), math.Inf(-1)
					}
					fuseewSameStep(t, fmt.Sprint("seed ", seed), o0, fused, f)
				}
			})
		}
	}
}
