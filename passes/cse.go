package passes

import (
	"math"

	"github.com/kilnml/kiln/ir"
)

// Common-subexpression elimination: two values with the same op, the same
// arguments and the same attributes compute the same tensor, so the later
// one is replaced by the first (the first occurrence wins, which keeps the
// result deterministic). Attributes are canonical in the graph, so equal
// attributes are equal lists; floats compare bit for bit (a const of -0
// is not a const of +0). Consts compare by what the kernel writes: dtype,
// shape and elements in the element type, so a const written 0.1 and one
// written 0.10000000149011612 in f32 are one const. Leaves (input, param,
// state) are never merged: each is its own buffer. Every op is
// deterministic (dropout's mask is a function of its seed, the step and
// the element index), so merging never changes a result. Commutative
// operands are not reordered: with two NaN operands, a+b and b+a may
// return different NaNs.

// cseTable maps a hash of (op, args, attrs) to the first value with it.
type cseTable struct {
	first map[uint64]ir.ID
	more  map[uint64][]ir.ID // further values whose hash collides with a different first one
}

func (t *cseTable) reset(n int) {
	t.first = make(map[uint64]ir.ID, n)
	t.more = nil
}

// cseHasher is FNV-1a over the fields that make a value.
type cseHasher uint64

func (h *cseHasher) u64(x uint64) {
	for i := 0; i < 8; i++ {
		*h ^= cseHasher(byte(x))
		*h *= 1099511628211
		x >>= 8
	}
}

func (h *cseHasher) str(s string) {
	h.u64(uint64(len(s)))
	for i := 0; i < len(s); i++ {
		*h ^= cseHasher(s[i])
		*h *= 1099511628211
	}
}

func (h *cseHasher) attr(v ir.AttrValue) {
	h.u64(uint64(v.Kind))
	switch v.Kind {
	case ir.AttrInt:
		h.u64(uint64(v.I))
	case ir.AttrFloat:
		h.u64(math.Float64bits(v.F))
	case ir.AttrBool:
		if v.B {
			h.u64(1)
		} else {
			h.u64(0)
		}
	case ir.AttrString:
		h.str(v.S)
	case ir.AttrList:
		h.u64(uint64(len(v.L)))
		for _, e := range v.L {
			h.attr(e)
		}
	}
}

// cseHash hashes value id.
func (s *simplifier) cseHash(id ir.ID) uint64 {
	v := &s.g.Values[id]
	h := cseHasher(14695981039346656037)
	h.u64(uint64(v.Op))
	if v.Op == ir.OpConst {
		h.u64(uint64(v.Type.DType))
		h.u64(uint64(len(v.Type.Shape)))
		for _, d := range v.Type.Shape {
			h.u64(uint64(d))
		}
		// The elements as the kernel stores them, without copying them.
		value, _ := v.Attrs.Get("value")
		if f, ok := value.AsFloat(); ok {
			h.u64(1)
			h.u64(math.Float64bits(foldElem(v.Type.DType, f)))
		} else if value.Kind == ir.AttrList {
			h.u64(uint64(len(value.L)))
			for _, e := range value.L {
				f, _ := e.AsFloat()
				h.u64(math.Float64bits(foldElem(v.Type.DType, f)))
			}
		}
		return uint64(h)
	}
	h.u64(uint64(len(v.Args)))
	for _, a := range v.Args {
		h.u64(uint64(a))
	}
	for _, at := range v.Attrs {
		h.str(at.Key)
		h.attr(at.Value)
	}
	return uint64(h)
}

// cseSame reports whether values a and b compute the same tensor by the
// rules above.
func (s *simplifier) cseSame(a, b ir.ID) bool {
	va, vb := &s.g.Values[a], &s.g.Values[b]
	if va.Op != vb.Op || !va.Type.Equal(vb.Type) || len(va.Args) != len(vb.Args) {
		return false
	}
	if va.Op == ir.OpConst {
		ca, ok1 := s.constOf(a)
		cb, ok2 := s.constOf(b)
		if !ok1 || !ok2 || len(ca.vals) != len(cb.vals) {
			return false
		}
		for i := range ca.vals {
			if !sameBits(ca.vals[i], cb.vals[i]) {
				return false
			}
		}
		return true
	}
	for i := range va.Args {
		if va.Args[i] != vb.Args[i] {
			return false
		}
	}
	return cseSameAttrs(va.Attrs, vb.Attrs)
}

// cseSameAttrs is Attrs.Equal with floats compared bit for bit.
func cseSameAttrs(a, b ir.Attrs) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !cseSameValue(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

func cseSameValue(a, b ir.AttrValue) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case ir.AttrFloat:
		return math.Float64bits(a.F) == math.Float64bits(b.F)
	case ir.AttrList:
		if len(a.L) != len(b.L) {
			return false
		}
		for i := range a.L {
			if !cseSameValue(a.L[i], b.L[i]) {
				return false
			}
		}
		return true
	}
	return a.Equal(b)
}

// cse looks value id up among the values seen so far in this sweep. It
// returns the first value that computes the same tensor, or id itself after
// recording it.
func (s *simplifier) cse(id ir.ID) ir.ID {
	v := &s.g.Values[id]
	if v.Op.IsLeaf() {
		return id
	}
	h := s.cseHash(id)
	t := &s.table
	first, ok := t.first[h]
	if !ok {
		t.first[h] = id
		return id
	}
	if s.cseSame(first, id) {
		return first
	}
	for _, m := range t.more[h] {
		if s.cseSame(m, id) {
			return m
		}
	}
	if t.more == nil {
		t.more = map[uint64][]ir.ID{}
	}
	t.more[h] = append(t.more[h], id)
	return id
}
