package ir

import (
	"strings"
	"testing"
)

func TestBytesChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ     Type
		bytes   int
		wantErr string
	}{
		{TensorOf(F32), 4, ""},
		{TensorOf(F32, 32, 64), 32 * 64 * 4, ""},
		{TensorOf(F64, 0, 1<<40), 0, ""},
		{TensorOf(Bool, 1<<40), 1 << 40, ""},
		{TensorOf(F32, 1<<38), 1 << 40, ""},
		{TensorOf(F32, 1<<38+1), 0, "f32[274877906945] is too large: 1099511627780 bytes; the limit is 1 TiB"},
		{TensorOf(I64, 1<<20, 1<<18), 0, "i64[1048576,262144] is too large: 2199023255552 bytes; the limit is 1 TiB"},
		// The element count of the examples wraps an int64.
		{TensorOf(F32, 4611686018427387904, 4), 0, "has a dimension of 4611686018427387904; the limit is 2^40"},
		{TensorOf(F32, 4294967296, 4294967296, 4294967296), 0, "shape [4294967296,4294967296,4294967296] has 7.92e+28 elements; the limit is 2^40"},
		{TensorOf(F32, 1000000000, 1000000000), 0, "shape [1000000000,1000000000] has 1e+18 elements"},
		{TensorOf(F32, 1<<40+1, 0), 0, "has a dimension of 1099511627777"},
		{TensorOf(F32, 2, -1), 0, "negative dimension -1"},
		{Type{DType: InvalidDType, Shape: Shape{2}}, 0, "no valid dtype"},
		{Type{DType: F32, Shape: make(Shape, MaxRank+1)}, 0, "rank 65: the limit is 64 dimensions"},
	}
	for _, tc := range tests {
		got, err := tc.typ.BytesChecked()
		if tc.wantErr == "" {
			if err != nil || got != tc.bytes {
				t.Errorf("%s: BytesChecked() = %d, %v; want %d, nil", tc.typ, got, err, tc.bytes)
			}
			if got != tc.typ.Bytes() {
				t.Errorf("%s: BytesChecked() = %d but Bytes() = %d", tc.typ, got, tc.typ.Bytes())
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: BytesChecked() error %v; want one containing %q", tc.typ, err, tc.wantErr)
		}
	}
}

func TestBytesCheckedErrorIsShort(t *testing.T) {
	t.Parallel()
	s := make(Shape, MaxRank)
	for i := range s {
		s[i] = 1 << 40
	}
	_, err := Type{F32, s}.BytesChecked()
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("error %v: want one under 200 bytes", err)
	}
}

func TestExcerpt(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 1000)
	tests := []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{long[:80], long[:80]},
		{long[:81], long[:77] + "..."},
		{strings.Repeat("é", 80), strings.Repeat("é", 80)},
		{strings.Repeat("é", 81), strings.Repeat("é", 77) + "..."},
	}
	for _, tc := range tests {
		if got := Excerpt(tc.in); got != tc.want {
			t.Errorf("Excerpt(%d bytes) = %q, want %q", len(tc.in), got, tc.want)
		}
	}
}

func TestParseTypeLimits(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"f32[4611686018427387904,4]", "shape [4611686018427387904,4] has a dimension of 4611686018427387904; the limit is 2^40 (ir.MaxTensorBytes)"},
		{"f32[4294967296,4294967296,4294967296]", "shape [4294967296,4294967296,4294967296] has 7.92e+28 elements; the limit is 2^40 (ir.MaxTensorBytes)"},
		{"i64[137438953473]", "i64[137438953473] is too large: 1099511627784 bytes; the limit is 1 TiB (2^40 bytes, ir.MaxTensorBytes) per tensor"},
		{"f32[" + strings.Repeat("9", 200) + "]", `type "f32[9999999999999999999999999999999999999999999999999999999999999999999999999...": bad dimension "99999999999999999999999999999999999999999999999999999999999999999999999999999..."`},
	}
	for _, tc := range tests {
		_, err := ParseType(tc.in)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseType(%.40q): %v\nwant %s", tc.in, err, tc.want)
		}
	}
	if typ, err := ParseType("f32[1099511627776,0]"); err != nil || typ.Bytes() != 0 {
		t.Errorf("ParseType(f32[2^40,0]) = %v, %v; want an empty tensor", typ, err)
	}
}

// TestAttrStringIsLinear checks that formatting a deeply nested list (which
// the Go builder can make, though the parser refuses it) does not copy each
// level's text once per enclosing level: 200,000 levels format to 400,000
// bytes, and the form quoted in errors stays short.
func TestAttrStringIsLinear(t *testing.T) {
	t.Parallel()
	const depth = 200_000
	v := AttrValue{Kind: AttrList, L: []AttrValue{}}
	for range depth - 1 {
		v = AttrValue{Kind: AttrList, L: []AttrValue{v}}
	}
	s := v.String()
	if len(s) != 2*depth || s[:3] != "[[[" || s[len(s)-3:] != "]]]" {
		t.Errorf("String() of %d levels: %d bytes, want %d", depth, len(s), 2*depth)
	}
	if d := v.describe(); d != "list "+s[:77]+"..." {
		t.Errorf("describe() = %q", d)
	}
}
