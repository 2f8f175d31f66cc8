package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
)

// digitsMLP is the built-in example, relative to this package's directory
// (where go test runs).
const digitsMLP = "../../examples/digits/mlp.kir"

func TestMain(m *testing.M) {
	// The commands read KILN_DEBUG; only the tests that set it may see it.
	os.Unsetenv("KILN_DEBUG")
	code := m.Run()
	if kilnBinary.dir != "" {
		os.RemoveAll(kilnBinary.dir)
	}
	os.Exit(code)
}

// result is what one in-process run of kiln produced.
type result struct {
	code           int
	stdout, stderr string
}

// runKiln runs the command in-process with args and returns its exit status
// and output.
func runKiln(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// want fails the test unless r exited with code.
func (r result) want(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// oneLine fails the test unless s is exactly one line ending in a newline,
// and returns that line.
func oneLine(t *testing.T, s string) string {
	t.Helper()
	if !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		t.Fatalf("want exactly one line on stderr, got %q", s)
	}
	return strings.TrimSuffix(s, "\n")
}

// containsAll fails the test for each of subs that s lacks.
func containsAll(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s lacks %q:\n%s", what, sub, s)
		}
	}
}

// writeFile writes text to name in a fresh temporary directory and returns
// its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTopLevel(t *testing.T) {
	t.Parallel()
	commands := []string{"dump", "grad", "plan", "train"}
	tests := []struct {
		name       string
		args       []string
		code       int
		wantStdout []string // substrings of stdout
		wantStderr []string // substrings of stderr
	}{
		{"no args", nil, 2, append([]string{"usage: kiln COMMAND"}, commands...), nil},
		{"help", []string{"help"}, 0, append([]string{"usage: kiln COMMAND"}, commands...), nil},
		{"-h", []string{"-h"}, 0, []string{"usage: kiln COMMAND"}, nil},
		{"--help", []string{"--help"}, 0, []string{"usage: kiln COMMAND"}, nil},
		{"unknown command", []string{"frobnicate", "x.kir"}, 2, nil, []string{`unknown command "frobnicate"`, "usage: kiln COMMAND"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runKiln(t, tt.args...)
			r.want(t, tt.code)
			containsAll(t, "stdout", r.stdout, tt.wantStdout...)
			containsAll(t, "stderr", r.stderr, tt.wantStderr...)
			if tt.wantStdout == nil && r.stdout != "" {
				t.Errorf("unexpected stdout:\n%s", r.stdout)
			}
			if tt.wantStderr == nil && r.stderr != "" {
				t.Errorf("unexpected stderr:\n%s", r.stderr)
			}
		})
	}
}

// TestUsageErrors checks the usage errors every command shares: exit 2,
// the error, then the command's usage line.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		msg  string
	}{
		{[]string{"dump"}, "missing FILE.kir"},
		{[]string{"dump", "a.kir", "b.kir"}, "expected one FILE.kir, found 2 arguments: a.kir b.kir"},
		{[]string{"dump", "-nosuch", digitsMLP}, "flag provided but not defined: -nosuch"},
		{[]string{"dump", "-optimizer", "adagrad", digitsMLP}, "adagrad"},
		{[]string{"plan"}, "missing FILE.kir"},
		{[]string{"plan", "-optimizer", "sgd", "-lr", "-1", digitsMLP}, "learning rate must be positive, found -1"},
		{[]string{"plan", "-accum", "2", "-momentum", "0.9", digitsMLP}, "-accum, -momentum: set with -optimizer KIND, which appends the update they configure"},
		{[]string{"dump", "-optimizer", "sgd", "-accum", "20000000", digitsMLP}, "gradient accumulation must be 1 to 16777216 steps an update, found 20000000"},
		{[]string{"grad", digitsMLP}, "both -inputs and -out are required"},
		{[]string{"train", "a.kir", "b.kir", "-data", "x.csv"}, "expected at most one MODEL.kir"},
		{[]string{"train", "-holdout", "1"}, "-holdout must be in (0,1)"},
		{[]string{"bench", "-workers", "100000", digitsMLP}, "-workers must be at most 256, found 100000"},
		{[]string{"train", "-workers", "257"}, "-workers must be at most 256, found 257"},
		{[]string{"gradcheck", "-workers", "1000", digitsMLP}, "-workers must be at most 256, found 1000"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runKiln(t, tt.args...)
			r.want(t, 2)
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			if len(lines) != 2 {
				t.Fatalf("want the error and a usage line on stderr, got:\n%s", r.stderr)
			}
			containsAll(t, "error line", lines[0], "kiln "+tt.args[0]+": ", tt.msg)
			if !strings.HasPrefix(lines[1], "usage: kiln "+tt.args[0]+" ") {
				t.Errorf("second line is not the usage of %s: %q", tt.args[0], lines[1])
			}
			if r.stdout != "" {
				t.Errorf("unexpected stdout:\n%s", r.stdout)
			}
		})
	}
}

// TestCommandHelp checks that COMMAND -h lists the command's flags on the
// stdout run was given, and exits 0.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		command string
		flags   []string
	}{
		{"dump", []string{"-after", "-dot", "-optimizer"}},
		{"grad", []string{"-inputs", "-out"}},
		{"plan", []string{"-optimizer", "-lr", "-momentum", "-report"}},
		{"train", []string{"-data", "-epochs", "-init", "-save", "-seed"}},
	}
	for _, tt := range tests {
		for _, h := range []string{"-h", "-help", "--help"} {
			t.Run(tt.command+" "+h, func(t *testing.T) {
				r := runKiln(t, tt.command, h)
				r.want(t, 0)
				containsAll(t, "stdout", r.stdout, tt.flags...)
				if r.stderr != "" {
					t.Errorf("unexpected stderr:\n%s", r.stderr)
				}
			})
		}
	}
}

func TestOpsCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"ops"}, &out, &errb); code != 0 {
		t.Fatalf("kiln ops: exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(ir.Ops()) {
		t.Errorf("kiln ops printed %d lines for %d ops", len(lines), len(ir.Ops()))
	}
	for _, want := range []string{"softmax x {axis=-1}", "reshape x {shape=<list of ints>}", "matmul a, b"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("kiln ops lacks %q", want)
		}
	}
	out.Reset()
	if code := run([]string{"ops", "-md"}, &out, &errb); code != 0 || out.String() != ir.Reference() {
		t.Errorf("kiln ops -md: exit %d, output equal to ir.Reference: %v", code, out.String() == ir.Reference())
	}
}

func TestGradcheckCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"gradcheck", "../../examples/linreg/linreg.kir"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "all 1 params within") {
		t.Errorf("output:\n%s", out.String())
	}
	out.Reset()
	errb.Reset()
	code := run([]string{"gradcheck", "-inputs", "../../examples/linreg/inputs.safetensors", "../../examples/linreg/linreg.kir"}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "all 1 params within") {
		t.Errorf("with -inputs: exit %d, output:\n%s%s", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := run([]string{"gradcheck", "-inputs", "../../examples/linreg/inputs.safetensors", "../../examples/digits/mlp.kir"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "is not an input or param") {
		t.Errorf("mismatched inputs: exit %d, stderr %q", code, errb.String())
	}
}

// kinkKir is relu summed: with -step 1 every element of %w in
// [-1,-0.1]∪[0.1,1] lies within 2h of the kink at 0.
const kinkKir = `graph kink
param %w: f64[3]
%r = relu %w
%loss = sum %r
output %loss
`

// TestGradcheckFlags checks that -h is help (the step is -step) and that a
// param with every element skipped is reported as skipped, not as
// exceeding the bound at index -1.
func TestGradcheckFlags(t *testing.T) {
	t.Parallel()
	r := runKiln(t, "gradcheck", "-h")
	r.want(t, 0)
	containsAll(t, "gradcheck -h", r.stdout, "-step", "finite-difference step", "-rtol", "-atol")
	model := writeFile(t, "kink.kir", kinkKir)
	r = runKiln(t, "gradcheck", "-step", "0.001", model)
	r.want(t, 0)
	containsAll(t, "gradcheck -step 0.001", r.stdout, "all 1 params within")
	r = runKiln(t, "gradcheck", "-step", "1", model)
	r.want(t, 1)
	containsAll(t, "gradcheck -step 1", r.stdout, "w ", "skipped: all 3 elements lie within 2h = 2 of a point where the loss is not smooth (a kink such as relu's, a tie of a max)")
	if strings.Contains(r.stdout, "-1") {
		t.Errorf("the report names index -1:\n%s", r.stdout)
	}
	containsAll(t, "gradcheck -step 1", oneLine(t, r.stderr), "1 of 1 params could not be checked: every element was skipped; try a smaller -step")
	for _, step := range []string{"0", "-1", "NaN"} {
		r = runKiln(t, "gradcheck", "-step", step, model)
		r.want(t, 2)
		containsAll(t, "gradcheck -step "+step, r.stderr, "-step must be a positive number, found "+step)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-rtol", "-1"}, "-rtol and -atol must be finite and at least 0, found -1 and 1e-10"},
		{[]string{"-atol", "Inf"}, "-rtol and -atol must be finite and at least 0, found 1e-07 and +Inf"},
		{[]string{"-rtol", "0", "-atol", "0"}, "-rtol and -atol are both 0: no gradient computed in floating point passes"},
	} {
		r = runKiln(t, append(append([]string{"gradcheck"}, tt.args...), model)...)
		r.want(t, 2)
		containsAll(t, "gradcheck "+strings.Join(tt.args, " "), r.stderr, tt.want)
	}
}
