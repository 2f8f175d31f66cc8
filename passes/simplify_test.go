package passes_test

import (
	"bytes"
	"github.com/kilnml/kiln/internal/golden"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilnml/kiln/internal/vmath"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// simplifyGoldenFiles returns the inputs of the golden tests.
func simplifyGoldenFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/simplify/*.kir")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs in testdata/simplify: %v", err)
	}
	return files
}

func simplifyParseFile(t *testing.T, file string) *ir.Graph {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	g, err := ir.Parse(file, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.Check(g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSimplifyGolden simplifies every testdata/simplify/NAME.kir and
// compares the result with NAME.golden (go test ./passes -run
// TestSimplifyGolden -update rewrites them). The golden's first line
// records the rounds and the rewrites by rule. Every rule of the table must
// fire in some file: each has a before/after example.
func TestSimplifyGolden(t *testing.T) {
	fired := map[string]bool{}
	for _, file := range simplifyGoldenFiles(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".kir")
		t.Run(name, func(t *testing.T) {
			g := simplifyParseFile(t, file)
			st, err := passes.SimplifyWithStats(g)
			if err != nil {
				t.Fatal(err)
			}
			if err := ir.Check(g); err != nil {
				t.Fatalf("after simplify: %v", err)
			}
			for r := range st.Rules {
				fired[r] = true
			}
			got := "# simplify: " + st.String() + "\n" + g.Format()
			goldenPath := strings.TrimSuffix(file, ".kir") + ".golden"
			if golden.Update() {
				if err := os.WriteFile(goldenPath, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(want), got); d != "" {
				t.Errorf("%s differs from %s (-want +got):\n%s", file, goldenPath, d)
			}
		})
	}
	if t.Failed() {
		return
	}
	for _, r := range passes.SimplifyRuleNames() {
		if !fired[r] {
			t.Errorf("rule %s fires in no file of testdata/simplify: add a before/after example", r)
		}
	}
}

// TestSimplifyIsAFixedPoint: simplifying a simplified graph changes
// nothing, in one round; simplifying twice from the start gives the same
// text (determinism); and the golden graphs settle in two rounds (one that
// changes, one that finds nothing).
func TestSimplifyIsAFixedPoint(t *testing.T) {
	for _, file := range simplifyGoldenFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			g := simplifyParseFile(t, file)
			g2 := g.Clone()
			st, err := passes.SimplifyWithStats(g)
			if err != nil {
				t.Fatal(err)
			}
			if st.Rounds > 2 || st.Capped {
				t.Errorf("took %d rounds (capped %v), want at most 2", st.Rounds, st.Capped)
			}
			if err := passes.Simplify(g2); err != nil {
				t.Fatal(err)
			}
			if a, b := g.Format(), g2.Format(); a != b {
				t.Errorf("two runs differ:\n%s", cmp.Diff(a, b))
			}
			before := g.Format()
			st, err = passes.SimplifyWithStats(g)
			if err != nil {
				t.Fatal(err)
			}
			if st.Rounds != 1 || len(st.Rules) != 0 {
				t.Errorf("simplifying again: %s", st)
			}
			if after := g.Format(); after != before {
				t.Errorf("simplifying again changed the graph:\n%s", cmp.Diff(before, after))
			}
		})
	}
}

// TestSimplifyCap: rules that never settle stop at the cap, leaving a
// valid graph and saying so.
func TestSimplifyCap(t *testing.T) {
	g := mustParse(t, `graph cap
param %x: f32[2,3]
%t = transpose %x
%u = tanh %t
output %u
`)
	passes.WithFlipFlopRule(func() {
		st, err := passes.SimplifyWithStats(g)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Capped || st.Rounds != passes.SimplifyMaxRounds {
			t.Errorf("flip-flop rule: %d rounds, capped %v; want the cap, %d", st.Rounds, st.Capped, passes.SimplifyMaxRounds)
		}
		if !strings.Contains(st.String(), "stopped at the cap") {
			t.Errorf("stats do not say it stopped at the cap: %s", st)
		}
	})
	if err := ir.Check(g); err != nil {
		t.Fatal(err)
	}
}

// simplifyConst simplifies src and returns the attributes of value name,
// which must have become a const (or stayed another op, when want is nil).
func simplifyValue(t *testing.T, src, name string) *ir.Value {
	t.Helper()
	g := mustParse(t, src)
	if err := passes.Simplify(g); err != nil {
		t.Fatal(err)
	}
	if err := ir.Check(g); err != nil {
		t.Fatal(err)
	}
	id, ok := g.Lookup(name)
	if !ok {
		t.Fatalf("%%%s is gone:\n%s", name, g.Format())
	}
	return g.Value(id)
}

// TestFoldArithmetic checks folded values bit for bit against the same
// arithmetic in the element type, and the cases that must not fold.
func TestFoldArithmetic(t *testing.T) {
	f32 := func(x float32) float64 { return float64(x) }
	a, b := float32(0.1), float32(0.7)
	a64, b64 := 0.1, 0.7 // variables: Go's constant arithmetic is exact
	tests := []struct {
		name string
		src  string // defines %r and outputs it
		want []float64
		fold bool
	}{
		{"f32 add", `%a = const {value=0.1}
%b = const {value=0.7}
%r = add %a, %b`, []float64{f32(a + b)}, true},
		{"f32 sub", `%a = const {value=0.1}
%b = const {value=0.7}
%r = sub %a, %b`, []float64{f32(a - b)}, true},
		{"f32 mul", `%a = const {value=0.1}
%b = const {value=0.7}
%r = mul %a, %b`, []float64{f32(a * b)}, true},
		{"f32 div", `%a = const {value=0.1}
%b = const {value=0.7}
%r = div %a, %b`, []float64{f32(a / b)}, true},
		{"f32 sqrt", `%a = const {value=0.7}
%r = sqrt %a`, []float64{f32(float32(math.Sqrt(float64(b))))}, true},
		{"f64 mul", `%a = const {dtype="f64", value=0.1}
%b = const {dtype="f64", value=0.7}
%r = mul %a, %b`, []float64{a64 * b64}, true},
		{"neg zero", `%a = const {value=0.0}
%r = neg %a`, []float64{math.Copysign(0, -1)}, true},
		{"inf", `%a = const {value=1.0}
%b = const {value=0.0}
%r = div %a, %b`, []float64{math.Inf(1)}, true},
		{"nan not folded", `%a = const {value=0.0}
%r = div %a, %a`, nil, false},
		{"sqrt of negative not folded", `%a = const {value=-1.0}
%r = sqrt %a`, nil, false},
		{"i32 wraps", `%a = const {dtype="i32", value=-2147483648}
%r = neg %a`, []float64{-2147483648}, true},
		{"i64 within 2^53", `%a = const {dtype="i64", value=4503599627370496}
%b = const {dtype="i64", value=2}
%r = mul %a, %b`, []float64{1 << 53}, true},
		{"i64 beyond 2^53 not folded", `%a = const {dtype="i64", value=4503599627370496}
%b = const {dtype="i64", value=3}
%r = mul %a, %b`, nil, false},
		{"list with filled", `%a = const {shape=[2,2], value=[1, 2, 3, 4]}
%b = const {value=0.5}
%r = mul %a, %b`, []float64{0.5, 1, 1.5, 2}, true},
		{"list broadcast", `%a = const {shape=[2,1], value=[1, 2]}
%b = const {value=[10, 20, 30]}
%r = add %a, %b`, []float64{11, 21, 31, 12, 22, 32}, true},
		{"transpose of a list", `%a = const {shape=[2,3], value=[1, 2, 3, 4, 5, 6]}
%r = transpose %a {perm=[1,0]}`, []float64{1, 4, 2, 5, 3, 6}, true},
		{"broadcast of a list", `%a = const {shape=[2,1], value=[1, 2]}
%r = broadcast_to %a {shape=[2,2]}`, []float64{1, 1, 2, 2}, true},
		{"large filled folds", `%a = const {value=2.0}
%r = broadcast_to %a {shape=[1000,1000]}`, []float64{2}, true},
		{"large list not folded", `%a = const {shape=[2,1], value=[1, 2]}
%r = broadcast_to %a {shape=[2,1000]}`, nil, false},
		{"exp of f32 by vmath", `%a = const {value=1.0}
%r = exp %a`, []float64{float64(vmath.Exp32Scalar(1))}, true},
		{"tanh of an f64 list", `%a = const {dtype="f64", shape=[3], value=[-1, 0.5, 2]}
%r = tanh %a`, []float64{math.Tanh(-1), math.Tanh(0.5), math.Tanh(2)}, true},
		{"log NaN not folded", `%a = const {value=-1.0}
%r = log %a`, nil, false},
		{"sum not folded", `%a = const {shape=[3], value=1.0}
%r = sum %a`, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := simplifyValue(t, "graph fold\n"+tc.src+"\noutput %r\n", "r")
			if !tc.fold {
				if v.Op == ir.OpConst {
					t.Fatalf("folded to %s", v.Attrs)
				}
				return
			}
			if v.Op != ir.OpConst {
				t.Fatalf("not folded: %s", v.Op)
			}
			av, _ := v.Attrs.Get("value")
			got, _ := av.AsFloats()
			if len(got) != len(tc.want) {
				t.Fatalf("value %s, want %v", av, tc.want)
			}
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(tc.want[i]) {
					t.Errorf("element %d: %v (%#x), want %v (%#x)", i, got[i], math.Float64bits(got[i]), tc.want[i], math.Float64bits(tc.want[i]))
				}
			}
		})
	}
}

// TestSimplifyNeverRedirectsOutputs: every output keeps its id's name and
// is still computed; no gradient or update is a leaf.
func TestSimplifyNeverRedirectsOutputs(t *testing.T) {
	for _, file := range simplifyGoldenFiles(t) {
		g := simplifyParseFile(t, file)
		var names []string
		for _, o := range g.Outputs {
			names = append(names, g.Value(o).Name)
		}
		if err := passes.Simplify(g); err != nil {
			t.Fatal(err)
		}
		for i, o := range g.Outputs {
			if got := g.Value(o).Name; got != names[i] {
				t.Errorf("%s: output %d is %%%s, was %%%s", file, i, got, names[i])
			}
		}
		for _, gp := range g.Grads {
			if g.Value(gp.Grad).Op.IsLeaf() {
				t.Errorf("%s: the gradient of %s is the leaf %s", file, g.NameOf(gp.Param), g.NameOf(gp.Grad))
			}
		}
		for _, u := range g.Updates {
			if g.Value(u.Value).Op.IsLeaf() {
				t.Errorf("%s: the update of %s is the leaf %s", file, g.NameOf(u.Target), g.NameOf(u.Value))
			}
		}
	}
}

// TestSimplifyTimeNote: KILN_DEBUG=time prints the rounds and rewrites on
// the simplify pass's line.
func TestSimplifyTimeNote(t *testing.T) {
	g := mustParse(t, `graph note
param %x: f32[3]
%one = const {value=1.0}
%y = mul %x, %one
%z = tanh %y
output %z
`)
	var out bytes.Buffer
	ps := passes.Pipeline(passes.Options{})
	if err := passes.Run(g, ps, passes.Debug{Time: true, Out: &out}, nil); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "pass simplify ") {
			line = l
		}
	}
	if !strings.Contains(line, "(2 rounds; mul-one 1)") {
		t.Errorf("simplify's timing line is %q, want the rounds and rules noted", line)
	}
	if n := strings.Count(out.String(), "\n"); n != len(ps) {
		t.Errorf("%d lines for %d passes:\n%s", n, len(ps), out.String())
	}
}
