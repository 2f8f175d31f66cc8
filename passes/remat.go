package passes

import (
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/ir"
)

// Remat realizes recomputation (checkpoint.Run): under cfg's policy it
// chooses forward activations to recompute in the backward pass and gives
// each a clone, NAME.remat, inserted just before its first backward user,
// which then reads the clone; a multi-level schedule (budget mode) clones
// a value once per sweep that passes it (NAME.remat2, ...), each clone
// serving the backward steps of its part of the chain. It removes dead values first, so that what it
// measures is what the planner gets. report, when non-nil, receives what was
// decided.
func Remat(g *ir.Graph, cfg checkpoint.Config, report func(*checkpoint.Report)) error {
	if err := DCE(g); err != nil {
		return err
	}
	if m := cfg.Measure; m != nil {
		cfg.Measure = func(h *ir.Graph) (int64, error) {
			if err := DCE(h); err != nil {
				return 0, err
			}
			return m(h)
		}
	}
	r, err := checkpoint.Run(g, cfg)
	if err != nil {
		return err
	}
	if report != nil {
		report(r)
	}
	return nil
}
