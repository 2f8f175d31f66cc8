package ir_test

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
)

// TestParseShapeLimits checks that every shape over the limits of
// ir.MaxTensorBytes is refused where it is written, or where the op that
// infers it is, with the position of the type or the op.
func TestParseShapeLimits(t *testing.T) {
	const lim = "the limit is 1 TiB (2^40 bytes, ir.MaxTensorBytes) per tensor"
	tests := []parseErrorCase{
		{"param wraps", "graph g\nparam %w: f32[4611686018427387904,4]\n",
			"t.kir:2:11: shape [4611686018427387904,4] has a dimension of 4611686018427387904; the limit is 2^40 (ir.MaxTensorBytes)"},
		{"input one past", "graph g\ninput %x: f32[4611686018427387905,4]\n",
			"t.kir:2:11: shape [4611686018427387905,4] has a dimension of 4611686018427387905; the limit is 2^40 (ir.MaxTensorBytes)"},
		{"count wraps", "graph g\nparam %w: f32[4294967296,4294967296,4294967296]\n",
			"t.kir:2:11: shape [4294967296,4294967296,4294967296] has 7.92e+28 elements; the limit is 2^40 (ir.MaxTensorBytes)"},
		{"makeslice", "graph g\nparam %w: f32[1000000000,1000000000]\n",
			"t.kir:2:11: shape [1000000000,1000000000] has 1e+18 elements; the limit is 2^40 (ir.MaxTensorBytes)"},
		{"bytes over", "graph g\nstate %s: f64[1099511627776]\n",
			"t.kir:2:11: f64[1099511627776] is too large: 8796093022208 bytes; " + lim},
		{"declared result", "graph g\ninput %x: f32[2]\n%y: f32[274877906945,1] = relu %x\n",
			"t.kir:3:5: f32[274877906945,1] is too large: 1099511627780 bytes; " + lim},
		{"matmul result", "graph g\ninput %a: f32[1048576,1]\ninput %b: f32[1,1048576]\n%y = matmul %a, %b\n",
			"t.kir:4:6: matmul: result f32[1048576,1048576] is too large: 4398046511104 bytes; " + lim},
		{"broadcast result", "graph g\ninput %a: f32[1048576,1]\ninput %b: f32[1048576]\n%y = add %a, %b\n",
			"t.kir:4:6: add: result f32[1048576,1048576] is too large: 4398046511104 bytes; " + lim},
		{"reshape attr", "graph g\ninput %a: f32[0]\n%y = reshape %a {shape=[0,4611686018427387904]}\n",
			"t.kir:3:6: reshape: result shape [0,4611686018427387904] has a dimension of 4611686018427387904; the limit is 2^40 (ir.MaxTensorBytes)"},
		{"rank", "graph g\ninput %a: f32[" + strings.Repeat("1,", 64) + "1]\n",
			"t.kir:2:11: shape of rank 65: the limit is 64 dimensions"},
	}
	checkParseErrors(t, tests)
}

// TestCheckShapeLimits checks that ir.Check refuses a leaf whose type is
// over the limits, however it got into the graph.
func TestCheckShapeLimits(t *testing.T) {
	t.Parallel()
	g := ir.New("g")
	g.Append(ir.Value{Name: "w", Op: ir.OpParam, Type: ir.TensorOf(ir.F32, 4611686018427387904, 4)})
	err := ir.Check(g)
	if err == nil || !strings.Contains(err.Error(), "%w: shape [4611686018427387904,4] has a dimension") {
		t.Fatalf("Check: %v, want the shape refused", err)
	}
	if _, err := ir.New("g").Leaf(ir.OpInput, "x", ir.TensorOf(ir.F32, 1<<30, 1<<30), nil); err == nil ||
		!strings.Contains(err.Error(), "shape [1073741824,1073741824] has 1.15e+18 elements") {
		t.Fatalf("Leaf: %v, want the shape refused", err)
	}
}

// TestParseDeepAttrs checks that attribute lists nested past
// ir.MaxAttrDepth are refused at once, with a short error, however deep
// they go.
func TestParseDeepAttrs(t *testing.T) {
	t.Parallel()
	for _, depth := range []int{ir.MaxAttrDepth + 1, 200_000} {
		src := "graph g\nparam %w: f32[2] {init=" + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "}\n"
		_, err := ir.Parse("t.kir", []byte(src))
		want := "t.kir:2:88: attribute lists nest more than 64 deep (ir.MaxAttrDepth)"
		if err == nil || err.Error() != want {
			t.Errorf("depth %d: error %v, want %s", depth, err, want)
		}
	}
	// At the limit the list parses, and the error about its kind is short.
	src := "graph g\nparam %w: f32[2] {init=" + strings.Repeat("[", ir.MaxAttrDepth) + strings.Repeat("]", ir.MaxAttrDepth) + "}\n"
	_, err := ir.Parse("t.kir", []byte(src))
	list := strings.Repeat("[", ir.MaxAttrDepth) + strings.Repeat("]", ir.MaxAttrDepth)
	want := "t.kir:2:18: param attribute init: expected string, found list " + list[:77] + "..."
	if err == nil || err.Error() != want {
		t.Errorf("depth %d: error %v\nwant %s", ir.MaxAttrDepth, err, want)
	}
}

// TestParseLongText checks that an error quotes at most ir.MaxQuoted
// characters of the input, whatever part of a line is huge.
func TestParseLongText(t *testing.T) {
	t.Parallel()
	// One line of 50 MB, as in the report that gave rise to this test, and
	// 1 MB in the other cases, which is as far past MaxQuoted.
	huge := strings.Repeat("x", 50_000_000)
	big := huge[:1_000_000]
	digits := strings.Repeat("7", 1000)
	tests := []struct{ name, src, want string }{
		{"garbage after a statement", "graph g\ninput %x: f32[2] " + huge + "\n", `t.kir:2:18: expected end of line, found "xxxxxxxx`},
		{"garbage statement", "graph g\n" + big + "\n", `t.kir:2:1: expected a statement`},
		{"graph name", big + "\n", `t.kir:1:1: expected 'graph NAME' as the first statement, found "xxx`},
		{"unknown op", "graph g\ninput %x: f32[2]\n%y = " + big + " %x\n", `t.kir:3:6: unknown op "xxx`},
		{"undefined value", "graph g\n%y = relu %" + big + "\n", `t.kir:2:11: undefined value %xxx`},
		{"long leaf name", "graph g\ninput %" + big + ": f32[2]\n", `t.kir:2:7: value name "xxx`},
		{"long value name", "graph g\ninput %x: f32[2]\n%" + big + " = relu %x\n", `t.kir:3:1: value name "xxx`},
		{"duplicate value", "graph g\ninput %" + big[:200] + ": f32[2]\ninput %" + big[:200] + ": f32[2]\n", `t.kir:3:7: duplicate value %xxx`},
		{"dtype", "graph g\ninput %x: " + big + "[2]\n", `t.kir:2:11: unknown dtype "xxx`},
		{"dimension", "graph g\ninput %x: f32[" + digits + "]\n", `t.kir:2:15: expected a dimension (a non-negative integer), found "777`},
		{"attribute name", "graph g\ninput %x: f32[2]\n%y = softmax %x {" + big + "=1}\n", `t.kir:3:6: softmax has no attribute "xxx`},
		{"attribute string", "graph g\nparam %w: f32[2] {init=\"" + big + "\", init=1}\n", `t.kir:2:1000028: attribute init given twice`},
		{"attribute kind", "graph g\ninput %x: f32[2]\n%y = softmax %x {axis=\"" + big + "\"}\n", `t.kir:3:6: softmax attribute axis: expected int, found string "xxx`},
		{"long list", "graph g\ninput %x: f32[2]\n%y = softmax %x {axis=[" + strings.Repeat("1,", 500_000) + "1]}\n", `t.kir:3:6: softmax attribute axis: expected int, found list [1,1,1`},
		{"bad number", "graph g\ninput %x: f32[2]\n%y = softmax %x {axis=1" + big + "}\n", `t.kir:3:23: expected a number, found "1xxx`},
		{"bad string", "graph g\ninput %x: f32[2]\n%y = softmax %x {axis=\"\\q" + big + "\"}\n", `t.kir:3:23: bad string literal "\qxxx`},
		{"unterminated string", "graph g\ninput %x: f32[2]\n%y = softmax %x {axis=\"" + big + "\n", `t.kir:3:23: unterminated string`},
		{"long graph name", "graph " + big + "\n", `t.kir:1:7: graph name "xxx`},
		{"graph name after", "graph g " + big + "\n", `t.kir:1:9: expected end of line, found "xxx`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ir.Parse("t.kir", []byte(tc.src))
			if err == nil {
				t.Fatal("parsed without error")
			}
			msg := err.Error()
			if len(msg) > 300 {
				t.Errorf("error of %d bytes, want at most 300: %.300s", len(msg), msg)
			}
			if !strings.HasPrefix(msg, tc.want) {
				t.Errorf("error %.300q, want it to start with %q", msg, tc.want)
			}
		})
	}
}
