package ir

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// The limits below bound what a graph may declare and what an error may
// quote. They are checked where a shape or an attribute is declared (the
// parser, Graph.Leaf, Graph.Infer and so the Go builder, Check, the
// safetensors reader), so no later stage has to guard against overflow.
const (
	// MaxTensorBytes is the largest tensor kiln accepts: 2^40 bytes (1 TiB).
	// No dimension and no element count may exceed it either. The bound is
	// far beyond the memory of any machine kiln runs on, so it refuses
	// nothing that could run, and it keeps every byte count exact in an
	// int64 with room to spare: an element count times an element size
	// (at most 8) cannot overflow, and neither can the sum of 2^23 such
	// tensors, so an arena offset plus a size never wraps.
	MaxTensorBytes = 1 << 40

	// MaxRank is the most dimensions a shape may have.
	MaxRank = 64

	// MaxAttrDepth is how deeply attribute lists may nest in the text
	// format ([[1,2],[3,4]] nests 2 deep). It bounds the parser's recursion.
	MaxAttrDepth = 64

	// MaxQuoted is the most characters of input text an error message
	// quotes; longer text is cut and ends in "...".
	MaxQuoted = 80

	// MaxNameLength is the most bytes a name the user gives (a graph's,
	// a value's) may have. Errors quote names in full, so the bound keeps
	// every message short; the names passes derive (%w.grad, %x.remat)
	// add a few bytes to it.
	MaxNameLength = 256
)

// CheckName returns an error when name, of what (such as "value" or
// "graph"), is longer than MaxNameLength bytes.
func CheckName(what, name string) error {
	if len(name) > MaxNameLength {
		return fmt.Errorf("%s name %q is %d bytes long; the limit is %d (ir.MaxNameLength)", what, Excerpt(name), len(name), MaxNameLength)
	}
	return nil
}

// Excerpt returns s cut to at most MaxQuoted characters, with "..." at the
// end when it was cut, for quoting input text in an error message.
func Excerpt(s string) string {
	if len(s) <= MaxQuoted || utf8.RuneCountInString(s) <= MaxQuoted {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxQuoted-3 {
			return s[:i] + "..."
		}
		n++
	}
	return s
}

// NumElementsChecked returns the number of elements of s (1 for a scalar),
// or an error when s has more than MaxRank dimensions, a negative
// dimension, or more than MaxTensorBytes dimensions or elements.
func (s Shape) NumElementsChecked() (int, error) {
	if len(s) > MaxRank {
		return 0, fmt.Errorf("shape of rank %d: the limit is %d dimensions", len(s), MaxRank)
	}
	n := 1
	for _, d := range s {
		if d < 0 {
			return 0, fmt.Errorf("shape %s has a negative dimension %d", excerptShape(s), d)
		}
		if d > MaxTensorBytes {
			return 0, fmt.Errorf("shape %s has a dimension of %d; the limit is 2^40 (ir.MaxTensorBytes)", excerptShape(s), d)
		}
	}
	for _, d := range s {
		if d == 0 {
			return 0, nil
		}
	}
	for _, d := range s {
		if n > MaxTensorBytes/d {
			return 0, fmt.Errorf("shape %s has %.3g elements; the limit is 2^40 (ir.MaxTensorBytes)", excerptShape(s), approxElements(s))
		}
		n *= d
	}
	return n, nil
}

// BytesChecked returns the storage size of a value of type t, or an error
// when t has no valid dtype, a shape NumElementsChecked refuses, or more
// than MaxTensorBytes bytes. A type it accepts has exact NumElements and
// Bytes.
func (t Type) BytesChecked() (int, error) {
	size := t.DType.Size()
	if size == 0 {
		return 0, fmt.Errorf("type %s has no valid dtype", Excerpt(t.String()))
	}
	n, err := t.Shape.NumElementsChecked()
	if err != nil {
		return 0, err
	}
	if n > MaxTensorBytes/size {
		return 0, fmt.Errorf("%s is too large: %s bytes; the limit is 1 TiB (2^40 bytes, ir.MaxTensorBytes) per tensor",
			Excerpt(t.String()), formatCount(float64(n)*float64(size)))
	}
	return n * size, nil
}

// approxElements returns the product of s's dimensions in floating point,
// which does not overflow.
func approxElements(s Shape) float64 {
	p := 1.0
	for _, d := range s {
		p *= float64(d)
	}
	return p
}

// formatCount writes a count exactly when it is an integer below 2^53 and in
// the %.3g form otherwise.
func formatCount(f float64) string {
	if f < 1<<53 && f == math.Trunc(f) {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.3g", f)
}

// excerptShape formats s for an error message, cut to MaxQuoted characters.
func excerptShape(s Shape) string {
	if len(s) > MaxQuoted {
		s = s[:MaxQuoted]
	}
	return Excerpt(s.String())
}
