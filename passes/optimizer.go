package passes

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kilnml/kiln/ir"
)

// OptimizerConfig selects the parameter update the optimizer pass appends.
// Each kind's arithmetic is that of its torch.optim class (PyTorch 1.13):
// "sgd" (torch.optim.SGD), "adam" (Adam), "adamw" (AdamW) and "rmsprop"
// (RMSprop).
type OptimizerConfig struct {
	Kind      string  // "sgd", "adam", "adamw" or "rmsprop"
	LR        float64 // learning rate
	Momentum  float64 // sgd, rmsprop: momentum (0 = none)
	Dampening float64 // sgd: the gradient enters the momentum buffer scaled by 1 - Dampening (not at the first step)
	Nesterov  bool    // sgd: Nesterov momentum (needs Momentum > 0 and Dampening 0)
	Beta1     float64 // adam, adamw: first-moment decay
	Beta2     float64 // adam, adamw: second-moment decay
	Eps       float64 // adam, adamw, rmsprop: added to the root of the second moment
	AMSGrad   bool    // adam, adamw: divide by the root of the largest second moment so far (kept as state)
	Alpha     float64 // rmsprop: decay of the mean square
	Centered  bool    // rmsprop: divide by the root of the variance (the mean square less the squared mean gradient)
	// WeightDecay is PyTorch's weight_decay: for adamw the decoupled decay
	// p -= LR*WeightDecay*p before the update; for the others the L2
	// penalty WeightDecay*p added to the gradient.
	WeightDecay float64
	// Schedule multiplies LR at step t (counted from 0, kept as state) by
	// λ(t): "" or "constant" 1, "cosine" max(0, ½(1 + cos(π·(t−W)/(T−W)))),
	// "linear" max(0, (T−t)/(T−W)), "step" Gamma^⌊(t−W)/StepSize⌋; with
	// Warmup W > 0, λ(t) = t/W for t < W. These are the functions of
	// transformers' get_*_schedule_with_warmup (T−W is at least 1) and
	// torch's StepLR after the warmup.
	Schedule string
	Warmup   int64   // W: the steps of linear warmup (0: none)
	StepSize int64   // step: the steps between decays
	Gamma    float64 // step: the factor of each decay
	// Total is T, the run's number of updates, for cosine and linear: the
	// initial value of the states ScheduleTotal.DTYPE, which a run sets
	// to its length before its first step.
	Total int64
	// ClipGrad, when positive, clamps every element of every gradient to
	// [-ClipGrad, ClipGrad] before the update (and before weight decay is
	// added), as torch.nn.utils.clip_grad_value_ before optimizer.step; 0
	// clips nothing.
	ClipGrad float64
	// ClipNorm, when positive, scales every gradient by
	// min(1, ClipNorm/(norm + 1e-6)), where norm is the 2-norm of all the
	// gradients together (the root of the sum of every element's square),
	// before the update and weight decay, as torch.nn.utils.clip_grad_norm_
	// before optimizer.step. With ClipGrad too, the elements are clamped
	// first and the norm is that of the clamped gradients. 0 scales nothing.
	ClipNorm float64
	// Accum, when above 1, accumulates gradients over Accum training steps
	// (micro-batches) per update: each step adds its gradients to a state
	// of the param's shape (PARAM.grad_accum), in step order, and only the
	// last of every Accum steps updates the params and the optimizer's
	// state, from the sum divided by Accum, which then goes through the
	// clamp, the norm clipping and the decay as one gradient would. On a
	// mean loss this is one step on the Accum batches concatenated. The
	// steps are counted by the state AccumStep, whose "period" attribute
	// is Accum; a schedule's step t counts updates. 0 or 1: every step
	// updates.
	Accum int64
}

// Schedules lists the learning-rate schedules (OptimizerConfig.Schedule).
var Schedules = []string{"constant", "cosine", "linear", "step"}

// ScheduleStep and ScheduleTotal prefix the names of a schedule's states,
// one each per float dtype of the params (ScheduleStep + ".f32"): the
// step counter t and the run's length T.
const (
	ScheduleStep  = "lr_schedule.step"
	ScheduleTotal = "lr_schedule.total"
)

// AccumStep names the f32 scalar state that counts the steps of a
// gradient accumulation (OptimizerConfig.Accum) from 0 to Accum-1; its
// "period" attribute is Accum.
const AccumStep = "grad_accum.step"

// maxAccum bounds OptimizerConfig.Accum: AccumStep counts in float32,
// exact to 2^24.
const maxAccum = 1 << 24

// scheduled reports whether the learning rate changes from step to step.
func (c OptimizerConfig) scheduled() bool {
	return (c.Schedule != "" && c.Schedule != "constant") || c.Warmup > 0
}

// OptimizerKinds lists the optimizers the pass knows.
var OptimizerKinds = []string{"sgd", "adam", "adamw", "rmsprop"}

// DefaultOptimizer returns kind's PyTorch defaults: SGD with lr 0.01, no
// momentum; Adam with lr 0.001, betas (0.9, 0.999), eps 1e-8; AdamW as Adam
// with weight decay 0.01; RMSprop with lr 0.01, alpha 0.99, eps 1e-8.
func DefaultOptimizer(kind string) (OptimizerConfig, error) {
	switch kind {
	case "sgd":
		return OptimizerConfig{Kind: "sgd", LR: 0.01}, nil
	case "adam":
		return OptimizerConfig{Kind: "adam", LR: 0.001, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, nil
	case "adamw":
		return OptimizerConfig{Kind: "adamw", LR: 0.001, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}, nil
	case "rmsprop":
		return OptimizerConfig{Kind: "rmsprop", LR: 0.01, Alpha: 0.99, Eps: 1e-8}, nil
	}
	return OptimizerConfig{}, unknownOptimizer(kind)
}

func unknownOptimizer(kind string) error {
	return fmt.Errorf("unknown optimizer %q (expected %s)", ir.Excerpt(kind), strings.Join(OptimizerKinds, ", "))
}

// IsAdam reports whether the kind is adam or adamw, which read Beta1,
// Beta2, Eps and AMSGrad.
func (c OptimizerConfig) IsAdam() bool { return c.Kind == "adam" || c.Kind == "adamw" }

// Validate reports a configuration that cannot train.
func (c OptimizerConfig) Validate() error {
	switch {
	case !slices.Contains(OptimizerKinds, c.Kind):
		return unknownOptimizer(c.Kind)
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("learning rate must be positive, found %g", c.LR)
	case !(c.Momentum >= 0 && c.Momentum < 1):
		return fmt.Errorf("momentum must be in [0,1), found %g", c.Momentum)
	case c.Momentum != 0 && c.Kind != "sgd" && c.Kind != "rmsprop":
		return fmt.Errorf("momentum is for sgd and rmsprop; %s has its betas", c.Kind)
	case !(c.Dampening >= 0 && c.Dampening <= 1):
		return fmt.Errorf("dampening must be in [0,1], found %g", c.Dampening)
	case (c.Dampening != 0 || c.Nesterov) && c.Kind != "sgd":
		return fmt.Errorf("dampening and nesterov are for sgd, not %s", c.Kind)
	case c.Nesterov && (c.Momentum == 0 || c.Dampening != 0):
		return fmt.Errorf("nesterov momentum needs a momentum and zero dampening, found momentum %g, dampening %g", c.Momentum, c.Dampening)
	case c.AMSGrad && !c.IsAdam():
		return fmt.Errorf("amsgrad is for adam and adamw, not %s", c.Kind)
	case c.Centered && c.Kind != "rmsprop":
		return fmt.Errorf("centered is for rmsprop, not %s", c.Kind)
	case !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 0):
		return fmt.Errorf("weight decay must be finite and >= 0, found %g", c.WeightDecay)
	case !(c.ClipGrad >= 0) || math.IsInf(c.ClipGrad, 0):
		return fmt.Errorf("gradient clip must be finite and >= 0 (0: none), found %g", c.ClipGrad)
	case !(c.ClipNorm >= 0) || math.IsInf(c.ClipNorm, 0):
		return fmt.Errorf("gradient norm clip must be finite and >= 0 (0: none), found %g", c.ClipNorm)
	case c.IsAdam() && !(c.Beta1 >= 0 && c.Beta1 < 1 && c.Beta2 >= 0 && c.Beta2 < 1):
		return fmt.Errorf("%s betas must be in [0,1), found %g, %g", c.Kind, c.Beta1, c.Beta2)
	case c.Kind == "rmsprop" && !(c.Alpha >= 0 && c.Alpha < 1):
		return fmt.Errorf("rmsprop alpha must be in [0,1), found %g", c.Alpha)
	case (c.IsAdam() || c.Kind == "rmsprop") && (!(c.Eps > 0) || math.IsInf(c.Eps, 0)):
		return fmt.Errorf("%s eps must be positive, found %g", c.Kind, c.Eps)
	case c.Schedule != "" && !slices.Contains(Schedules, c.Schedule):
		return fmt.Errorf("unknown learning-rate schedule %q (expected %s)", ir.Excerpt(c.Schedule), strings.Join(Schedules, ", "))
	case c.Warmup < 0 || c.Total < 0:
		return fmt.Errorf("warmup and total steps must be >= 0, found %d and %d", c.Warmup, c.Total)
	case c.Accum < 0 || c.Accum > maxAccum:
		return fmt.Errorf("gradient accumulation must be 1 to %d steps an update, found %d", maxAccum, c.Accum)
	case c.Schedule == "step" && (c.StepSize < 1 || !(c.Gamma > 0) || math.IsInf(c.Gamma, 0)):
		return fmt.Errorf("the step schedule needs a step size >= 1 and a gamma > 0, found %d and %g", c.StepSize, c.Gamma)
	}
	return nil
}

// Optimize appends the update of every param with a gradient, so that one
// training step is one graph. The optimizer's state (momentum buffers, Adam's
// moments and bias-correction powers) becomes state values, zero-initialized
// unless stated, updated at the end of each step like the params. The
// arithmetic follows torch.optim (see OptimizerConfig), after the gradient
// is accumulated over Accum steps when that is above 1, clamped elementwise
// when ClipGrad is set and scaled to the global norm ClipNorm when that is
// set.
func Optimize(g *ir.Graph, c OptimizerConfig) error { return optimize(g, c, nil) }

// sharding is the data-parallel training whose optimizer state is sharded
// over the ranks (Options.Shard): each rank updates its shard of every
// bucket of params from its shard of the reduced gradients, and the
// updated shards are gathered.
type sharding struct {
	ranks       int
	bucketBytes int64
}

// slot is what the update of one set of values reads and writes: the
// values (a param, or this rank's shard of a bucket's params), their
// gradient, the prefix of their state's names, and how the updated values
// become updates of the params.
type slot struct {
	name  string
	value ir.ID
	grad  ir.ID
	set   func(next ir.ID)
}

// optimize is Optimize, with sharded optimizer state when sh is set.
func optimize(g *ir.Graph, c OptimizerConfig, sh *sharding) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if sh != nil {
		switch {
		case c.Accum > 1:
			return fmt.Errorf("sharded optimizer state (-dist-shard) does not take gradient accumulation (-accum) yet")
		case c.ClipNorm > 0:
			return fmt.Errorf("sharded optimizer state (-dist-shard) does not take -clip-norm: each rank would sum the squares of its shard, not the whole gradient in one process's order")
		}
	}
	if len(g.Grads) == 0 {
		return fmt.Errorf("the graph has no gradients; run autodiff first")
	}
	first := ir.ID(len(g.Values)) // the update's values come after this
	g.Grow(51*len(g.Grads) + 24)  // at most 50 values a param, 8 for Adam's powers, 8 for the norm, 8 for accumulation
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
	// SGD with dampening scales the gradient by 1 - dampening except at the
	// first step: started is a state per dtype, 0 before the first step
	// and 1 after it, and the scale is 1 - dampening*started.
	dampScale := map[ir.DType]ir.ID{}
	// The learning rate: a constant, or LR*λ(t) computed once per dtype.
	lrs := map[ir.DType]ir.ID{}
	lr := func(dt ir.DType) ir.ID {
		if !c.scheduled() {
			return scalar(c.LR, dt)
		}
		if id, ok := lrs[dt]; ok {
			return id
		}
		scalarT := ir.Type{DType: dt, Shape: ir.Shape{}}
		t := state(ScheduleStep+"."+dt.String(), scalarT, 0)
		update(t, e.Op(ir.OpAdd, nil, t, scalar(1, dt)))
		w := float64(c.Warmup)
		var lam ir.ID
		switch c.Schedule {
		case "cosine", "linear":
			total := state(ScheduleTotal+"."+dt.String(), scalarT, float64(c.Total))
			span := e.Op(ir.OpMaximum, nil, e.Op(ir.OpSub, nil, total, scalar(w, dt)), scalar(1, dt))
			if c.Schedule == "cosine" {
				progress := e.Op(ir.OpDiv, nil, e.Op(ir.OpSub, nil, t, scalar(w, dt)), span)
				cos := e.Op(ir.OpCos, nil, e.Op(ir.OpMul, nil, scalar(math.Pi, dt), progress))
				lam = e.Op(ir.OpMul, nil, scalar(0.5, dt), e.Op(ir.OpAdd, nil, scalar(1, dt), cos))
			} else {
				lam = e.Op(ir.OpDiv, nil, e.Op(ir.OpSub, nil, total, t), span)
			}
			lam = e.Op(ir.OpMaximum, nil, lam, scalar(0, dt))
		case "step":
			k := e.Op(ir.OpFloor, nil, e.Op(ir.OpDiv, nil, e.Op(ir.OpSub, nil, t, scalar(w, dt)), scalar(float64(c.StepSize), dt)))
			lam = e.Op(ir.OpPow, nil, scalar(c.Gamma, dt), k)
		default:
			lam = scalar(1, dt)
		}
		if c.Warmup > 0 {
			warm := e.Op(ir.OpDiv, nil, t, scalar(w, dt))
			lam = e.Op(ir.OpWhere, nil, e.Op(ir.OpLess, nil, t, scalar(w, dt)), warm, lam)
		}
		id := e.Op(ir.OpMul, nil, scalar(c.LR, dt), lam)
		lrs[dt] = id
		return id
	}
	grads := make([]ir.ID, len(g.Grads))
	for i, gp := range g.Grads {
		grads[i] = gp.Grad
	}
	// With accumulation, the updates appended from gated on apply only at
	// the last step of an accumulation (last); the steps between keep
	// every param and state as it is.
	gated, last := 0, ir.NoID
	if c.Accum > 1 {
		var err error
		if last, err = accumulate(g, e, grads, c.Accum); err != nil {
			return err
		}
		gated = len(g.Updates)
	}
	var slots []slot
	if sh != nil {
		slots = shardSlots(g, e, grads, sh, update)
	} else {
		for i, gp := range g.Grads {
			p := gp.Param
			slots = append(slots, slot{name: g.Values[p].Name, value: p, grad: grads[i], set: func(next ir.ID) { update(p, next) }})
		}
	}
	for i, sl := range slots {
		if c.ClipGrad > 0 {
			slots[i].grad = e.Op(ir.OpClip, ir.MakeAttrs("min", ir.Float(-c.ClipGrad), "max", ir.Float(c.ClipGrad)), sl.grad)
		}
	}
	var clipCoef map[ir.DType]ir.ID
	if c.ClipNorm > 0 {
		clipped := make([]ir.ID, len(slots))
		for i, sl := range slots {
			clipped[i] = sl.grad
		}
		clipCoef = clipNormCoef(e, clipped, c.ClipNorm)
	}
	for _, sl := range slots {
		p, grad := sl.value, sl.grad
		t := g.Type(p)
		dt := t.DType
		name := sl.name
		if c.ClipNorm > 0 {
			grad = e.Op(ir.OpMul, nil, grad, clipCoef[dt])
		}
		from := p // the param the update starts from
		switch {
		case c.WeightDecay == 0:
		case c.Kind == "adamw":
			if c.scheduled() {
				from = e.Op(ir.OpMul, nil, p, e.Op(ir.OpSub, nil, scalar(1, dt), e.Op(ir.OpMul, nil, lr(dt), scalar(c.WeightDecay, dt))))
			} else {
				from = e.Op(ir.OpMul, nil, p, scalar(1-c.LR*c.WeightDecay, dt))
			}
		default:
			grad = e.Op(ir.OpAdd, nil, grad, e.Op(ir.OpMul, nil, p, scalar(c.WeightDecay, dt)))
		}
		var step ir.ID // the update is from - LR*step
		switch c.Kind {
		case "sgd":
			step = grad
			if c.Momentum != 0 {
				buf := state(name+".momentum", t, 0)
				in := grad
				if c.Dampening != 0 {
					k, ok := dampScale[dt]
					if !ok {
						started := state("sgd.started."+dt.String(), ir.Type{DType: dt, Shape: ir.Shape{}}, 0)
						update(started, e.Op(ir.OpMaximum, nil, started, scalar(1, dt)))
						k = e.Op(ir.OpSub, nil, scalar(1, dt), e.Op(ir.OpMul, nil, started, scalar(c.Dampening, dt)))
						dampScale[dt] = k
					}
					in = e.Op(ir.OpMul, nil, grad, k)
				}
				buf1 := e.Op(ir.OpAdd, nil, e.Op(ir.OpMul, nil, buf, scalar(c.Momentum, dt)), in)
				update(buf, buf1)
				step = buf1
				if c.Nesterov {
					step = e.Op(ir.OpAdd, nil, grad, e.Op(ir.OpMul, nil, buf1, scalar(c.Momentum, dt)))
				}
			}
		case "adam", "adamw":
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
			if c.AMSGrad {
				vmax := state(name+".adam_vmax", t, 0)
				v1 = e.Op(ir.OpMaximum, nil, vmax, v1)
				update(vmax, v1)
			}
			// step = (m1 / (1 - b1^t)) / (sqrt(v1 / (1 - b2^t)) + eps)
			mhat := e.Op(ir.OpDiv, nil, m1, pw.c1)
			vhat := e.Op(ir.OpDiv, nil, v1, pw.c2)
			denom := e.Op(ir.OpAdd, nil, e.Op(ir.OpSqrt, nil, vhat), scalar(c.Eps, dt))
			step = e.Op(ir.OpDiv, nil, mhat, denom)
		case "rmsprop":
			sq := state(name+".rmsprop_square", t, 0)
			sq1 := e.Op(ir.OpAdd, nil, e.Op(ir.OpMul, nil, sq, scalar(c.Alpha, dt)),
				e.Op(ir.OpMul, nil, e.Op(ir.OpMul, nil, grad, grad), scalar(1-c.Alpha, dt)))
			update(sq, sq1)
			variance := sq1
			if c.Centered {
				ga := state(name+".rmsprop_grad", t, 0)
				ga1 := e.Op(ir.OpAdd, nil, e.Op(ir.OpMul, nil, ga, scalar(c.Alpha, dt)), e.Op(ir.OpMul, nil, grad, scalar(1-c.Alpha, dt)))
				update(ga, ga1)
				variance = e.Op(ir.OpSub, nil, sq1, e.Op(ir.OpMul, nil, ga1, ga1))
			}
			step = e.Op(ir.OpDiv, nil, grad, e.Op(ir.OpAdd, nil, e.Op(ir.OpSqrt, nil, variance), scalar(c.Eps, dt)))
			if c.Momentum != 0 {
				buf := state(name+".momentum", t, 0)
				step = e.Op(ir.OpAdd, nil, e.Op(ir.OpMul, nil, buf, scalar(c.Momentum, dt)), step)
				update(buf, step)
			}
		}
		next := e.Op(ir.OpSub, nil, from, e.Op(ir.OpMul, nil, step, lr(dt)))
		sl.set(next)
		if stateErr != nil {
			return stateErr
		}
		if err := e.Err(); err != nil {
			return fmt.Errorf("update of %s: %v", name, err)
		}
	}
	if last != ir.NoID {
		for i := gated; i < len(g.Updates); i++ {
			u := &g.Updates[i]
			u.Value = e.Op(ir.OpWhere, nil, last, u.Value, u.Target)
		}
	}
	if err := e.Err(); err != nil {
		return err
	}
	if err := g.Permute(updatesEarly(g, first)); err != nil {
		return err
	}
	// The updates consume the gradients, which a training step does not
	// return: the graph stops naming them, so that the later passes may
	// fuse a gradient into the op that computes its update.
	g.Grads = nil
	return nil
}

// accumulate appends gradient accumulation over k steps: the step counter
// AccumStep, and for each gradient grads[i] a state PARAM.grad_accum that
// holds the sum of the gradients so far, ((g0 + g1) + g2) + ... in step
// order (the first step stores its gradient as it is). It replaces
// grads[i] by that sum, including this step's gradient, divided by k,
// and returns the bool that is true at the last step of an accumulation.
// Data-parallel training sums the ranks' gradients in this order, so that
// N ranks are bitwise one process accumulating N steps.
func accumulate(g *ir.Graph, e *ir.Emitter, grads []ir.ID, k int64) (ir.ID, error) {
	f32 := ir.Type{DType: ir.F32, Shape: ir.Shape{}}
	step, err := g.Leaf(ir.OpState, g.UniqueName(AccumStep), f32, ir.MakeAttrs("init", ir.Float(0), "period", ir.Int(int(k))))
	if err != nil {
		return ir.NoID, err
	}
	first := e.Op(ir.OpEqual, nil, step, e.Scalar(0, ir.F32))
	last := e.Op(ir.OpEqual, nil, step, e.Scalar(float64(k-1), ir.F32))
	next := e.Op(ir.OpWhere, nil, last, e.Scalar(0, ir.F32), e.Op(ir.OpAdd, nil, step, e.Scalar(1, ir.F32)))
	g.Updates = append(g.Updates, ir.Update{Target: step, Value: next})
	for i, grad := range grads {
		p := g.Grads[i].Param
		t := g.Type(p)
		acc, err := g.Leaf(ir.OpState, g.UniqueName(g.Values[p].Name+".grad_accum"), t, ir.MakeAttrs("init", ir.Float(0)))
		if err != nil {
			return ir.NoID, err
		}
		sum := e.Op(ir.OpWhere, nil, first, grad, e.Op(ir.OpAdd, nil, acc, grad))
		g.Updates = append(g.Updates, ir.Update{Target: acc, Value: sum})
		grads[i] = e.Op(ir.OpDiv, nil, sum, e.Scalar(float64(k), t.DType))
	}
	return last, e.Err()
}

// clipNormCoef returns the factor of torch.nn.utils.clip_grad_norm_ (1.13)
// for the gradients grads, per dtype of theirs: min(1, maxNorm/(norm + 1e-6))
// with norm the root of the sum of every element's square. Each gradient's
// sum of squares is one sum(square(grad)), which the fuse pass makes one
// fused_reduce reading the gradient once; the rest is scalar arithmetic.
// The sums are added in float64 when a gradient is float64, else float32
// (torch stacks the per-gradient norms with type promotion), and the
// factor is cast back to each gradient's dtype, as torch's in-place mul_
// keeps it.
func clipNormCoef(e *ir.Emitter, grads []ir.ID, maxNorm float64) map[ir.DType]ir.ID {
	acc := ir.F32
	for _, grad := range grads {
		if e.Type(grad).DType == ir.F64 {
			acc = ir.F64
		}
	}
	cast := func(x ir.ID, dt ir.DType) ir.ID {
		if e.Type(x).DType == dt {
			return x
		}
		return e.Op(ir.OpCast, ir.MakeAttrs("dtype", ir.String(dt.String())), x)
	}
	total := ir.NoID
	for _, grad := range grads {
		sq := cast(e.Op(ir.OpSum, nil, e.Op(ir.OpSquare, nil, grad)), acc)
		if total == ir.NoID {
			total = sq
		} else {
			total = e.Op(ir.OpAdd, nil, total, sq)
		}
	}
	norm := e.Op(ir.OpSqrt, nil, total)
	coef := e.Op(ir.OpDiv, nil, e.Scalar(maxNorm, acc), e.Op(ir.OpAdd, nil, norm, e.Scalar(1e-6, acc)))
	coef = e.Op(ir.OpClip, ir.MakeAttrs("max", ir.Float(1)), coef) // torch.clamp(max=1.0): NaN stays NaN
	coefs := map[ir.DType]ir.ID{}
	for _, grad := range grads {
		dt := e.Type(grad).DType
		if _, ok := coefs[dt]; !ok {
			coefs[dt] = cast(coef, dt)
		}
	}
	return coefs
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
