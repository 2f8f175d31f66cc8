package ir

import (
	"fmt"
	"strconv"
)

// Emitter appends ops to a graph for gradient rules and passes. It keeps the
// first error and turns every later call into a no-op, so a rule reads as
// straight-line code and is checked once at the end.
type Emitter struct {
	G      *Graph
	Prefix string // name prefix of emitted values; "" gives t<N> names
	err    error
}

// NewEmitter returns an emitter that appends to g.
func NewEmitter(g *Graph, prefix string) *Emitter { return &Emitter{G: g, Prefix: prefix} }

// Err returns the first error an emitted op produced.
func (e *Emitter) Err() error { return e.err }

// Op appends op(args) with attrs and returns its id, or NoID after an error.
func (e *Emitter) Op(op Op, attrs Attrs, args ...ID) ID {
	if e.err != nil {
		return NoID
	}
	for _, a := range args {
		if a == NoID {
			e.err = fmt.Errorf("%s: missing argument", op)
			return NoID
		}
	}
	name := ""
	if e.Prefix != "" {
		name = e.G.UniqueName(e.Prefix + strconv.Itoa(len(e.G.Values)))
	}
	id, err := e.G.Add(name, op, attrs, args...)
	if err != nil {
		e.err = err
		return NoID
	}
	return id
}

// Type returns the type of value id.
func (e *Emitter) Type(id ID) Type {
	if id == NoID {
		return Type{}
	}
	return e.G.Values[id].Type
}

// Scalar appends a scalar constant of dtype dt.
func (e *Emitter) Scalar(v float64, dt DType) ID {
	return e.Op(OpConst, MakeAttrs("dtype", String(dt.String()), "value", Float(v)))
}

// Fill appends a constant of type t with every element v.
func (e *Emitter) Fill(v float64, t Type) ID {
	return e.Op(OpConst, MakeAttrs("dtype", String(t.DType.String()), "shape", Ints(t.Shape...), "value", Float(v)))
}

// Binary helpers used by the gradient rules.
func (e *Emitter) add(a, b ID) ID { return e.Op(OpAdd, nil, a, b) }
func (e *Emitter) sub(a, b ID) ID { return e.Op(OpSub, nil, a, b) }
func (e *Emitter) mul(a, b ID) ID { return e.Op(OpMul, nil, a, b) }
func (e *Emitter) div(a, b ID) ID { return e.Op(OpDiv, nil, a, b) }
func (e *Emitter) neg(a ID) ID    { return e.Op(OpNeg, nil, a) }

// Add appends a + b; autodiff uses it to accumulate gradients.
func (e *Emitter) Add(a, b ID) ID { return e.add(a, b) }

// Reshape appends x reshaped to s, or returns x when it already has shape s.
func (e *Emitter) Reshape(x ID, s Shape) ID {
	if x == NoID || e.Type(x).Shape.Equal(s) {
		return x
	}
	return e.Op(OpReshape, MakeAttrs("shape", Ints(s...)), x)
}

// SumTo sums x over its broadcast axes so that it has shape target: the
// gradient of broadcasting target to x's shape.
func (e *Emitter) SumTo(x ID, target Shape) ID {
	if x == NoID {
		return NoID
	}
	xs := e.Type(x).Shape
	if xs.Equal(target) {
		return x
	}
	lead := len(xs) - len(target)
	var axes []int
	onlyLead := true
	for i := range xs {
		if i < lead {
			axes = append(axes, i)
		} else if target[i-lead] == 1 && xs[i] != 1 {
			axes = append(axes, i)
			onlyLead = false
		}
	}
	if len(axes) == 0 {
		return e.Reshape(x, target)
	}
	s := e.Op(OpSum, MakeAttrs("axes", Ints(axes...), "keepdims", BoolAttr(!onlyLead)), x)
	return e.Reshape(s, target)
}

// Backprop is reverse-mode differentiation over the values lo..hi, the
// loop of the autodiff pass and of gradient ops differentiated as their
// composite: grads[v] is the gradient with respect to value v, NoID while
// none has reached it. From hi down to lo, each value with a gradient
// (and need(v), when need is not nil) has its op's rule append the
// gradients of its arguments, which are added into grads in that order,
// so a value used several times sums its users' contributions latest user
// first. An argument with need false gets none; an op with no rule passes
// none on, and one whose rule is missing on purpose (NoGrad) is an error
// naming the value and its op. grads must have an entry for every value
// up to hi.
func (e *Emitter) Backprop(grads []ID, lo, hi ID, need func(ID) bool) error {
	for id := hi; id >= lo; id-- {
		dy := grads[id]
		v := e.G.Values[id]
		if dy == NoID || (need != nil && !need(id)) || v.Op.IsLeaf() {
			continue
		}
		if !v.Op.Differentiable() {
			if v.Op.Info().NoGrad == "" {
				continue // no gradient flows through it (a constant, a comparison)
			}
			return fmt.Errorf("cannot differentiate through %s (%s): %s", e.G.NameOf(id), v.Op, v.Op.Info().NoGrad)
		}
		ins := v.Op.Info().Grad(e, id, dy)
		if err := e.Err(); err != nil {
			return fmt.Errorf("gradient of %s (%s): %v", e.G.NameOf(id), v.Op, err)
		}
		for j, a := range v.Args {
			if ins[j] == NoID || (need != nil && !need(a)) {
				continue
			}
			if grads[a] == NoID {
				grads[a] = ins[j]
			} else {
				grads[a] = e.add(grads[a], ins[j])
			}
		}
	}
	return nil
}

// compositeGrad returns the gradient with respect to each of inputs of
// the value build appends, given dy, the gradient with respect to that
// value: build appends the ops of a composite (reading the inputs and
// values before them), which Backprop then differentiates. A gradient op
// whose kernel computes such a composite in one pass uses it as its own
// rule. An input no gradient reaches gets NoID.
func (e *Emitter) compositeGrad(inputs []ID, dy ID, build func() ID) []ID {
	out := make([]ID, len(inputs))
	for i := range out {
		out[i] = NoID
	}
	first := ID(len(e.G.Values))
	y := build()
	if e.err != nil {
		return out
	}
	grads := make([]ID, len(e.G.Values))
	for i := range grads {
		grads[i] = NoID
	}
	grads[y] = dy
	if err := e.Backprop(grads, first, y, nil); err != nil {
		e.err = err
		return out
	}
	for i, in := range inputs {
		out[i] = grads[in]
	}
	return out
}

func (e *Emitter) args(y ID) []ID { return e.G.Values[y].Args }
func (e *Emitter) shape(x ID) Shape {
	return e.Type(x).Shape
}
func (e *Emitter) one(like ID) ID { return e.Scalar(1, e.Type(like).DType) }

func gradAdd(e *Emitter, y, dy ID) []ID {
	a, b := e.args(y)[0], e.args(y)[1]
	return []ID{e.SumTo(dy, e.shape(a)), e.SumTo(dy, e.shape(b))}
}

func gradSub(e *Emitter, y, dy ID) []ID {
	a, b := e.args(y)[0], e.args(y)[1]
	return []ID{e.SumTo(dy, e.shape(a)), e.SumTo(e.neg(dy), e.shape(b))}
}

func gradMul(e *Emitter, y, dy ID) []ID {
	a, b := e.args(y)[0], e.args(y)[1]
	return []ID{e.SumTo(e.mul(dy, b), e.shape(a)), e.SumTo(e.mul(dy, a), e.shape(b))}
}

func gradDiv(e *Emitter, y, dy ID) []ID {
	// y = a/b: da = dy/b, db = -dy*a/b^2 = -da*y.
	a, b := e.args(y)[0], e.args(y)[1]
	da := e.div(dy, b)
	return []ID{e.SumTo(da, e.shape(a)), e.SumTo(e.neg(e.mul(da, y)), e.shape(b))}
}

func gradNeg(e *Emitter, _, dy ID) []ID { return []ID{e.neg(dy)} }
func gradExp(e *Emitter, y, dy ID) []ID { return []ID{e.mul(dy, y)} }
func gradLog(e *Emitter, y, dy ID) []ID { return []ID{e.div(dy, e.args(y)[0])} }

func gradSqrt(e *Emitter, y, dy ID) []ID {
	// d sqrt(x) = dy / (2 sqrt(x)).
	return []ID{e.div(e.mul(dy, e.Scalar(0.5, e.Type(y).DType)), y)}
}

func gradTanh(e *Emitter, y, dy ID) []ID {
	return []ID{e.mul(dy, e.sub(e.one(y), e.mul(y, y)))}
}

func gradSigmoid(e *Emitter, y, dy ID) []ID {
	return []ID{e.mul(dy, e.mul(y, e.sub(e.one(y), y)))}
}

func gradRelu(e *Emitter, y, dy ID) []ID {
	// relu(x) <= 0 exactly where x <= 0 (relu gives +0 for x <= 0 and -0,
	// and keeps NaN), so the gradient tests the result instead of x (as
	// PyTorch's threshold_backward of the result): the bits are
	// the same, x need not live until the backward, and relu can then be
	// fused into the op that computes x (a matmul's epilogue).
	return []ID{e.Op(OpReluGrad, nil, dy, y)}
}

func gradReluGrad(e *Emitter, y, dy ID) []ID {
	// relu_grad(g, x) is linear in g with slope 0 or 1; its derivative in x
	// is 0 wherever it exists.
	return []ID{e.Op(OpReluGrad, nil, dy, e.args(y)[1]), NoID}
}

// transposeLast2 swaps the last two axes of x.
func (e *Emitter) transposeLast2(x ID) ID {
	r := len(e.shape(x))
	perm := make([]int, r)
	for i := range perm {
		perm[i] = i
	}
	perm[r-2], perm[r-1] = perm[r-1], perm[r-2]
	return e.Op(OpTranspose, MakeAttrs("perm", Ints(perm...)), x)
}

func gradMatmul(e *Emitter, y, dy ID) []ID {
	// Promote 1-D operands to matrices, take the matrix gradients, sum over
	// broadcast batch dims and drop the promoted axes again. With y =
	// op(a)·op(b) (op(x) = xᵀ where transpose_x is set), d op(a) = dy·op(b)ᵀ
	// and d op(b) = op(a)ᵀ·dy; a transposed operand's gradient is the
	// transpose of that, written as one product: da = op(b)·dyᵀ, db =
	// dyᵀ·op(a). The backward spells each transpose as a transpose op; the
	// simplify pass folds those into the products' attributes.
	a, b := e.args(y)[0], e.args(y)[1]
	ta, tb := MatmulTransposes(e.G.Values[y].Attrs)
	as, bs := e.shape(a), e.shape(b)
	a2, b2 := a, b
	if len(as) == 1 {
		a2 = e.Reshape(a, Shape{1, as[0]})
	}
	if len(bs) == 1 {
		b2 = e.Reshape(b, Shape{bs[0], 1})
	}
	oa, ob, err := MatmulOperands(e.shape(a2), e.shape(b2), e.G.Values[y].Attrs)
	if err != nil {
		e.err = err
		return []ID{NoID, NoID}
	}
	ys, err := MatmulShape(oa, ob)
	if err != nil {
		e.err = err
		return []ID{NoID, NoID}
	}
	dy2 := e.Reshape(dy, ys)
	// t returns x, or x with its last two axes swapped when swap is set.
	t := func(x ID, swap bool) ID {
		if swap {
			return e.transposeLast2(x)
		}
		return x
	}
	var da, db ID
	if ta {
		da = e.Op(OpMatmul, nil, t(b2, tb), t(dy2, true))
	} else {
		da = e.Op(OpMatmul, nil, dy2, t(b2, !tb))
	}
	if tb {
		db = e.Op(OpMatmul, nil, t(dy2, true), t(a2, ta))
	} else {
		db = e.Op(OpMatmul, nil, t(a2, !ta), dy2)
	}
	da = e.Reshape(e.SumTo(da, e.shape(a2)), as)
	db = e.Reshape(e.SumTo(db, e.shape(b2)), bs)
	return []ID{da, db}
}

func gradTranspose(e *Emitter, y, dy ID) []ID {
	x := e.args(y)[0]
	p, err := Perm(e.G.Values[y].Attrs, len(e.shape(x)))
	if err != nil {
		e.err = err
		return []ID{NoID}
	}
	inv := make([]int, len(p))
	for i, j := range p {
		inv[j] = i
	}
	return []ID{e.Op(OpTranspose, MakeAttrs("perm", Ints(inv...)), dy)}
}

func gradReshape(e *Emitter, y, dy ID) []ID {
	return []ID{e.Reshape(dy, e.shape(e.args(y)[0]))}
}

func gradBroadcastTo(e *Emitter, y, dy ID) []ID {
	return []ID{e.SumTo(dy, e.shape(e.args(y)[0]))}
}

// unreduce broadcasts dy, the gradient of a reduction of x, back to x's shape.
func (e *Emitter) unreduce(y, dy ID) ID {
	x := e.args(y)[0]
	xs := e.shape(x)
	attrs := e.G.Values[y].Attrs
	axes, err := ReduceAxes(attrs, len(xs))
	if err != nil {
		e.err = err
		return NoID
	}
	dk := e.Reshape(dy, ReducedShape(xs, axes, true))
	if e.shape(dk).Equal(xs) {
		return dk
	}
	return e.Op(OpBroadcastTo, MakeAttrs("shape", Ints(xs...)), dk)
}

func gradSum(e *Emitter, y, dy ID) []ID { return []ID{e.unreduce(y, dy)} }

func gradMean(e *Emitter, y, dy ID) []ID {
	x := e.args(y)[0]
	n := e.shape(x).NumElements() / max(1, e.shape(y).NumElements())
	scaled := e.mul(dy, e.Scalar(1/float64(n), e.Type(y).DType))
	return []ID{e.unreduce(y, scaled)}
}

func gradSoftmax(e *Emitter, y, dy ID) []ID {
	// dx = y * (dy - sum(dy*y, axis)).
	axis := e.G.Values[y].Attrs.Int("axis", -1)
	s := e.Op(OpSum, MakeAttrs("axes", Ints(axis), "keepdims", BoolAttr(true)), e.mul(dy, y))
	return []ID{e.mul(y, e.sub(dy, s))}
}

func gradLogSoftmax(e *Emitter, y, dy ID) []ID {
	// dx = dy - softmax(x) * sum(dy, axis), with softmax(x) = exp(y).
	axis := e.G.Values[y].Attrs.Int("axis", -1)
	s := e.Op(OpSum, MakeAttrs("axes", Ints(axis), "keepdims", BoolAttr(true)), dy)
	return []ID{e.sub(dy, e.mul(e.Op(OpExp, nil, y), s))}
}
