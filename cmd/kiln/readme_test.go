package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The sample sessions of the README and of the pages under docs/ are
// checked against what kiln prints, so that they cannot drift from the
// code. A sample is a fenced block with
// lines of the form
//
//	$ go run ./cmd/kiln ARGS...
//
// each followed by the output the command prints on stdout. In the expected
// output a line "..." (indented or not) stands for any number of lines; a command followed by
// no lines may print anything. An HTML comment `<!-- numbers vary -->` on
// the line before a block marks it as showing timings: its digits are not
// compared. Commands run in a scratch directory that sees the repository's
// examples/, bench/ and tests/; paths under /tmp/ are moved into it.

// readmeCommand is one "$ go run ./cmd/kiln" line of a sample with
// the output shown under it.
type readmeCommand struct {
	line        int // of the "$" line, 1-based
	args        []string
	want        []string
	numbersVary bool
}

// readmeCommands returns every sample command of the page at path.
func readmeCommands(t *testing.T, path string) []readmeCommand {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		cmds        []readmeCommand
		inBlock     bool
		numbersVary bool
		prev        string
		cur         *readmeCommand
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```") && !inBlock:
			inBlock = true
			numbersVary = strings.TrimSpace(prev) == "<!-- numbers vary -->"
		case strings.HasPrefix(line, "```"):
			inBlock, cur = false, nil
		case inBlock && strings.HasPrefix(line, "$ go run ./cmd/kiln "):
			cmds = append(cmds, readmeCommand{
				line:        n,
				args:        strings.Fields(strings.TrimPrefix(line, "$ go run ./cmd/kiln ")),
				numbersVary: numbersVary,
			})
			cur = &cmds[len(cmds)-1]
		case inBlock && cur != nil:
			cur.want = append(cur.want, line)
		}
		prev = line
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cmds
}

var digits = regexp.MustCompile(`[0-9]+`)

// matchLines reports whether got matches want, where a want line "..."
// (indented or not) matches any number of got lines. With numbersVary, runs of digits are
// not compared.
func matchLines(got, want []string, numbersVary bool) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for i := 0; i <= len(got); i++ {
			if matchLines(got[i:], want[1:], numbersVary) {
				return true
			}
		}
		return false
	}
	if len(got) == 0 {
		return false
	}
	g, w := got[0], want[0]
	if numbersVary {
		g, w = digits.ReplaceAllString(g, "0"), digits.ReplaceAllString(w, "0")
	}
	return g == w && matchLines(got[1:], want[1:], numbersVary)
}

func TestREADMESamples(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	type sample struct {
		page string // relative to the repository
		readmeCommand
	}
	var cmds []sample
	for _, page := range pages {
		rel, _ := filepath.Rel(root, page)
		for _, c := range readmeCommands(t, page) {
			cmds = append(cmds, sample{rel, c})
		}
	}
	if len(cmds) < 15 {
		t.Fatalf("found %d sample commands in README.md and docs/; the parser has lost them", len(cmds))
	}
	dir := t.TempDir()
	for _, sub := range []string{"examples", "bench", "tests"} {
		if err := os.Symlink(filepath.Join(root, sub), filepath.Join(dir, sub)); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	for _, c := range cmds {
		args := make([]string, len(c.args))
		for i, a := range c.args {
			args[i] = strings.Replace(a, "/tmp/", dir+"/", 1)
		}
		r := runKiln(t, args...)
		if r.code != 0 {
			t.Errorf("%s:%d: kiln %s: exit status %d\n%s", c.page, c.line, strings.Join(c.args, " "), r.code, r.stderr)
			continue
		}
		if len(c.want) == 0 {
			continue
		}
		got := strings.Split(strings.TrimSuffix(strings.ReplaceAll(r.stdout, dir+"/", "/tmp/"), "\n"), "\n")
		if !matchLines(got, c.want, c.numbersVary) {
			t.Errorf("%s:%d: kiln %s prints\n%s\nbut the page shows\n%s",
				c.page, c.line, strings.Join(c.args, " "), strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
}

func TestMatchLines(t *testing.T) {
	tests := []struct {
		got, want []string
		vary      bool
		ok        bool
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, false, true},
		{[]string{"a", "b"}, []string{"a", "c"}, false, false},
		{[]string{"a"}, []string{"a", "b"}, false, false},
		{[]string{"a", "x", "y", "b"}, []string{"a", "...", "b"}, false, true},
		{[]string{"a", "b"}, []string{"a", "...", "b"}, false, true},
		{[]string{"a", "x"}, []string{"a", "...", "b"}, false, false},
		{[]string{"a", "x"}, []string{"a", "..."}, false, true},
		{[]string{"a", "x", "b"}, []string{"a", "  ...", "b"}, false, true},
		{[]string{"median 0.25 ms"}, []string{"median 0.31 ms"}, false, false},
		{[]string{"median 0.25 ms"}, []string{"median 0.31 ms"}, true, true},
		{[]string{"median 0.25 s"}, []string{"median 0.31 ms"}, true, false},
	}
	for _, tt := range tests {
		if got := matchLines(tt.got, tt.want, tt.vary); got != tt.ok {
			t.Errorf("matchLines(%q, %q, %v) = %v, want %v", tt.got, tt.want, tt.vary, got, tt.ok)
		}
	}
}
