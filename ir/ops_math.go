package ir

import (
	"fmt"
	"math"
)

// Elementwise math: unary functions, clip, pow, binary min/max, floor division, comparisons and logic.

func mathOps() []opRow {
	unaryF := func(op Op, name, doc string, grad func(*Emitter, ID, ID) []ID) opRow {
		return opRow{op, OpInfo{Name: name, Args: []string{"x"}, Class: ClassElementwise, Doc: doc, Infer: inferUnaryFloat, Grad: grad}}
	}
	binary := func(op Op, name, doc string, grad func(*Emitter, ID, ID) []ID) opRow {
		return opRow{op, OpInfo{Name: name, Args: []string{"a", "b"}, Class: ClassElementwise, Doc: doc, Infer: inferBroadcast, Grad: grad}}
	}
	return []opRow{
		{OpAbs, OpInfo{Name: "abs", Args: []string{"x"}, Class: ClassElementwise, Infer: inferUnaryNumeric, Grad: gradAbs,
			Doc: "the absolute value of x (integers wrap: abs of the most negative value is itself); gradient sign(x), 0 at 0"}},
		{OpSign, OpInfo{Name: "sign", Args: []string{"x"}, Class: ClassElementwise, Infer: inferUnaryNumeric, Grad: gradZeros,
			Doc: "-1, 0 or 1 as x is negative, zero or positive (NaN for NaN); zero gradient"}},
		unaryF(OpRsqrt, "rsqrt", "1 / sqrt(x); +Inf at 0", gradRsqrt),
		{OpSquare, OpInfo{Name: "square", Args: []string{"x"}, Class: ClassElementwise, Infer: inferUnaryNumeric, Grad: gradSquare,
			Doc: "x * x (integers wrap)"}},
		unaryF(OpReciprocal, "reciprocal", "1 / x; +Inf at 0", gradReciprocal),
		unaryF(OpLog2, "log2", "base-2 logarithm", gradLog2),
		unaryF(OpLog10, "log10", "base-10 logarithm", gradLog10),
		unaryF(OpLog1p, "log1p", "log(1 + x), accurate near 0", gradLog1p),
		unaryF(OpExpm1, "expm1", "e^x - 1, accurate near 0", gradExpm1),
		unaryF(OpSin, "sin", "sine (radians)", gradSin),
		unaryF(OpCos, "cos", "cosine (radians)", gradCos),
		unaryF(OpErf, "erf", "the error function 2/sqrt(pi) * integral of e^-t^2 from 0 to x", gradErf),
		unaryF(OpFloor, "floor", "the largest integer <= x; zero gradient", gradZeros),
		unaryF(OpCeil, "ceil", "the smallest integer >= x; zero gradient", gradZeros),
		unaryF(OpRound, "round", "the nearest integer, halves to even (torch.round); zero gradient", gradZeros),
		{OpClip, OpInfo{Name: "clip", Args: []string{"x"}, Class: ClassElementwise, Infer: inferClip, Grad: gradClip,
			Doc: "x limited to [min, max] (torch.clamp; NaN stays NaN); gradient dy where min <= x <= max, else 0",
			Attrs: []AttrSpec{
				{Name: "max", Kind: AttrFloat, Doc: "upper bound; absent: none (at least one of min and max is required)"},
				{Name: "min", Kind: AttrFloat, Doc: "lower bound, at most max; absent: none"},
			}}},
		{OpPow, OpInfo{Name: "pow", Args: []string{"a", "b"}, Optional: 1, Class: ClassElementwise, Infer: inferPow, Grad: gradPow,
			Doc: "a^b with NumPy broadcasting, or a^exponent; floats only (a negative base needs a whole exponent); both gradients as PyTorch defines them",
			Attrs: []AttrSpec{
				{Name: "exponent", Kind: AttrFloat, Doc: "a scalar exponent, given instead of the argument b"},
			}}},
		binary(OpMaximum, "maximum", "the larger of a and b (NaN if either is NaN); a tie sends half the gradient to each", gradMaximum),
		binary(OpMinimum, "minimum", "the smaller of a and b (NaN if either is NaN); a tie sends half the gradient to each", gradMinimum),
		binary(OpFloorDiv, "floor_div", "a / b rounded toward -Inf (Python //, torch.floor_divide); integer division by zero is an error; zero gradient", gradZeros),
		binary(OpMod, "mod", "a - b * floor_div(a, b): the remainder with the sign of b (Python %, torch.remainder); integer division by zero is an error; gradients dy and -dy * floor_div(a, b)", gradMod),
	}
}

func inferClip(args []Type, a Attrs) (Type, error) {
	t, err := inferUnaryNumeric(args, a)
	if err != nil {
		return t, err
	}
	lo, hasLo := a.Get("min")
	hi, hasHi := a.Get("max")
	if !hasLo && !hasHi {
		return Type{}, fmt.Errorf("needs min, max or both")
	}
	for _, b := range []struct {
		name string
		v    AttrValue
		ok   bool
	}{{"min", lo, hasLo}, {"max", hi, hasHi}} {
		if !b.ok {
			continue
		}
		f, _ := b.v.AsFloat()
		if math.IsNaN(f) {
			return Type{}, fmt.Errorf("%s is NaN", b.name)
		}
		if t.DType.IsInt() {
			if err := fitsDType(f, t.DType); err != nil {
				return Type{}, fmt.Errorf("%s for %s: %v", b.name, args[0], err)
			}
		}
	}
	if hasLo && hasHi {
		l, _ := lo.AsFloat()
		h, _ := hi.AsFloat()
		if l > h {
			return Type{}, fmt.Errorf("min %s is greater than max %s", formatFloat(l), formatFloat(h))
		}
	}
	return t, nil
}

func inferPow(args []Type, a Attrs) (Type, error) {
	_, hasE := a.Get("exponent")
	switch {
	case len(args) == 2 && hasE:
		return Type{}, fmt.Errorf("takes either an exponent argument b or the attribute exponent, not both")
	case len(args) == 2:
		return inferBroadcastFloat(args, a)
	case !hasE:
		return Type{}, fmt.Errorf("needs an exponent: a second argument b or the attribute exponent")
	}
	return inferUnaryFloat(args, a)
}

// Gradient rules. clip, maximum and minimum choose with comparisons and
// where, as PyTorch does; pow's masks are built from sign, which is exact for
// finite values: sign(x) is 0 exactly where x == 0.

func (e *Emitter) sign(x ID) ID   { return e.Op(OpSign, nil, x) }
func (e *Emitter) square(x ID) ID { return e.Op(OpSquare, nil, x) }

// atLeast0 returns 1 where x >= 0 and 0 where x < 0: sign(sign(x) + 1).
func (e *Emitter) atLeast0(x ID) ID { return e.sign(e.add(e.sign(x), e.one(x))) }

// gradZeros gives every argument a zero gradient of its own type, as
// PyTorch does for floor, ceil, round, sign and floor_divide: gradients keep
// flowing, as zeros.
func gradZeros(e *Emitter, y, _ ID) []ID {
	args := e.args(y)
	out := make([]ID, len(args))
	for i, a := range args {
		out[i] = e.Fill(0, e.Type(a))
	}
	return out
}

// floatGrad reports whether y is a float value; integer results pass no
// gradient.
func floatGrad(e *Emitter, y ID) bool { return e.Type(y).DType.IsFloat() }

func gradAbs(e *Emitter, y, dy ID) []ID {
	if !floatGrad(e, y) {
		return []ID{NoID}
	}
	return []ID{e.mul(dy, e.sign(e.args(y)[0]))}
}

func gradRsqrt(e *Emitter, y, dy ID) []ID {
	// d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3.
	y3 := e.mul(e.mul(y, y), y)
	return []ID{e.mul(e.mul(dy, y3), e.Scalar(-0.5, e.Type(y).DType))}
}

func gradSquare(e *Emitter, y, dy ID) []ID {
	if !floatGrad(e, y) {
		return []ID{NoID}
	}
	x := e.args(y)[0]
	return []ID{e.mul(dy, e.mul(x, e.Scalar(2, e.Type(y).DType)))}
}

func gradReciprocal(e *Emitter, y, dy ID) []ID {
	return []ID{e.neg(e.mul(dy, e.mul(y, y)))}
}

func gradLog2(e *Emitter, y, dy ID) []ID {
	return []ID{e.div(dy, e.mul(e.args(y)[0], e.Scalar(math.Ln2, e.Type(y).DType)))}
}

func gradLog10(e *Emitter, y, dy ID) []ID {
	return []ID{e.div(dy, e.mul(e.args(y)[0], e.Scalar(math.Ln10, e.Type(y).DType)))}
}

func gradLog1p(e *Emitter, y, dy ID) []ID {
	x := e.args(y)[0]
	return []ID{e.div(dy, e.add(x, e.one(x)))}
}

func gradExpm1(e *Emitter, y, dy ID) []ID {
	return []ID{e.mul(dy, e.add(y, e.one(y)))}
}

func gradSin(e *Emitter, y, dy ID) []ID {
	return []ID{e.mul(dy, e.Op(OpCos, nil, e.args(y)[0]))}
}

func gradCos(e *Emitter, y, dy ID) []ID {
	return []ID{e.mul(dy, e.neg(e.Op(OpSin, nil, e.args(y)[0])))}
}

func gradErf(e *Emitter, y, dy ID) []ID {
	// d erf(x) = 2/sqrt(pi) e^-x^2.
	x := e.args(y)[0]
	g := e.mul(e.Op(OpExp, nil, e.neg(e.square(x))), e.Scalar(2/math.SqrtPi, e.Type(y).DType))
	return []ID{e.mul(dy, g)}
}

func gradClip(e *Emitter, y, dy ID) []ID {
	// dy where min <= x <= max (inclusive, as torch.clamp), else 0; a NaN x
	// compares false and gets 0, as in PyTorch. The bounds are rounded to
	// x's dtype as the kernel rounds them, so the mask agrees with the
	// forward pass at the boundaries.
	if !floatGrad(e, y) {
		return []ID{NoID}
	}
	x := e.args(y)[0]
	attrs := e.G.Values[y].Attrs
	dt := e.Type(y).DType
	in := NoID
	and := func(m ID) {
		if in == NoID {
			in = m
		} else {
			in = e.Op(OpLogicalAnd, nil, in, m)
		}
	}
	if lo, ok := attrs.Get("min"); ok {
		f, _ := lo.AsFloat()
		and(e.Op(OpGreaterEqual, nil, x, e.Scalar(f, dt)))
	}
	if hi, ok := attrs.Get("max"); ok {
		f, _ := hi.AsFloat()
		and(e.Op(OpLessEqual, nil, x, e.Scalar(f, dt)))
	}
	return []ID{e.Op(OpWhere, nil, in, dy, e.Scalar(0, dt))}
}

func gradPow(e *Emitter, y, dy ID) []ID {
	args := e.args(y)
	a := args[0]
	dt := e.Type(y).DType
	if len(args) == 1 {
		// y = a^E: da = dy * E * a^(E-1); zero when E == 0, as PyTorch.
		ex := e.G.Values[y].Attrs.Float("exponent", 0)
		switch ex {
		case 0:
			return []ID{e.Fill(0, e.Type(a))}
		case 1:
			return []ID{dy}
		case 2:
			return []ID{e.mul(dy, e.mul(a, e.Scalar(2, dt)))}
		}
		p := e.Op(OpPow, MakeAttrs("exponent", Float(ex-1)), a)
		return []ID{e.mul(dy, e.mul(p, e.Scalar(ex, dt)))}
	}
	b := args[1]
	one := e.one(y)
	// da = dy * b * a^(b-1), and 0 where b == 0 (PyTorch's mask, which
	// avoids 0 * 0^-1 = NaN at a == 0). The exponent b - [b != 0] is b - 1
	// where b != 0 and 0 where b == 0, so there the power is 1 and the
	// product 0, with no NaN to mask.
	nz := e.square(e.sign(b))
	da := e.mul(dy, e.mul(b, e.Op(OpPow, nil, a, e.sub(b, nz))))
	// db = dy * a^b * log(a), and 0 where a == 0 and b >= 0 (PyTorch's mask:
	// the limit, where log(0) * 0^b would give NaN or -Inf). Adding the mask
	// to a inside the log turns log(0) into log(1) = 0 there and leaves a
	// unchanged elsewhere; a == 0 with b < 0 keeps y * log(a) = -Inf as
	// PyTorch does.
	isZero := e.sub(one, e.square(e.sign(a)))
	mask := e.mul(isZero, e.atLeast0(b))
	db := e.mul(dy, e.mul(y, e.Op(OpLog, nil, e.add(a, mask))))
	return []ID{e.SumTo(da, e.shape(a)), e.SumTo(db, e.shape(b))}
}

// gradMaxMin is the gradient of maximum (larger = true) or minimum, as
// PyTorch's: half of dy to each argument where they tie, all of dy to the
// one chosen, none to the other (where either is NaN, both get dy).
func gradMaxMin(e *Emitter, y, dy ID, larger bool) []ID {
	if !floatGrad(e, y) {
		return []ID{NoID, NoID}
	}
	a, b := e.args(y)[0], e.args(y)[1]
	dt := e.Type(y).DType
	loses := OpLess // a loses to b under maximum when a < b
	if !larger {
		loses = OpGreater
	}
	zero := e.Scalar(0, dt)
	half := e.mul(dy, e.Scalar(0.5, dt))
	tie := e.Op(OpEqual, nil, a, b)
	da := e.Op(OpWhere, nil, tie, half, e.Op(OpWhere, nil, e.Op(loses, nil, a, b), zero, dy))
	db := e.Op(OpWhere, nil, tie, half, e.Op(OpWhere, nil, e.Op(loses, nil, b, a), zero, dy))
	return []ID{e.SumTo(da, e.shape(a)), e.SumTo(db, e.shape(b))}
}

func gradMaximum(e *Emitter, y, dy ID) []ID { return gradMaxMin(e, y, dy, true) }
func gradMinimum(e *Emitter, y, dy ID) []ID { return gradMaxMin(e, y, dy, false) }

func gradMod(e *Emitter, y, dy ID) []ID {
	// y = a - b * floor_div(a, b): da = dy, db = -dy * floor_div(a, b).
	if !floatGrad(e, y) {
		return []ID{NoID, NoID}
	}
	a, b := e.args(y)[0], e.args(y)[1]
	q := e.Op(OpFloorDiv, nil, a, b)
	return []ID{e.SumTo(dy, e.shape(a)), e.SumTo(e.neg(e.mul(dy, q)), e.shape(b))}
}
