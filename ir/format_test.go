package ir_test

import (
	"github.com/kilnml/kiln/internal/golden"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kilnml/kiln/ir"
)

func parseFile(t *testing.T, path string) *ir.Graph {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := ir.Parse(path, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.Check(g); err != nil {
		t.Fatalf("Check(%s): %v", path, err)
	}
	return g
}

// graphsEqual compares everything that defines a graph, ignoring source
// positions and the file name.
func graphsEqual(t *testing.T, want, got *ir.Graph) {
	t.Helper()
	opts := cmp.Options{
		cmpopts.IgnoreFields(ir.Value{}, "Pos"),
		cmpopts.IgnoreFields(ir.Graph{}, "File"),
		cmpopts.IgnoreUnexported(ir.Graph{}),
		cmpopts.EquateEmpty(),
		cmp.Comparer(func(a, b ir.AttrValue) bool { return a.Equal(b) }),
	}
	if d := cmp.Diff(want, got, opts); d != "" {
		t.Errorf("graphs differ (-want +got):\n%s", d)
	}
}

// TestRoundTrip checks Parse(Format(g)) == g for every testdata graph, and
// that formatting is a fixed point.
func TestRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.kir")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			g := parseFile(t, f)
			text := g.Format()
			g2, err := ir.Parse("formatted", []byte(text))
			if err != nil {
				t.Fatalf("parse of formatted text: %v\n%s", err, text)
			}
			graphsEqual(t, g, g2)
			if text2 := g2.Format(); text2 != text {
				t.Errorf("Format is not a fixed point:\n%s\nvs\n%s", text, text2)
			}
		})
	}
}

// TestGolden compares the canonical text of each testdata graph with its
// golden file (go test ./ir -update rewrites them).
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.kir")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			got := parseFile(t, f).Format()
			goldenPath := strings.TrimSuffix(f, ".kir") + ".golden"
			golden.Check(t, goldenPath, []byte(got))
		})
	}
}

func TestParseErrors(t *testing.T) {
	const head = "graph g\ninput %x: f32[2,3]\n"
	tests := []parseErrorCase{
		{"no graph line", "input %x: f32[2]\n", "t.kir:1:1: expected 'graph NAME' as the first statement, found \"input\""},
		{"empty", "# nothing\n", "t.kir: expected a 'graph NAME' line, found no statements"},
		{"unknown op", head + "%y = matmull %x, %x\n", `t.kir:3:6: unknown op "matmull"; did you mean "matmul"?`},
		{"unknown op far", head + "%y = zzzzzzzzzz %x\n", `t.kir:3:6: unknown op "zzzzzzzzzz"`},
		{"declaration as op", head + "%y = param f32[2]\n", `t.kir:3:6: param is a declaration, not an op: write it as param %y: TYPE on a line of its own`},
		{"arity", head + "%y = add %x\n", "t.kir:3:6: add takes 2 argument(s) (a, b), found 1"},
		{"shapes", head + "input %z: f32[4]\n%y = add %x, %z\n", "t.kir:4:6: add: incompatible shapes f32[2,3] and f32[4] (they do not broadcast)"},
		{"matmul shapes", head + "%y = matmul %x, %x\n", "t.kir:3:6: matmul: inner dimensions differ: [2,3] and [2,3] (3 vs 2)"},
		{"matmul transposed shapes", head + "%y = matmul %x, %x {transpose_b=true, transpose_a=true}\n", "t.kir:3:6: matmul: inner dimensions differ: [3,2] and [3,2] (2 vs 3)"},
		{"matmul transposed vector", head + "input %v: f32[3]\n%y = matmul %x, %v {transpose_b=true}\n", "t.kir:4:6: matmul: transpose_b needs an operand of rank >= 2, found [3]"},
		{"dtype mismatch", head + "input %z: f64[2,3]\n%y = mul %x, %z\n", "t.kir:4:6: mul: dtype mismatch: f32[2,3] and f64[2,3]"},
		{"undefined", head + "%y = relu %q\n", "t.kir:3:11: undefined value %q"},
		{"duplicate", head + "%x = relu %x\n", "t.kir:3:1: duplicate value %x (first defined at 2:1)"},
		{"duplicate leaf", head + "param %x: f32[1]\n", "t.kir:3:7: duplicate value %x (first defined at 2:1)"},
		{"bad attr name", head + "%y = softmax %x {axes=1}\n", `t.kir:3:6: softmax has no attribute "axes" (known: axis); did you mean "axis"?`},
		{"bad attr kind", head + "%y = softmax %x {axis=\"last\"}\n", `t.kir:3:6: softmax attribute axis: expected int, found string "last"`},
		{"missing attr", head + "%y = reshape %x\n", "t.kir:3:6: reshape needs attribute shape (list of ints)"},
		{"attr twice", head + "%y = softmax %x {axis=1, axis=0}\n", "t.kir:3:26: attribute axis given twice"},
		{"bad reshape", head + "%y = reshape %x {shape=[4,2]}\n", "t.kir:3:6: reshape: cannot reshape 6 elements to [4,2] (8 elements) (input f32[2,3])"},
		{"axis range", head + "%y = softmax %x {axis=2}\n", "t.kir:3:6: softmax: axis 2 out of range for rank 2 (input f32[2,3])"},
		{"declared type", head + "%y: f32[3,2] = relu %x\n", "t.kir:3:1: %y is declared f32[3,2] but relu gives f32[2,3]"},
		{"bad dtype", "graph g\ninput %x: f16[2]\n", `t.kir:2:11: unknown dtype "f16" (expected f32, f64, i32, i64 or bool)`},
		{"bad dim", "graph g\ninput %x: f32[2,-1]\n", `t.kir:2:17: expected a dimension (a non-negative integer), found "-1"`},
		{"missing type", "graph g\ninput %x\n", `t.kir:2:9: expected ":", found end of line`},
		{"trailing", head + "%y = relu %x %x\n", "t.kir:3:14: expected end of line, found %x"},
		{"bad char", head + "%y = relu $x\n", "t.kir:3:11: unexpected character '$'"},
		{"unterminated", head + "%y = softmax %x {s=\"abc}\n", "t.kir:3:20: unterminated string"},
		{"float log of int", "graph g\ninput %i: i32[2]\n%y = log %i\n", "t.kir:3:6: log: expected a float operand (f32 or f64), found i32[2]"},
		{"ce labels", head + "input %l: f32[2]\n%y = softmax_cross_entropy %x, %l\n", "t.kir:4:6: softmax_cross_entropy: expected integer labels [2] for logits f32[2,3], found f32[2]"},
		{"grad of non-param", head + "grad %x = %x\n", "t.kir:3:6: grad: expected a param, found %x (input)"},
		{"second graph", head + "graph h\n", "t.kir:3:1: a second 'graph' statement; one file holds one graph"},
		{"const size", head + "%k = const {value=[1,2,3], shape=[2,2]}\n", "t.kir:3:6: const: value has 3 elements, shape [2,2] needs 4 (or 1 to fill)"},
		{"param init kind", "graph g\nparam %w: f32[2] {init=3}\n", "t.kir:2:18: param attribute init: expected string, found int 3"},
		{"perm of floats", head + "%y = transpose %x {perm=[1.0, 0.0]}\n", "t.kir:3:6: transpose attribute perm: expected list of ints, found list [1.0,0.0]"},
		{"negative broadcast", head + "%y = broadcast_to %x {shape=[-1,3]}\n", "t.kir:3:6: broadcast_to: shape [-1,3] has a negative dimension"},
		{"int const not whole", head + "%k = const {value=1.5, dtype=\"i32\"}\n", "t.kir:3:6: const: value 1.5 is not an i32"},
		{"no value after percent", head + "%y = relu %\n", "t.kir:3:11: expected a value name after %"},
		{"recompute leaf", head + "recompute %x\n", "t.kir:3:11: recompute: %x is a input; only computed values can be recomputed"},
		{"recompute twice", head + "%y = relu %x\nrecompute %y, %y\n", "t.kir:4:15: recompute: %y is marked twice"},
		{"recompute undefined", head + "recompute %q\n", "t.kir:3:11: undefined value %q"},
		{"recompute empty", head + "recompute\n", "t.kir:3:10: expected a value (%name), found end of line"},
	}
	checkParseErrors(t, tests)
}

// FuzzParse checks that no input makes the parser panic and that whatever it
// accepts formats and parses back to the same text.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.kir")
	for _, fn := range files {
		src, _ := os.ReadFile(fn)
		f.Add(src)
	}
	f.Add([]byte("graph g\ninput %x: f32[2]\n%y = reshape %x {shape=[-1,-1]}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		g, err := ir.Parse("fuzz", src)
		if err != nil {
			return
		}
		if err := ir.Check(g); err != nil {
			t.Fatalf("parsed graph fails Check: %v", err)
		}
		text := g.Format()
		g2, err := ir.Parse("fuzz2", []byte(text))
		if err != nil {
			t.Fatalf("formatted graph does not parse: %v\n%s", err, text)
		}
		if g2.Format() != text {
			t.Fatalf("round trip changed the text")
		}
	})
}

// parseErrorCase is a .kir source that must not parse, and the one-line
// error it must give.
type parseErrorCase struct {
	name, src, want string
}

// checkParseErrors parses each case's source as t.kir and requires exactly
// its error, on one line.
func checkParseErrors(t *testing.T, tests []parseErrorCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := ir.Parse("t.kir", []byte(tc.src))
			if err == nil {
				t.Fatalf("parsed without error:\n%s", g.Format())
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n got  %s\n want %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}
