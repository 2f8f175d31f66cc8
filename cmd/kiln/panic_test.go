package main

import (
	"io"
	"strings"
	"testing"
)

// TestPanicIsAnInternalError checks that a panic in a command is reported
// as an internal error on one line with exit status 1, not 2 (the status of
// a usage error) and not a crash, and that KILN_DEBUG adds the stack. It
// swaps the command table, so it must not run in parallel.
func TestPanicIsAnInternalError(t *testing.T) {
	saved := commands
	t.Cleanup(func() { commands = saved })
	commands = append(commands[:len(commands):len(commands)], command{name: "boom", run: func([]string, io.Writer) error {
		var s []int
		_ = s[5] // index out of range
		return nil
	}})

	r := runKiln(t, "boom")
	r.want(t, 1)
	line := oneLine(t, r.stderr)
	want := "kiln boom: internal error (a bug in kiln; set KILN_DEBUG=check for the stack): runtime error: index out of range [5] with length 0"
	if line != want {
		t.Errorf("stderr:\n got  %s\n want %s", line, want)
	}

	t.Setenv("KILN_DEBUG", "check")
	r = runKiln(t, "boom")
	r.want(t, 1)
	first, rest, _ := strings.Cut(r.stderr, "\n")
	if first != want || !strings.Contains(rest, "goroutine") || !strings.Contains(rest, "panic_test.go") {
		t.Errorf("with KILN_DEBUG, stderr lacks the line then the stack:\n%s", r.stderr)
	}
}

// TestLongArgumentIsCut checks that an unknown command of a megabyte is
// quoted in at most ir.MaxQuoted characters.
func TestLongArgumentIsCut(t *testing.T) {
	t.Parallel()
	r := runKiln(t, strings.Repeat("x", 1<<20))
	r.want(t, 2)
	first, _, _ := strings.Cut(r.stderr, "\n")
	if want := `kiln: unknown command "` + strings.Repeat("x", 77) + `..."`; first != want {
		t.Errorf("first line of stderr %.200q, want %q", first, want)
	}
}
