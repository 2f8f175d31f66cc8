package onnx

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// The recurrent ops (RNN, GRU, LSTM) are unrolled at import over the time
// steps, which the static input shape fixes, into kiln ops: the input
// projection of every step is one matmul, then each step is a matmul by the
// recurrence weights, slices into the gates, the activations and the
// elementwise state update; the outputs are stacks of the steps' states.
// kiln's autodiff then differentiates the unrolled graph (backpropagation
// through time).

// cellKind is one of ONNX's recurrent ops.
type cellKind int

const (
	cellRNN cellKind = iota
	cellGRU
	cellLSTM
)

// gates is the number of gate blocks stacked in W and R.
func (k cellKind) gates() int { return [...]int{1, 3, 4}[k] }

// acts is the number of activation functions per direction.
func (k cellKind) acts() int { return [...]int{1, 2, 3}[k] }

func (k cellKind) defaultActs() []string {
	return [...][]string{{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}}[k]
}

// rnnActivation is an activation function of a recurrent op, with the
// alpha and beta it takes.
type rnnActivation struct {
	name        string
	alpha, beta float64
}

// activationParams lists the activations import supports, lower-cased, with
// whether each takes alpha and beta from activation_alpha/activation_beta and
// their defaults.
var activationParams = map[string]struct {
	alpha, beta   bool
	defA, defBeta float64
}{
	"sigmoid":     {},
	"tanh":        {},
	"relu":        {},
	"softsign":    {},
	"softplus":    {},
	"leakyrelu":   {alpha: true, defA: 0.01},
	"elu":         {alpha: true, defA: 1},
	"hardsigmoid": {alpha: true, beta: true, defA: 0.2, defBeta: 0.5},
	"affine":      {alpha: true, beta: true},
	"scaledtanh":  {alpha: true, beta: true},
}

// recurrentActivations returns the activations of each direction: the
// activations attribute (k.acts() names, or k.acts() per direction), with
// activation_alpha and activation_beta consumed in order by the functions
// that take them (as ONNX Runtime does).
func recurrentActivations(n *onnxpb.NodeProto, k cellKind, dirs int) ([][]rnnActivation, error) {
	names := k.defaultActs()
	if a := attr(n, "activations"); a != nil {
		names = nil
		for _, s := range a.Strings {
			names = append(names, string(s))
		}
	}
	if len(names) != k.acts() && len(names) != dirs*k.acts() {
		return nil, fmt.Errorf("expected %d activations (or %d per direction), found %d", k.acts(), k.acts(), len(names))
	}
	var alphas, betas []float32
	if a := attr(n, "activation_alpha"); a != nil {
		alphas = a.Floats
	}
	if a := attr(n, "activation_beta"); a != nil {
		betas = a.Floats
	}
	var all []rnnActivation
	for _, name := range names {
		p, ok := activationParams[strings.ToLower(name)]
		if !ok {
			return nil, fmt.Errorf("activation %q is not supported (Sigmoid, Tanh, Relu, LeakyRelu, Elu, HardSigmoid, Softsign, Softplus, Affine, ScaledTanh are)", ir.Excerpt(name))
		}
		a := rnnActivation{name: strings.ToLower(name)}
		if p.alpha {
			a.alpha = p.defA
			if len(alphas) > 0 {
				a.alpha, alphas = float64(alphas[0]), alphas[1:]
			}
		}
		if p.beta {
			a.beta = p.defBeta
			if len(betas) > 0 {
				a.beta, betas = float64(betas[0]), betas[1:]
			}
		}
		all = append(all, a)
	}
	out := make([][]rnnActivation, dirs)
	for d := range out {
		if len(all) == k.acts() {
			out[d] = all
		} else {
			out[d] = all[d*k.acts() : (d+1)*k.acts()]
		}
	}
	return out, nil
}

// unroller emits kiln ops and keeps the first error, so that the unrolling
// reads as the equations it computes.
type unroller struct {
	im  *importer
	dt  ir.DType
	err error
}

func (u *unroller) op(op ir.Op, attrs ir.Attrs, args ...ir.ID) ir.ID {
	if u.err != nil {
		return ir.NoID
	}
	for _, a := range args {
		if a == ir.NoID {
			u.err = errors.New("internal error: a missing operand in the unrolled recurrence")
			return ir.NoID
		}
	}
	id, err := u.im.g.Add("", op, attrs, args...)
	if err != nil {
		u.err = err
		return ir.NoID
	}
	return id
}

func (u *unroller) add(a, b ir.ID) ir.ID { return u.op(ir.OpAdd, nil, a, b) }
func (u *unroller) mul(a, b ir.ID) ir.ID { return u.op(ir.OpMul, nil, a, b) }

// matmulT is a @ b^T.
func (u *unroller) matmulT(a, b ir.ID) ir.ID {
	return u.op(ir.OpMatmul, ir.MakeAttrs("transpose_b", ir.BoolAttr(true)), a, b)
}

func (u *unroller) slice(x ir.ID, axis, start, end int) ir.ID {
	return u.op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(axis), "start", ir.Int(start), "end", ir.Int(end), "step", ir.Int(1)), x)
}

func (u *unroller) reshape(x ir.ID, shape ...int) ir.ID {
	return u.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(shape...)), x)
}

func (u *unroller) transpose(x ir.ID, perm ...int) ir.ID {
	return u.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(perm...)), x)
}

// scalar is a constant of the recurrence's dtype; with shape, filled.
func (u *unroller) scalar(v float64, shape ...int) ir.ID {
	attrs := ir.MakeAttrs("dtype", ir.String(u.dt.String()), "value", ir.Float(v))
	if len(shape) > 0 {
		attrs = attrs.With("shape", ir.Ints(shape...))
	}
	return u.op(ir.OpConst, attrs)
}

// block returns row d of x [D, ...] as a tensor of shape rest.
func (u *unroller) block(x ir.ID, d int, rest ...int) ir.ID {
	return u.reshape(u.slice(x, 0, d, d+1), rest...)
}

// act applies an activation to x, after the clip when the op has one.
func (u *unroller) act(a rnnActivation, x ir.ID, clip float64) ir.ID {
	if clip > 0 {
		x = u.op(ir.OpClip, ir.MakeAttrs("min", ir.Float(-clip), "max", ir.Float(clip)), x)
	}
	switch a.name {
	case "sigmoid":
		return u.op(ir.OpSigmoid, nil, x)
	case "tanh":
		return u.op(ir.OpTanh, nil, x)
	case "relu":
		return u.op(ir.OpRelu, nil, x)
	case "leakyrelu":
		return u.op(ir.OpLeakyRelu, ir.MakeAttrs("alpha", ir.Float(a.alpha)), x)
	case "elu":
		return u.op(ir.OpElu, ir.MakeAttrs("alpha", ir.Float(a.alpha)), x)
	case "softplus":
		return u.op(ir.OpSoftplus, ir.MakeAttrs("beta", ir.Float(1), "threshold", ir.Float(20)), x)
	case "softsign":
		return u.op(ir.OpDiv, nil, x, u.add(u.op(ir.OpAbs, nil, x), u.scalar(1)))
	case "hardsigmoid":
		y := u.add(u.mul(x, u.scalar(a.alpha)), u.scalar(a.beta))
		return u.op(ir.OpClip, ir.MakeAttrs("min", ir.Float(0), "max", ir.Float(1)), y)
	case "affine":
		return u.add(u.mul(x, u.scalar(a.alpha)), u.scalar(a.beta))
	case "scaledtanh":
		return u.mul(u.op(ir.OpTanh, nil, u.mul(x, u.scalar(a.beta))), u.scalar(a.alpha))
	}
	u.err = fmt.Errorf("internal error: activation %q", a.name)
	return ir.NoID
}

// recurrentDoc is the rule text of the recurrent ops in docs/ONNX.md.
func recurrentDoc(k cellKind) string {
	common := "unrolled over the time steps into matmul, add, mul, slice, reshape, stack and the activations; direction forward, reverse or bidirectional; layout 0 or 1; B, initial_h optional; sequence_lens absent or a constant equal to the sequence length for every batch entry (padded sequences are refused); clip bounds the input of every activation; activations Sigmoid, Tanh, Relu, LeakyRelu, Elu, HardSigmoid, Softsign, Softplus, Affine, ScaledTanh with activation_alpha/beta consumed in order"
	switch k {
	case cellGRU:
		return common + "; linear_before_reset 0 or 1"
	case cellLSTM:
		return common + "; initial_c and the peepholes P optional; input_forget couples the forget gate as 1 - i"
	}
	return common
}

func emitRecurrent(k cellKind) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		return im.unrollRecurrent(n, k)
	}
}

// optionalIn returns input k of n as a kiln value, or NoID when absent.
func (im *importer) optionalIn(n *onnxpb.NodeProto, k int) (ir.ID, error) {
	if !has(n, k) {
		return ir.NoID, nil
	}
	return im.id(n, k)
}

// wantShape checks that the input named what has shape want.
func (im *importer) wantShape(id ir.ID, what string, want ...int) error {
	if got := im.shapeOf(id); !ir.Shape(got).Equal(ir.Shape(want)) {
		return fmt.Errorf("input %s has shape %v, expected %v", what, got, want)
	}
	return nil
}

func (im *importer) unrollRecurrent(n *onnxpb.NodeProto, k cellKind) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	xt := im.g.Type(x)
	if !xt.DType.IsFloat() {
		return nil, fmt.Errorf("input X is %s, expected a float tensor", xt.DType)
	}
	if len(xt.Shape) != 3 {
		return nil, fmt.Errorf("input X has rank %d, expected 3", len(xt.Shape))
	}
	layout := attrInt(n, "layout", 0)
	if layout != 0 && layout != 1 {
		return nil, fmt.Errorf("layout %d is not 0 or 1", layout)
	}
	u := &unroller{im: im, dt: xt.DType}
	if layout == 1 {
		x = u.transpose(x, 1, 0, 2)
	}
	T, B, I := xt.Shape[0], xt.Shape[1], xt.Shape[2]
	if layout == 1 {
		T, B = B, T
	}
	dirs := 1
	direction := attrString(n, "direction", "forward")
	reverse := direction == "reverse"
	switch direction {
	case "forward", "reverse":
	case "bidirectional":
		dirs = 2
	default:
		return nil, fmt.Errorf("direction %q is not forward, reverse or bidirectional", ir.Excerpt(direction))
	}
	w, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	r, err := im.id(n, 2)
	if err != nil {
		return nil, err
	}
	rs := im.shapeOf(r)
	if len(rs) != 3 {
		return nil, fmt.Errorf("input R has shape %v, expected [num_directions, %d*hidden_size, hidden_size]", rs, k.gates())
	}
	H := rs[2]
	if a := attr(n, "hidden_size"); a != nil && a.GetI() != int64(H) {
		return nil, fmt.Errorf("hidden_size is %d, but R has shape %v", a.GetI(), rs)
	}
	G := k.gates() * H
	if err := im.wantShape(w, "W", dirs, G, I); err != nil {
		return nil, err
	}
	if err := im.wantShape(r, "R", dirs, G, H); err != nil {
		return nil, err
	}
	bias, err := im.optionalIn(n, 3)
	if err != nil {
		return nil, err
	}
	if bias != ir.NoID {
		if err := im.wantShape(bias, "B", dirs, 2*G); err != nil {
			return nil, err
		}
	}
	if has(n, 4) {
		c, err := im.constIn(n, 4)
		if err != nil {
			return nil, fmt.Errorf("sequence_lens: %w", err)
		}
		for _, l := range c.ints() {
			if l != int64(T) {
				return nil, fmt.Errorf("sequence_lens holds %d, but only sequences of the full length %d are supported (padded sequences are not)", l, T)
			}
		}
		if c.n() != B {
			return nil, fmt.Errorf("sequence_lens has %d elements, expected the batch size %d", c.n(), B)
		}
	}
	// initial states are [D, B, H] (layout 1: [B, D, H]).
	state := func(k int, what string) (ir.ID, error) {
		id, err := im.optionalIn(n, k)
		if err != nil || id == ir.NoID {
			return id, err
		}
		want := []int{dirs, B, H}
		if layout == 1 {
			want = []int{B, dirs, H}
		}
		if err := im.wantShape(id, what, want...); err != nil {
			return ir.NoID, err
		}
		if layout == 1 {
			id = u.transpose(id, 1, 0, 2)
		}
		return id, nil
	}
	h0, err := state(5, "initial_h")
	if err != nil {
		return nil, err
	}
	var c0, peep ir.ID = ir.NoID, ir.NoID
	inputForget := false
	linearBeforeReset := false
	switch k {
	case cellLSTM:
		if c0, err = state(6, "initial_c"); err != nil {
			return nil, err
		}
		if peep, err = im.optionalIn(n, 7); err != nil {
			return nil, err
		}
		if peep != ir.NoID {
			if err := im.wantShape(peep, "P", dirs, 3*H); err != nil {
				return nil, err
			}
		}
		inputForget = attrInt(n, "input_forget", 0) != 0
	case cellGRU:
		linearBeforeReset = attrInt(n, "linear_before_reset", 0) != 0
	}
	clip := 0.0
	if a := attr(n, "clip"); a != nil {
		if clip = float64(a.GetF()); !(clip > 0) {
			return nil, fmt.Errorf("clip %g is not positive", clip)
		}
	}
	acts, err := recurrentActivations(n, k, dirs)
	if err != nil {
		return nil, err
	}
	flatX := u.reshape(x, T*B, I)
	var ys, hs, cs []ir.ID
	for d := range dirs {
		wd := u.block(w, d, G, I)
		rd := u.block(r, d, G, H)
		// The input projection of every step at once: [T*B, G].
		xp := u.matmulT(flatX, wd)
		var wb, rb ir.ID = ir.NoID, ir.NoID
		if bias != ir.NoID {
			bd := u.block(bias, d, 2*G)
			wb, rb = u.slice(bd, 0, 0, G), u.slice(bd, 0, G, 2*G)
			if k == cellGRU && linearBeforeReset {
				// Rb_h stays inside r * (h @ R_h^T + Rb_h): Rb is added to the
				// recurrent projection at every step.
				xp = u.add(xp, wb)
			} else {
				xp = u.add(xp, u.add(wb, rb))
			}
		}
		xp = u.reshape(xp, T, B, G)
		h := u.scalar(0, B, H)
		if h0 != ir.NoID {
			h = u.block(h0, d, B, H)
		}
		c := ir.NoID
		if k == cellLSTM {
			c = u.scalar(0, B, H)
			if c0 != ir.NoID {
				c = u.block(c0, d, B, H)
			}
		}
		var pi, po, pf ir.ID
		if peep != ir.NoID {
			pd := u.block(peep, d, 3*H)
			pi, po, pf = u.slice(pd, 0, 0, H), u.slice(pd, 0, H, 2*H), u.slice(pd, 0, 2*H, 3*H)
		}
		var rzr, rh ir.ID
		if k == cellGRU && !linearBeforeReset {
			rzr, rh = u.slice(rd, 0, 0, 2*H), u.slice(rd, 0, 2*H, 3*H)
		}
		a := acts[d]
		steps := make([]ir.ID, T)
		for s := range T {
			t := s
			if reverse || d == 1 {
				t = T - 1 - s
			}
			xt := u.reshape(u.slice(xp, 0, t, t+1), B, G)
			gate := func(v ir.ID, j int) ir.ID { return u.slice(v, 1, j*H, (j+1)*H) }
			switch k {
			case cellRNN:
				h = u.act(a[0], u.add(xt, u.matmulT(h, rd)), clip)
			case cellLSTM:
				// Gates in ONNX's order i, o, f, c.
				g := u.add(xt, u.matmulT(h, rd))
				iPre, oPre, fPre, cPre := gate(g, 0), gate(g, 1), gate(g, 2), gate(g, 3)
				if peep != ir.NoID {
					iPre = u.add(iPre, u.mul(pi, c))
					fPre = u.add(fPre, u.mul(pf, c))
				}
				i := u.act(a[0], iPre, clip)
				var f ir.ID
				if inputForget {
					f = u.op(ir.OpSub, nil, u.scalar(1), i)
				} else {
					f = u.act(a[0], fPre, clip)
				}
				c = u.add(u.mul(f, c), u.mul(i, u.act(a[1], cPre, clip)))
				if peep != ir.NoID {
					oPre = u.add(oPre, u.mul(po, c))
				}
				h = u.mul(u.act(a[0], oPre, clip), u.act(a[2], c, clip))
			case cellGRU:
				// Gates in ONNX's order z, r, h.
				var z, rg, hh ir.ID
				if linearBeforeReset {
					rec := u.matmulT(h, rd)
					if rb != ir.NoID {
						rec = u.add(rec, rb)
					}
					z = u.act(a[0], u.add(gate(xt, 0), gate(rec, 0)), clip)
					rg = u.act(a[0], u.add(gate(xt, 1), gate(rec, 1)), clip)
					hh = u.act(a[1], u.add(gate(xt, 2), u.mul(rg, gate(rec, 2))), clip)
				} else {
					rec := u.matmulT(h, rzr)
					z = u.act(a[0], u.add(gate(xt, 0), gate(rec, 0)), clip)
					rg = u.act(a[0], u.add(gate(xt, 1), gate(rec, 1)), clip)
					hh = u.act(a[1], u.add(gate(xt, 2), u.matmulT(u.mul(rg, h), rh)), clip)
				}
				// H = (1 - z) * hh + z * H_prev
				h = u.add(u.mul(u.op(ir.OpSub, nil, u.scalar(1), z), hh), u.mul(z, h))
			}
			steps[t] = h
		}
		ys = append(ys, u.op(ir.OpStack, ir.MakeAttrs("axis", ir.Int(0)), steps...))
		hs = append(hs, h)
		cs = append(cs, c)
	}
	// Y [T, D, B, H], Y_h and Y_c [D, B, H]; layout 1: [B, T, D, H] and [B, D, H].
	// stack joins the directions along a new axis; one direction is a
	// reshape.
	stack := func(axis int, v []ir.ID) ir.ID {
		if len(v) == 1 && u.err == nil {
			s := append([]int(nil), im.shapeOf(v[0])...)
			return u.reshape(v[0], slices.Insert(s, axis, 1)...)
		}
		return u.op(ir.OpStack, ir.MakeAttrs("axis", ir.Int(axis)), v...)
	}
	y := stack(1, ys)
	final := func(v []ir.ID) ir.ID {
		out := stack(0, v)
		if layout == 1 {
			out = u.transpose(out, 1, 0, 2)
		}
		return out
	}
	if layout == 1 {
		y = u.transpose(y, 2, 0, 1, 3)
	}
	outs := []ir.ID{y}
	if len(n.Output) > 1 && n.Output[1] != "" {
		outs = append(outs, final(hs))
	} else {
		outs = append(outs, ir.NoID)
	}
	if k == cellLSTM && len(n.Output) > 2 && n.Output[2] != "" {
		outs = append(outs, final(cs))
	}
	if u.err != nil {
		return nil, u.err
	}
	vals := make([]*val, len(outs))
	for j, id := range outs {
		if id != ir.NoID {
			vals[j] = &val{id: id}
		}
	}
	return vals, nil
}
