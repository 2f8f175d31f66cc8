package main

import (
	"github.com/kilnml/kiln/internal/golden"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
)

// linregKir is a small model without optimizer state: linear regression.
const linregKir = `graph linreg
input %x: f64[4,3]
input %t: f64[4]
param %w: f64[3]
%p = matmul %x, %w
%loss = mse_loss %p, %t
output %loss
`

// noParamsKir has no params, so no gradient is taken.
const noParamsKir = `graph forward
input %x: f32[2,3]
%y = relu %x
%s = sum %y
output %s
`

// TestDumpRoundTrip checks that the default output of kiln dump, the graph
// after the whole pipeline, parses back and formats to the same text.
func TestDumpRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"digits", []string{"dump", digitsMLP}},
		{"digits adam", []string{"dump", "-optimizer", "adam", digitsMLP}},
		{"digits sgd momentum", []string{"dump", "-optimizer", "sgd", "-momentum", "0.9", digitsMLP}},
		{"linreg", []string{"dump", writeFile(t, "linreg.kir", linregKir)}},
		{"no params", []string{"dump", writeFile(t, "forward.kir", noParamsKir)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runKiln(t, tt.args...)
			r.want(t, 0)
			if r.stderr != "" {
				t.Errorf("unexpected stderr:\n%s", r.stderr)
			}
			g, err := ir.Parse("dump output", []byte(r.stdout))
			if err != nil {
				t.Fatalf("the output does not parse: %v\n%s", err, r.stdout)
			}
			if err := ir.Check(g); err != nil {
				t.Errorf("the output fails ir.Check: %v", err)
			}
			if got := g.Format(); got != r.stdout {
				t.Errorf("Format(Parse(output)) differs from the output:\n--- output\n%s\n--- reformatted\n%s", r.stdout, got)
			}
		})
	}
}

// TestDumpGolden compares kiln dump of the built-in example with
// testdata/digits_mlp.dump.golden; go test -update rewrites it.
func TestDumpGolden(t *testing.T) {
	t.Parallel()
	const goldenPath = "testdata/digits_mlp.dump.golden"
	r := runKiln(t, "dump", digitsMLP)
	r.want(t, 0)
	golden.Check(t, goldenPath, []byte(r.stdout))
}

var afterHeader = regexp.MustCompile(`(?m)^# after (\S+)\n`)

func TestDumpAfterAll(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		passes []string
	}{
		{"grad", []string{digitsMLP}, []string{"verify", "shapes", "canonicalize", "autodiff", "simplify", "fuse", "dce"}},
		{"adam", []string{"-optimizer", "adam", digitsMLP}, []string{"verify", "shapes", "canonicalize", "autodiff", "optimizer", "simplify", "fuse", "dce"}},
		{"no params", []string{writeFile(t, "forward.kir", noParamsKir)}, []string{"verify", "shapes", "canonicalize", "simplify", "fuse", "dce"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runKiln(t, append([]string{"dump", "-after", "all"}, tt.args...)...)
			r.want(t, 0)
			if !strings.HasPrefix(r.stdout, "# after ") {
				t.Fatalf("the output does not start with a # after header:\n%s", r.stdout)
			}
			var got []string
			for _, m := range afterHeader.FindAllStringSubmatch(r.stdout, -1) {
				got = append(got, m[1])
			}
			if strings.Join(got, " ") != strings.Join(tt.passes, " ") {
				t.Errorf("headers for passes %v, want %v", got, tt.passes)
			}
			// Every section is a whole graph.
			sections := afterHeader.Split(r.stdout, -1)[1:]
			for i, s := range sections {
				if _, err := ir.Parse("section", []byte(s)); err != nil {
					t.Errorf("the graph after %s does not parse: %v\n%s", got[i], err, s)
				}
			}
			// The last section is what plain dump prints.
			plain := runKiln(t, append([]string{"dump"}, tt.args...)...)
			plain.want(t, 0)
			if last := sections[len(sections)-1]; last != plain.stdout {
				t.Errorf("the graph after the last pass differs from plain dump:\n--- after %s\n%s\n--- dump\n%s", got[len(got)-1], last, plain.stdout)
			}
		})
	}
}

func TestDumpAfterPass(t *testing.T) {
	t.Parallel()
	r := runKiln(t, "dump", "-after", "autodiff", digitsMLP)
	r.want(t, 0)
	if strings.Contains(r.stdout, "# after") {
		t.Errorf("-after PASS prints a header:\n%s", r.stdout)
	}
	for _, p := range []string{"w1", "b1", "w2", "b2"} {
		if !regexp.MustCompile(`(?m)^grad %` + p + ` = %\S+$`).MatchString(r.stdout) {
			t.Errorf("no grad line for %%%s after autodiff:\n%s", p, r.stdout)
		}
	}
	if _, err := ir.Parse("after autodiff", []byte(r.stdout)); err != nil {
		t.Errorf("the graph after autodiff does not parse: %v", err)
	}

	// After shapes there is no gradient yet.
	r = runKiln(t, "dump", "-after", "shapes", digitsMLP)
	r.want(t, 0)
	if strings.Contains(r.stdout, "\ngrad ") {
		t.Errorf("grad lines after shapes:\n%s", r.stdout)
	}

	// Flags after the file work as well.
	r2 := runKiln(t, "dump", digitsMLP, "-after", "shapes")
	r2.want(t, 0)
	if r2.stdout != r.stdout {
		t.Errorf("dump FILE -after shapes differs from dump -after shapes FILE")
	}
}

func TestDumpDot(t *testing.T) {
	t.Parallel()
	r := runKiln(t, "dump", "-dot", digitsMLP)
	r.want(t, 0)
	if !strings.HasPrefix(r.stdout, "digraph") {
		t.Errorf("-dot output does not start with digraph:\n%s", r.stdout)
	}
	if !strings.HasSuffix(strings.TrimSpace(r.stdout), "}") {
		t.Errorf("-dot output does not end with }:\n%s", r.stdout)
	}
	r = runKiln(t, "dump", "-dot", "-after", "all", digitsMLP)
	r.want(t, 0)
	if n := strings.Count(r.stdout, "digraph"); n != 7 {
		t.Errorf("-dot -after all printed %d graphs, want 7 (one per pass)", n)
	}
	if strings.Contains(r.stdout, "# after") {
		t.Errorf("-dot -after all prints # headers, which are not dot")
	}
}

func TestDumpOptimizer(t *testing.T) {
	t.Parallel()
	params := []string{"w1", "b1", "w2", "b2"}
	tests := []struct {
		kind   string
		states []string // state values that must be declared
	}{
		{"adam", []string{"adam.beta1_power.f32", "adam.beta2_power.f32", "w1.adam_m", "w1.adam_v", "b2.adam_m", "b2.adam_v"}},
		{"sgd", nil},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			r := runKiln(t, "dump", "-optimizer", tt.kind, digitsMLP)
			r.want(t, 0)
			for _, p := range params {
				if !regexp.MustCompile(`(?m)^update %` + regexp.QuoteMeta(p) + ` = %\S+$`).MatchString(r.stdout) {
					t.Errorf("no update line for %%%s", p)
				}
			}
			for _, s := range tt.states {
				if !regexp.MustCompile(`(?m)^state %` + regexp.QuoteMeta(s) + `: f32`).MatchString(r.stdout) {
					t.Errorf("no state declaration for %%%s", s)
				}
				if !regexp.MustCompile(`(?m)^update %` + regexp.QuoteMeta(s) + ` = `).MatchString(r.stdout) {
					t.Errorf("no update line for state %%%s", s)
				}
			}
			if tt.states == nil && regexp.MustCompile(`(?m)^state `).MatchString(r.stdout) {
				t.Errorf("plain sgd declares state:\n%s", r.stdout)
			}
			if t.Failed() {
				t.Logf("output:\n%s", r.stdout)
			}
		})
	}
}

func TestDumpErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "nosuch.kir")
	parseErr := filepath.Join(dir, "bad.kir")
	if err := os.WriteFile(parseErr, []byte("graph bad\ninput %x: f64[4,3]\n%y = bogus %x\noutput %y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	shapeErr := filepath.Join(dir, "shape.kir")
	if err := os.WriteFile(shapeErr, []byte("graph bad\ninput %x: f64[4,3]\nparam %w: f64[4]\n%y = matmul %x, %w\noutput %y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		msg  []string
	}{
		{"unknown pass", []string{"-after", "nosuch", digitsMLP}, 2, []string{`unknown pass "nosuch"`, "verify, inference, shapes, canonicalize, autodiff, dataparallel, optimizer, simplify, fuse, remat, dce"}},
		{"missing file", []string{missing}, 1, []string{missing, "no such file"}},
		{"parse error", []string{parseErr}, 1, []string{parseErr + ":3:6: ", `unknown op "bogus"`}},
		{"shape error", []string{shapeErr}, 1, []string{shapeErr + ":4:6: ", "matmul", "[4,3]", "[4]"}},
		{"pass did not run", []string{"-after", "optimizer", digitsMLP}, 1, []string{digitsMLP, "pass optimizer did not run"}},
		{"no params, no autodiff", []string{"-after", "autodiff", writeFile(t, "forward.kir", noParamsKir)}, 1, []string{"pass autodiff did not run"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runKiln(t, append([]string{"dump"}, tt.args...)...)
			r.want(t, tt.code)
			msg := r.stderr
			if tt.code == 1 {
				msg = oneLine(t, r.stderr)
			}
			containsAll(t, "stderr", msg, append([]string{"kiln dump: "}, tt.msg...)...)
			if r.stdout != "" {
				t.Errorf("unexpected stdout:\n%s", r.stdout)
			}
		})
	}
}
