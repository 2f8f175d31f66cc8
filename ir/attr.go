package ir

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// AttrKind is the kind of an attribute value.
type AttrKind uint8

// Attribute kinds. A list holds values of any scalar kind.
const (
	AttrInt AttrKind = iota + 1
	AttrFloat
	AttrBool
	AttrString
	AttrList
)

var attrKindNames = [...]string{AttrInt: "int", AttrFloat: "float", AttrBool: "bool", AttrString: "string", AttrList: "list", attrNumbers: "number or list of numbers", attrInts: "list of ints"}

// String returns the kind's name.
func (k AttrKind) String() string {
	if int(k) < len(attrKindNames) && k != 0 {
		return attrKindNames[k]
	}
	return "invalid"
}

// AttrValue is one attribute value: an int, float, bool, string or list.
type AttrValue struct {
	Kind AttrKind
	I    int64
	F    float64
	B    bool
	S    string
	L    []AttrValue
}

// Int returns an int attribute value.
func Int(v int) AttrValue { return AttrValue{Kind: AttrInt, I: int64(v)} }

// Float returns a float attribute value.
func Float(v float64) AttrValue { return AttrValue{Kind: AttrFloat, F: v} }

// BoolAttr returns a bool attribute value.
func BoolAttr(v bool) AttrValue { return AttrValue{Kind: AttrBool, B: v} }

// String returns a string attribute value.
func String(v string) AttrValue { return AttrValue{Kind: AttrString, S: v} }

// Ints returns a list attribute of ints.
func Ints(v ...int) AttrValue {
	l := make([]AttrValue, len(v))
	for i, x := range v {
		l[i] = Int(x)
	}
	return AttrValue{Kind: AttrList, L: l}
}

// Floats returns a list attribute of floats.
func Floats(v ...float64) AttrValue {
	l := make([]AttrValue, len(v))
	for i, x := range v {
		l[i] = Float(x)
	}
	return AttrValue{Kind: AttrList, L: l}
}

// AsFloat returns the value as a float64; ints convert.
func (v AttrValue) AsFloat() (float64, bool) {
	switch v.Kind {
	case AttrFloat:
		return v.F, true
	case AttrInt:
		return float64(v.I), true
	}
	return 0, false
}

// AsInts returns a list of ints (a single int is a list of one).
func (v AttrValue) AsInts() ([]int, bool) {
	if v.Kind == AttrInt {
		return []int{int(v.I)}, true
	}
	if v.Kind != AttrList {
		return nil, false
	}
	out := make([]int, len(v.L))
	for i, e := range v.L {
		if e.Kind != AttrInt {
			return nil, false
		}
		out[i] = int(e.I)
	}
	return out, true
}

// AsFloats returns a list of floats (ints convert; a single number is a list of one).
func (v AttrValue) AsFloats() ([]float64, bool) {
	if f, ok := v.AsFloat(); ok {
		return []float64{f}, true
	}
	if v.Kind != AttrList {
		return nil, false
	}
	out := make([]float64, len(v.L))
	for i, e := range v.L {
		f, ok := e.AsFloat()
		if !ok {
			return nil, false
		}
		out[i] = f
	}
	return out, true
}

// Equal reports whether v and w are the same value of the same kind.
func (v AttrValue) Equal(w AttrValue) bool {
	if v.Kind != w.Kind {
		return false
	}
	switch v.Kind {
	case AttrInt:
		return v.I == w.I
	case AttrFloat:
		return v.F == w.F || (math.IsNaN(v.F) && math.IsNaN(w.F))
	case AttrBool:
		return v.B == w.B
	case AttrString:
		return v.S == w.S
	case AttrList:
		if len(v.L) != len(w.L) {
			return false
		}
		for i := range v.L {
			if !v.L[i].Equal(w.L[i]) {
				return false
			}
		}
		return true
	}
	return true
}

// String formats v as the text format spells it. Floats always carry a
// decimal point or exponent so they parse back as floats, and are printed
// with the fewest digits that round-trip.
func (v AttrValue) String() string {
	var b strings.Builder
	v.write(&b, -1)
	return b.String()
}

// write appends v's text to b, in time linear in its length however deeply
// lists nest. With limit >= 0 it stops once b holds more than limit bytes.
func (v AttrValue) write(b *strings.Builder, limit int) {
	switch v.Kind {
	case AttrInt:
		b.WriteString(strconv.FormatInt(v.I, 10))
	case AttrFloat:
		b.WriteString(formatFloat(v.F))
	case AttrBool:
		b.WriteString(strconv.FormatBool(v.B))
	case AttrString:
		b.WriteString(strconv.Quote(v.S))
	case AttrList:
		b.WriteByte('[')
		for i, e := range v.L {
			if limit >= 0 && b.Len() > limit {
				return
			}
			if i > 0 {
				b.WriteByte(',')
			}
			e.write(b, limit)
		}
		b.WriteByte(']')
	default:
		b.WriteByte('?')
	}
}

func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// Attr is one named attribute.
type Attr struct {
	Key   string
	Value AttrValue
}

// Attrs is a node's attributes, kept sorted by key.
type Attrs []Attr

// Get returns the attribute named key.
func (a Attrs) Get(key string) (AttrValue, bool) {
	for _, at := range a {
		if at.Key == key {
			return at.Value, true
		}
	}
	return AttrValue{}, false
}

// With returns a copy of a with key set to v, still sorted.
func (a Attrs) With(key string, v AttrValue) Attrs {
	out := make(Attrs, 0, len(a)+1)
	for _, at := range a {
		if at.Key != key {
			out = append(out, at)
		}
	}
	out = append(out, Attr{key, v})
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Equal reports whether a and b hold the same attributes.
func (a Attrs) Equal(b Attrs) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !a[i].Value.Equal(b[i].Value) {
			return false
		}
	}
	return true
}

// String formats a as {k=v, ...}, or "" when empty.
func (a Attrs) String() string {
	if len(a) == 0 {
		return ""
	}
	parts := make([]string, len(a))
	for i, at := range a {
		parts[i] = at.Key + "=" + at.Value.String()
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// MakeAttrs builds sorted Attrs from key/value pairs.
func MakeAttrs(kv ...any) Attrs {
	var a Attrs
	for i := 0; i+1 < len(kv); i += 2 {
		a = a.With(kv[i].(string), kv[i+1].(AttrValue))
	}
	return a
}

// Int returns the int attribute key, or def when absent.
func (a Attrs) Int(key string, def int) int {
	if v, ok := a.Get(key); ok && v.Kind == AttrInt {
		return int(v.I)
	}
	return def
}

// Float returns the float attribute key (ints convert), or def when absent.
func (a Attrs) Float(key string, def float64) float64 {
	if v, ok := a.Get(key); ok {
		if f, ok := v.AsFloat(); ok {
			return f
		}
	}
	return def
}

// Bool returns the bool attribute key, or def when absent.
func (a Attrs) Bool(key string, def bool) bool {
	if v, ok := a.Get(key); ok && v.Kind == AttrBool {
		return v.B
	}
	return def
}

// Str returns the string attribute key, or def when absent.
func (a Attrs) Str(key string, def string) string {
	if v, ok := a.Get(key); ok && v.Kind == AttrString {
		return v.S
	}
	return def
}

// Ints returns the int-list attribute key, or nil and false when absent.
func (a Attrs) Ints(key string) ([]int, bool) {
	v, ok := a.Get(key)
	if !ok {
		return nil, false
	}
	return v.AsInts()
}

// describe names v's kind and quotes at most MaxQuoted characters of its
// text, for error messages.
func (v AttrValue) describe() string {
	var b strings.Builder
	if v.Kind == AttrString {
		b.WriteString(strconv.Quote(Excerpt(v.S)))
	} else {
		v.write(&b, MaxQuoted)
	}
	return v.Kind.String() + " " + Excerpt(b.String())
}
