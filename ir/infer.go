package ir

import (
	"fmt"
	"math"
)

func sameDType(args []Type) error {
	for _, t := range args[1:] {
		if t.DType != args[0].DType {
			return fmt.Errorf("dtype mismatch: %s and %s", args[0], t)
		}
	}
	return nil
}

func inferBroadcast(args []Type, _ Attrs) (Type, error) {
	if err := sameDType(args); err != nil {
		return Type{}, err
	}
	if args[0].DType == Bool {
		return Type{}, fmt.Errorf("expected numeric operands, found %s", args[0])
	}
	s, ok := BroadcastShapes(args[0].Shape, args[1].Shape)
	if !ok {
		return Type{}, fmt.Errorf("incompatible shapes %s and %s (they do not broadcast)", args[0], args[1])
	}
	return Type{args[0].DType, s}, nil
}

func inferBroadcastFloat(args []Type, a Attrs) (Type, error) {
	if !args[0].DType.IsFloat() {
		return Type{}, fmt.Errorf("expected float operands (f32 or f64), found %s", args[0])
	}
	return inferBroadcast(args, a)
}

func inferUnaryNumeric(args []Type, _ Attrs) (Type, error) {
	if args[0].DType == Bool {
		return Type{}, fmt.Errorf("expected a numeric operand, found %s", args[0])
	}
	return Type{args[0].DType, args[0].Shape.Clone()}, nil
}

func inferUnaryFloat(args []Type, _ Attrs) (Type, error) {
	if !args[0].DType.IsFloat() {
		return Type{}, fmt.Errorf("expected a float operand (f32 or f64), found %s", args[0])
	}
	return Type{args[0].DType, args[0].Shape.Clone()}, nil
}

func inferSameFloat(args []Type, a Attrs) (Type, error) {
	for _, t := range args {
		if !t.Equal(args[0]) {
			return Type{}, fmt.Errorf("expected operands of one type, found %s and %s", args[0], t)
		}
	}
	return inferUnaryFloat(args, a)
}

// MatmulShape returns the result shape of matmul(a, b) under NumPy rules,
// with the batch dims broadcast.
func MatmulShape(a, b Shape) (Shape, error) {
	if len(a) == 0 || len(b) == 0 {
		return nil, fmt.Errorf("operands must have rank >= 1, found %s and %s", a, b)
	}
	a2, b2 := a, b
	if len(a) == 1 {
		a2 = Shape{1, a[0]}
	}
	if len(b) == 1 {
		b2 = Shape{b[0], 1}
	}
	m, k := a2[len(a2)-2], a2[len(a2)-1]
	k2, n := b2[len(b2)-2], b2[len(b2)-1]
	if k != k2 {
		return nil, fmt.Errorf("inner dimensions differ: %s and %s (%d vs %d)", a, b, k, k2)
	}
	batch, ok := BroadcastShapes(a2[:len(a2)-2], b2[:len(b2)-2])
	if !ok {
		return nil, fmt.Errorf("batch dimensions do not broadcast: %s and %s", a, b)
	}
	out := batch.Clone()
	if len(a) > 1 {
		out = append(out, m)
	}
	if len(b) > 1 {
		out = append(out, n)
	}
	return out, nil
}

func inferMatmul(args []Type, attrs Attrs) (Type, error) {
	if err := sameDType(args); err != nil {
		return Type{}, err
	}
	if !args[0].DType.IsFloat() {
		return Type{}, fmt.Errorf("expected float operands, found %s", args[0])
	}
	a, b, err := MatmulOperands(args[0].Shape, args[1].Shape, attrs)
	if err != nil {
		return Type{}, err
	}
	s, err := MatmulShape(a, b)
	if err != nil {
		return Type{}, err
	}
	return Type{args[0].DType, s}, nil
}

// matmulAttrs are the attributes of matmul and fused_matmul. They have no
// default, so a product that reads its operands as they are prints none.
var matmulAttrs = []AttrSpec{
	{Name: "transpose_a", Kind: AttrBool, Doc: "read a with its last two axes swapped (a must have rank >= 2); absent: false"},
	{Name: "transpose_b", Kind: AttrBool, Doc: "read b with its last two axes swapped (b must have rank >= 2); absent: false"},
}

// MatmulTransposes returns the transpose_a and transpose_b attributes of a
// matmul or fused_matmul: whether the product reads a, and b, with their
// last two axes swapped.
func MatmulTransposes(attrs Attrs) (ta, tb bool) {
	return attrs.Bool("transpose_a", false), attrs.Bool("transpose_b", false)
}

// MatmulOperands returns the shapes of the matrices a matmul with attrs
// multiplies: a and b with their last two axes swapped where transpose_a
// and transpose_b say so. A transposed operand must have rank >= 2.
func MatmulOperands(a, b Shape, attrs Attrs) (Shape, Shape, error) {
	ta, tb := MatmulTransposes(attrs)
	swap := func(name string, s Shape, t bool) (Shape, error) {
		if !t {
			return s, nil
		}
		if len(s) < 2 {
			return nil, fmt.Errorf("transpose_%s needs an operand of rank >= 2, found %s", name, s)
		}
		s = s.Clone()
		s[len(s)-2], s[len(s)-1] = s[len(s)-1], s[len(s)-2]
		return s, nil
	}
	a, err := swap("a", a, ta)
	if err != nil {
		return nil, nil, err
	}
	b, err = swap("b", b, tb)
	return a, b, err
}

// Perm returns the transpose permutation of attrs for rank r (reverse when absent).
func Perm(attrs Attrs, r int) ([]int, error) {
	p, ok := attrs.Ints("perm")
	if !ok {
		p = make([]int, r)
		for i := range p {
			p[i] = r - 1 - i
		}
		return p, nil
	}
	if len(p) != r {
		return nil, fmt.Errorf("perm %s has %d entries, expected %d (the rank)", Shape(p), len(p), r)
	}
	seen := make([]bool, r)
	for _, x := range p {
		if x < 0 || x >= r || seen[x] {
			return nil, fmt.Errorf("perm %s is not a permutation of 0..%d", Shape(p), r-1)
		}
		seen[x] = true
	}
	return p, nil
}

func inferTranspose(args []Type, a Attrs) (Type, error) {
	x := args[0]
	p, err := Perm(a, len(x.Shape))
	if err != nil {
		return Type{}, err
	}
	s := make(Shape, len(p))
	for i, j := range p {
		s[i] = x.Shape[j]
	}
	return Type{x.DType, s}, nil
}

// ReshapeTarget resolves the shape attribute of reshape (one -1 allowed) for
// an input of n elements.
func ReshapeTarget(attrs Attrs, n int) (Shape, error) {
	s, ok := attrs.Ints("shape")
	if !ok {
		return nil, fmt.Errorf("shape must be a list of ints")
	}
	out := make(Shape, len(s))
	infer, prod := -1, 1
	for i, d := range s {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d == -1:
			return nil, fmt.Errorf("shape %s has more than one -1", Shape(s))
		case d < 0:
			return nil, fmt.Errorf("shape %s has a negative dimension", Shape(s))
		default:
			prod *= d
		}
		out[i] = d
	}
	if infer >= 0 {
		if prod == 0 || n%prod != 0 {
			return nil, fmt.Errorf("cannot reshape %d elements to %s", n, Shape(s))
		}
		out[infer] = n / prod
	} else if prod != n {
		return nil, fmt.Errorf("cannot reshape %d elements to %s (%d elements)", n, Shape(s), prod)
	}
	return out, nil
}

func inferReshape(args []Type, a Attrs) (Type, error) {
	s, err := ReshapeTarget(a, args[0].Shape.NumElements())
	if err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, args[0])
	}
	return Type{args[0].DType, s}, nil
}

func inferBroadcastTo(args []Type, a Attrs) (Type, error) {
	s, ok := a.Ints("shape")
	if !ok {
		return Type{}, fmt.Errorf("shape must be a list of ints")
	}
	for _, d := range s {
		if d < 0 {
			return Type{}, fmt.Errorf("shape %s has a negative dimension", Shape(s))
		}
	}
	b, ok := BroadcastShapes(args[0].Shape, s)
	if !ok || !b.Equal(s) {
		return Type{}, fmt.Errorf("cannot broadcast %s to %v", args[0], Shape(s))
	}
	return Type{args[0].DType, Shape(s).Clone()}, nil
}

// ReduceAxes returns the normalized (non-negative, increasing) axes of a
// reduction over rank r; absent axes mean all.
func ReduceAxes(attrs Attrs, r int) ([]int, error) {
	v, ok := attrs.Get("axes")
	if !ok {
		all := make([]int, r)
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	axes, ok := v.AsInts()
	if !ok {
		return nil, fmt.Errorf("axes must be a list of ints, found %s", v)
	}
	seen := make([]bool, r)
	for _, ax := range axes {
		n := ax
		if n < 0 {
			n += r
		}
		if n < 0 || n >= r {
			return nil, fmt.Errorf("axis %d out of range for rank %d", ax, r)
		}
		if seen[n] {
			return nil, fmt.Errorf("axis %d repeated in %s", ax, Shape(axes))
		}
		seen[n] = true
	}
	out := make([]int, 0, len(axes))
	for i, s := range seen {
		if s {
			out = append(out, i)
		}
	}
	return out, nil
}

// ReducedShape returns the shape of x reduced over axes.
func ReducedShape(x Shape, axes []int, keepdims bool) Shape {
	out := Shape{}
	j := 0
	for i, d := range x {
		if j < len(axes) && axes[j] == i {
			j++
			if keepdims {
				out = append(out, 1)
			}
			continue
		}
		out = append(out, d)
	}
	return out
}

func inferReduce(args []Type, a Attrs) (Type, error) {
	x := args[0]
	if x.DType == Bool {
		return Type{}, fmt.Errorf("expected a numeric operand, found %s", x)
	}
	axes, err := ReduceAxes(a, len(x.Shape))
	if err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, x)
	}
	return Type{x.DType, ReducedShape(x.Shape, axes, a.Bool("keepdims", false))}, nil
}

func inferReduceFloat(args []Type, a Attrs) (Type, error) {
	if !args[0].DType.IsFloat() {
		return Type{}, fmt.Errorf("expected a float operand (f32 or f64), found %s", args[0])
	}
	return inferReduce(args, a)
}

// Axis normalizes the axis attribute for rank r.
func Axis(attrs Attrs, r int) (int, error) {
	ax := attrs.Int("axis", -1)
	n := ax
	if n < 0 {
		n += r
	}
	if n < 0 || n >= r {
		return 0, fmt.Errorf("axis %d out of range for rank %d", ax, r)
	}
	return n, nil
}

func inferAxisFloat(args []Type, a Attrs) (Type, error) {
	t, err := inferUnaryFloat(args, a)
	if err != nil {
		return t, err
	}
	if _, err := Axis(a, len(t.Shape)); err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, args[0])
	}
	return t, nil
}

// ConstType returns the type a const node with attrs has, checking that the
// value fits the shape.
func ConstType(a Attrs) (Type, error) {
	dt, ok := ParseDType(a.Str("dtype", "f32"))
	if !ok {
		return Type{}, fmt.Errorf("unknown dtype %q (expected f32, f64, i32, i64 or bool)", a.Str("dtype", ""))
	}
	v, _ := a.Get("value")
	vals, ok := v.AsFloats()
	if !ok {
		return Type{}, fmt.Errorf("value must be a number or a list of numbers, found %s", v.describe())
	}
	var shape Shape
	if s, ok := a.Ints("shape"); ok {
		shape = Shape(s).Clone()
		for _, d := range shape {
			if d < 0 {
				return Type{}, fmt.Errorf("shape %v has a negative dimension", shape)
			}
		}
	} else if v.Kind == AttrList {
		shape = Shape{len(vals)}
	} else {
		shape = Shape{}
	}
	if n := shape.NumElements(); len(vals) != 1 && len(vals) != n {
		return Type{}, fmt.Errorf("value has %d elements, shape %v needs %d (or 1 to fill)", len(vals), shape, n)
	}
	for _, x := range vals {
		if err := fitsDType(x, dt); err != nil {
			return Type{}, err
		}
	}
	return Type{dt, shape}, nil
}

func inferConst(_ []Type, a Attrs) (Type, error) { return ConstType(a) }

func inferOneHot(args []Type, a Attrs) (Type, error) {
	if !args[0].DType.IsInt() {
		return Type{}, fmt.Errorf("expected integer labels, found %s", args[0])
	}
	c := a.Int("classes", 0)
	if c <= 0 {
		return Type{}, fmt.Errorf("classes must be positive, found %d", c)
	}
	dt, ok := ParseDType(a.Str("dtype", "f32"))
	if !ok {
		return Type{}, fmt.Errorf("unknown dtype %q", a.Str("dtype", ""))
	}
	return Type{dt, append(args[0].Shape.Clone(), c)}, nil
}

// fitsDType reports whether the number x can be stored in dtype dt exactly:
// integers need whole values in range; for bool any nonzero value is true.
func fitsDType(x float64, dt DType) error {
	switch dt {
	case I32:
		if x != math.Trunc(x) || x < math.MinInt32 || x > math.MaxInt32 {
			return fmt.Errorf("value %s is not an i32", formatFloat(x))
		}
	case I64:
		if x != math.Trunc(x) || x < -(1<<63) || x >= 1<<63 {
			return fmt.Errorf("value %s is not an i64", formatFloat(x))
		}
	}
	return nil
}
