package tests

import (
	"math"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// TestOptimizerSteps runs several training steps of loss = sum(w*w*r) and
// compares w with the same updates computed here in float64, following the
// torch.optim.SGD and torch.optim.Adam formulas (bias-corrected Adam, L2
// weight decay added to the gradient, momentum buffer starting at the first
// gradient), with each gradient element first clamped to ±ClipGrad where it
// is set (torch.nn.utils.clip_grad_value_). The clipped cases' bounds cut
// some elements of the gradient 2·w·r (|w|, |r| in [0.1, 1]) and not others.
func TestOptimizerSteps(t *testing.T) {
	tests := []struct {
		name string
		cfg  passes.OptimizerConfig
	}{
		{"sgd", passes.OptimizerConfig{Kind: "sgd", LR: 0.1}},
		{"sgd momentum decay", passes.OptimizerConfig{Kind: "sgd", LR: 0.05, Momentum: 0.9, WeightDecay: 0.01}},
		{"adam", passes.OptimizerConfig{Kind: "adam", LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}},
		{"adam decay", passes.OptimizerConfig{Kind: "adam", LR: 0.02, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.1}},
		{"sgd clip", passes.OptimizerConfig{Kind: "sgd", LR: 0.1, ClipGrad: 0.3}},
		{"adam clip decay", passes.OptimizerConfig{Kind: "adam", LR: 0.02, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, ClipGrad: 0.25}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := frontends.NewBuilder("opt")
			w := b.Param("w", ir.F64, 5)
			r := b.Input("r", ir.F64, 5)
			b.Output(b.Sum(b.Mul(b.Mul(w, w), r), nil, false))
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			cfg := tc.cfg
			x := newRunner(t, g, kiln.Options{Optimizer: &cfg})
			f := randomFeeds(g, 5, nil, nil)
			x.set(f)
			want := append([]float64(nil), f["w"]...)
			rr := f["r"]
			buf := make([]float64, 5)
			m := make([]float64, 5)
			v := make([]float64, 5)
			clipped := 0
			for step := 1; step <= 4; step++ {
				// One step in the executor (inputs only; w stays on the plan).
				x.run(feeds{"r": rr})
				for i := range want {
					grad := 2 * want[i] * rr[i]
					if c := cfg.ClipGrad; c > 0 && math.Abs(grad) > c {
						grad = math.Copysign(c, grad)
						clipped++
					}
					grad += cfg.WeightDecay * want[i]
					switch cfg.Kind {
					case "sgd":
						if cfg.Momentum != 0 {
							buf[i] = cfg.Momentum*buf[i] + grad
							grad = buf[i]
						}
						want[i] -= cfg.LR * grad
					case "adam":
						m[i] = cfg.Beta1*m[i] + (1-cfg.Beta1)*grad
						v[i] = cfg.Beta2*v[i] + (1-cfg.Beta2)*grad*grad
						mh := m[i] / (1 - math.Pow(cfg.Beta1, float64(step)))
						vh := v[i] / (1 - math.Pow(cfg.Beta2, float64(step)))
						want[i] -= cfg.LR * mh / (math.Sqrt(vh) + cfg.Eps)
					}
				}
				got := x.get("w")
				for i := range want {
					if d := math.Abs(got[i] - want[i]); d > 1e-12*math.Max(1, math.Abs(want[i])) {
						t.Fatalf("step %d: w[%d] = %.15g, want %.15g", step, i, got[i], want[i])
					}
				}
			}
			if total := 4 * len(want); cfg.ClipGrad > 0 && (clipped == 0 || clipped == total) {
				t.Fatalf("the clip bound %g cut %d of %d gradient elements; the case must cut some and not all", cfg.ClipGrad, clipped, total)
			}
		})
	}
}
