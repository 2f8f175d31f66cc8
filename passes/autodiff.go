package passes

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/ir"
)

// Autodiff appends the backward graph: reverse-mode differentiation of the
// first output (the loss, a float scalar) with respect to every param that
// is not frozen (ir.Graph.Frozen: a frozen param gets no gradient, so the
// optimizer gives it no state and no update), using each op's gradient rule from the op table. Gradients of a value with several
// uses are summed in a fixed order (users in decreasing id order), and
// broadcast gradients are summed back to the operand's shape by the rules.
// The gradient of each param is recorded in g.Grads and, where autodiff made
// the value, named PARAM.grad. Because the backward graph is ordinary IR,
// applying Autodiff to a graph that already has one differentiates again:
// existing gradient records are replaced by those of the current first output.
func Autodiff(g *ir.Graph) error {
	g.Grads = nil
	if len(g.Outputs) == 0 {
		return fmt.Errorf("the graph has no output; the first output must be the loss")
	}
	loss := g.Outputs[0]
	lt := g.Type(loss)
	if !lt.DType.IsFloat() || len(lt.Shape) != 0 {
		return fmt.Errorf("the first output %s must be a float scalar (the loss), found %s", g.NameOf(loss), lt)
	}
	params := g.Trainable()
	if n := len(g.Params()); n > 0 && len(params) == 0 {
		return fmt.Errorf("all %d params are frozen; nothing would train", n)
	}
	n := len(g.Values)

	// needs[v]: some param reaches v, so gradients through v matter.
	needs := make([]bool, n)
	for i, v := range g.Values {
		if v.Op == ir.OpParam && !g.Frozen(ir.ID(i)) {
			needs[i] = true
			continue
		}
		if !v.Op.Differentiable() && v.Op.Info().NoGrad == "" {
			continue
		}
		for _, a := range v.Args {
			if needs[a] {
				needs[i] = true
				break
			}
		}
	}

	e := ir.NewEmitter(g, "d")
	grads := make([]ir.ID, n)
	for i := range grads {
		grads[i] = ir.NoID
	}
	grads[loss] = e.Scalar(1, lt.DType)
	if err := e.Backprop(grads, 0, loss, func(v ir.ID) bool { return needs[v] }); err != nil {
		return err
	}

	named := map[ir.ID]bool{}
	for _, p := range params {
		gid := grads[p]
		if gid == ir.NoID {
			gid = e.Fill(0, g.Type(p)) // the loss does not depend on p
		}
		if err := e.Err(); err != nil {
			return err
		}
		if int(gid) >= n && !named[gid] && strings.HasPrefix(g.Values[gid].Name, "d") {
			if err := g.Rename(gid, g.UniqueName(g.Values[p].Name+".grad")); err != nil {
				return err
			}
			named[gid] = true
		}
		g.Grads = append(g.Grads, ir.GradPair{Param: p, Grad: gid})
	}
	return e.Err()
}
