package passes

import (
	"fmt"
	"math"
	"slices"

	"github.com/kilnml/kiln/ir"
)

// OptimizerConfig selects the parameter update the optimizer pass appends.
type OptimizerConfig struct {
	Kind        string  // "sgd" or "adam"
	LR          float64 // learning rate
	Momentum    float64 // sgd: momentum (0 = plain SGD)
	Beta1       float64 // adam: first-moment decay
	Beta2       float64 // adam: second-moment decay
	Eps         float64 // adam: added to the root of the second moment
	WeightDecay float64 // L2 penalty added to the gradient (PyTorch's weight_decay)
	// ClipGrad, when positive, clamps every element of every gradient to
	// [-ClipGrad, ClipGrad] before the update (and before weight decay is
	// added), as torch.nn.utils.clip_grad_value_ before optimizer.step; 0
	// clips nothing.
	ClipGrad float64
}

// DefaultOptimizer returns kind's PyTorch defaults: SGD with lr 0.01, no
// momentum; Adam with lr 0.001, betas (0.9, 0.999), eps 1e-8.
func DefaultOptimizer(kind string) (OptimizerConfig, error) {
	switch kind {
	case "sgd":
		return OptimizerConfig{Kind: "sgd", LR: 0.01}, nil
	case "adam":
		return OptimizerConfig{Kind: "adam", LR: 0.001, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, nil
	}
	return OptimizerConfig{}, fmt.Errorf("unknown optimizer %q (expected sgd or adam)", kind)
}

// Validate reports a configuration that cannot train.
func (c OptimizerConfig) Validate() error {
	switch {
	case c.Kind != "sgd" && c.Kind != "adam":
		return fmt.Errorf("unknown optimizer %q (expected sgd or adam)", c.Kind)
	case !(c.LR > 0):
		return fmt.Errorf("learning rate must be positive, found %g", c.LR)
	case c.Momentum < 0 || c.Momentum >= 1:
		return fmt.Errorf("momentum must be in [0,1), found %g", c.Momentum)
	case c.WeightDecay < 0:
		return fmt.Errorf("weight decay must be >= 0, found %g", c.WeightDecay)
	case !(c.ClipGrad >= 0) || math.IsInf(c.ClipGrad, 0):
		return fmt.Errorf("gradient clip must be finite and >= 0 (0: none), found %g", c.ClipGrad)
	case c.Kind == "adam" && (c.Beta1 < 0 || c.Beta1 >= 1 || c.Beta2 < 0 || c.Beta2 >= 1):
		return fmt.Errorf("adam betas must be in [0,1), found %g, %g", c.Beta1, c.Beta2)
	case c.Kind == "adam" && !(c.Eps > 0):
		return fmt.Errorf("adam eps must be positive, found %g", c.Eps)
	}
	return nil
}

// Optimize appends the update of every param with a gradient, so that one
// training step is one graph. The optimizer's state (momentum buffers, Adam's
// moments and bias-correction powers) becomes state values, zero-initialized
// unless stated, updated at the end of each step like the params. The
// arithmetic follows torch.optim.SGD and torch.optim.Adam, after the
// gradient is clamped elementwise when ClipGrad is set.
func Optimize(g *ir.Graph, c OptimizerConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if len(g.Grads) == 0 {
		return fmt.Errorf("the graph has no gradients; run autodiff first")
	}
	first := ir.ID(len(g.Values)) // the update's values come after this
	g.Grow(30*len(g.Grads) + 8)   // at most 29 values a param, 8 for Adam's powers
	e := ir.NewEmitter(g, "u")
	var stateErr error
	state := func(name string, t ir.Type, init float64) ir.ID {
		id, err := g.Leaf(ir.OpState, g.UniqueName(name), t, ir.MakeAttrs("init", ir.Float(init)))
		if err != nil && stateErr == nil {
			stateErr = err
		}
		return id
	}
	update := func(target, value ir.ID) {
		if target != ir.NoID && value != ir.NoID {
			g.Updates = append(g.Updates, ir.Update{Target: target, Value: value})
		}
	}
	// Constants and Adam's bias corrections are made once per dtype and
	// shared by every param's update.
	type scalarKey struct {
		v  float64
		dt ir.DType
	}
	scalars := map[scalarKey]ir.ID{}
	scalar := func(v float64, dt ir.DType) ir.ID {
		k := scalarKey{v, dt}
		id, ok := scalars[k]
		if !ok {
			id = e.Scalar(v, dt)
			scalars[k] = id
		}
		return id
	}

	// Adam's bias corrections use beta^t, kept as one state per dtype and
	// multiplied by beta every step; c1 and c2 are 1 - beta^t.
	type pows struct{ b1, b2, c1, c2 ir.ID }
	adamPows := map[ir.DType]pows{}
	for _, gp := range g.Grads {
		p, grad := gp.Param, gp.Grad
		t := g.Type(p)
		dt := t.DType
		name := g.Values[p].Name
		if c.ClipGrad > 0 {
			grad = e.Op(ir.OpClip, ir.MakeAttrs("min", ir.Float(-c.ClipGrad), "max", ir.Float(c.ClipGrad)), grad)
		}
		if c.WeightDecay != 0 {
			grad = e.Op(ir.OpAdd, nil, grad, e.Op(ir.OpMul, nil, p, scalar(c.WeightDecay, dt)))
		}
		var next ir.ID
		switch c.Kind {
		case "sgd":
			step := grad
			if c.Momentum != 0 {
				buf := state(name+".momentum", t, 0)
				step = e.Op(ir.OpAdd, nil, e.Op(ir.OpMul, nil, buf, scalar(c.Momentum, dt)), grad)
				update(buf, step)
			}
			next = e.Op(ir.OpSub, nil, p, e.Op(ir.OpMul, nil, step, scalar(c.LR, dt)))
		case "adam":
			pw, ok := adamPows[dt]
			if !ok {
				scalarT := ir.Type{DType: dt, Shape: ir.Shape{}}
				b1 := state("adam.beta1_power."+dt.String(), scalarT, 1)
				b2 := state("adam.beta2_power."+dt.String(), scalarT, 1)
				pw.b1, pw.b2 = e.Op(ir.OpMul, nil, b1, scalar(c.Beta1, dt)), e.Op(ir.OpMul, nil, b2, scalar(c.Beta2, dt))
				pw.c1, pw.c2 = e.Op(ir.OpSub, nil, scalar(1, dt), pw.b1), e.Op(ir.OpSub, nil, scalar(1, dt), pw.b2)
				update(b1, pw.b1)
				update(b2, pw.b2)
				adamPows[dt] = pw
			}
			m := state(name+".adam_m", t, 0)
			v := state(name+".adam_v", t, 0)
			m1 := e.Op(ir.OpAdd, nil, e.Op(ir.OpMul, nil, m, scalar(c.Beta1, dt)), e.Op(ir.OpMul, nil, grad, scalar(1-c.Beta1, dt)))
			v1 := e.Op(ir.OpAdd, nil, e.Op(ir.OpMul, nil, v, scalar(c.Beta2, dt)),
				e.Op(ir.OpMul, nil, e.Op(ir.OpMul, nil, grad, grad), scalar(1-c.Beta2, dt)))
			update(m, m1)
			update(v, v1)
			// step = lr * (m1 / (1 - b1^t)) / (sqrt(v1 / (1 - b2^t)) + eps)
			mhat := e.Op(ir.OpDiv, nil, m1, pw.c1)
			vhat := e.Op(ir.OpDiv, nil, v1, pw.c2)
			denom := e.Op(ir.OpAdd, nil, e.Op(ir.OpSqrt, nil, vhat), scalar(c.Eps, dt))
			next = e.Op(ir.OpSub, nil, p, e.Op(ir.OpMul, nil, e.Op(ir.OpDiv, nil, mhat, denom), scalar(c.LR, dt)))
		}
		update(p, next)
		if stateErr != nil {
			return stateErr
		}
		if err := e.Err(); err != nil {
			return fmt.Errorf("update of %s: %v", g.NameOf(p), err)
		}
	}
	if err := e.Err(); err != nil {
		return err
	}
	return g.Permute(updatesEarly(g, first))
}

// updatesEarly returns an order of g's values in which each value the
// optimizer appended (ids from first on) comes as early as its arguments
// allow, keeping the order of the rest: a param's update then follows its
// gradient, so that in graph order (the schedule of plans that keep it) the
// gradient is consumed, and its memory freed, at once rather than after the
// whole backward.
func updatesEarly(g *ir.Graph, first ir.ID) []ir.ID {
	n := len(g.Values)
	placed := make([]bool, n)
	waiting := make([]int, n) // unplaced arguments of each appended value
	users := make([][]ir.ID, n)
	order := make([]ir.ID, 0, n)
	// An appended value without arguments (a constant, a state) waits for
	// its first user instead of taking memory from the start.
	sink := func(id ir.ID) bool { return id >= first && len(g.Values[id].Args) == 0 }
	for id := first; int(id) < n; id++ {
		for _, a := range g.Values[id].Args {
			if !sink(a) {
				waiting[id]++
				users[a] = append(users[a], id)
			}
		}
	}
	var place func(id ir.ID)
	place = func(id ir.ID) {
		if placed[id] {
			return
		}
		for _, a := range g.Values[id].Args {
			if sink(a) {
				place(a)
			}
		}
		placed[id] = true
		order = append(order, id)
		var ready []ir.ID
		for _, u := range users[id] {
			if waiting[u]--; waiting[u] == 0 {
				ready = append(ready, u)
			}
		}
		slices.Sort(ready)
		for _, u := range ready {
			place(u)
		}
	}
	for id := ir.ID(0); id < first; id++ {
		place(id)
	}
	for id := first; int(id) < n; id++ {
		place(id) // sinks no value uses, and anything left in order
	}
	return order
}
