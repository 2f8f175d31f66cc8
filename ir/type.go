package ir

import (
	"fmt"
	"strconv"
	"strings"
)

// DType is the element type of a tensor.
type DType uint8

// The element types kiln knows.
const (
	InvalidDType DType = iota
	F32
	F64
	I32
	I64
	Bool
)

var dtypeNames = [...]string{InvalidDType: "invalid", F32: "f32", F64: "f64", I32: "i32", I64: "i64", Bool: "bool"}
var dtypeSizes = [...]int{F32: 4, F64: 8, I32: 4, I64: 8, Bool: 1}

// String returns the dtype's name as the text format spells it.
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size returns the number of bytes of one element.
func (d DType) Size() int {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == F32 || d == F64 }

// IsInt reports whether d is an integer type.
func (d DType) IsInt() bool { return d == I32 || d == I64 }

// ParseDType returns the dtype named s.
func ParseDType(s string) (DType, bool) {
	for i, n := range dtypeNames {
		if i != 0 && n == s {
			return DType(i), true
		}
	}
	return InvalidDType, false
}

// Shape is a static tensor shape; an empty shape is a scalar.
type Shape []int

// NumElements returns the product of the dimensions (1 for a scalar). It
// does not check for overflow: every shape of a graph has passed
// NumElementsChecked where it was declared, and only such shapes are exact.
func (s Shape) NumElements() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Equal reports whether s and t have the same dimensions.
func (s Shape) Equal(t Shape) bool {
	if len(s) != len(t) {
		return false
	}
	for i := range s {
		if s[i] != t[i] {
			return false
		}
	}
	return true
}

// Clone returns a copy of s that shares no memory with it.
func (s Shape) Clone() Shape {
	if s == nil {
		return Shape{}
	}
	return append(Shape{}, s...)
}

// String formats s as [d0,d1,...].
func (s Shape) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(d))
	}
	b.WriteByte(']')
	return b.String()
}

// Strides returns the row-major element strides of s.
func (s Shape) Strides() []int {
	st := make([]int, len(s))
	n := 1
	for i := len(s) - 1; i >= 0; i-- {
		st[i] = n
		n *= s[i]
	}
	return st
}

// BroadcastShapes returns the NumPy broadcast of a and b, or false when they
// are incompatible.
func BroadcastShapes(a, b Shape) (Shape, bool) {
	n := max(len(a), len(b))
	out := make(Shape, n)
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db:
			out[i] = da
		case da == 1:
			out[i] = db
		case db == 1:
			out[i] = da
		default:
			return nil, false
		}
	}
	return out, true
}

// Type is the static type of a value: element type and shape.
type Type struct {
	DType DType
	Shape Shape
}

// Bytes returns the storage size of a value of type t, unchecked: exact
// for any type BytesChecked accepts, as every type in a graph is.
func (t Type) Bytes() int { return t.DType.Size() * t.Shape.NumElements() }

// Equal reports whether t and u are the same type.
func (t Type) Equal(u Type) bool { return t.DType == u.DType && t.Shape.Equal(u.Shape) }

// String formats t as the text format does, for example f32[32,16].
func (t Type) String() string { return t.DType.String() + t.Shape.String() }

// TensorOf is shorthand for a Type value.
func TensorOf(d DType, dims ...int) Type { return Type{DType: d, Shape: Shape(dims).Clone()} }

// ParseType parses a type as the text format writes it, such as f32[2,3]
// or i64[] (a scalar). It refuses a type that BytesChecked refuses.
func ParseType(s string) (Type, error) {
	open := strings.IndexByte(s, '[')
	if open < 0 || !strings.HasSuffix(s, "]") {
		return Type{}, fmt.Errorf("type %q: expected DTYPE[dims]", Excerpt(s))
	}
	dt, ok := ParseDType(s[:open])
	if !ok {
		return Type{}, fmt.Errorf("type %q: unknown dtype %q", Excerpt(s), Excerpt(s[:open]))
	}
	shape := Shape{}
	if inner := s[open+1 : len(s)-1]; inner != "" {
		for _, f := range strings.Split(inner, ",") {
			d, err := strconv.Atoi(f)
			if err != nil || d < 0 {
				return Type{}, fmt.Errorf("type %q: bad dimension %q", Excerpt(s), Excerpt(f))
			}
			shape = append(shape, d)
		}
	}
	t := Type{dt, shape}
	if _, err := t.BytesChecked(); err != nil {
		return Type{}, err
	}
	return t, nil
}
