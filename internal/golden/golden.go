// Package golden is the one setup of kiln's golden-file tests: the -update
// flag that rewrites the files under testdata/ (and the generated docs)
// instead of comparing with them, and the comparison itself.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files instead of comparing with them")

// Update reports whether the test run rewrites golden files (-update).
func Update() bool { return *update }

// Check compares got with the golden file at path and fails t with their
// difference; with -update it writes got to path first (creating its
// directory). The message names the command that rewrites the file.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run '%s' -args -update writes it)", err, t.Name())
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs (-want +got; go test -run '%s' -args -update rewrites it):\n%s", path, t.Name(), d)
	}
}

// CheckSection is Check for the part of the file at path between the
// markers begin and end (a generated table inside a hand-written doc):
// with -update it rewrites that part alone.
func CheckSection(t testing.TB, path, begin, end, got string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q and %q", path, begin, end)
	}
	if have := doc[i+len(begin) : j]; have == got {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i+len(begin)]+got+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the part of %s between %q and %q is stale; go test -run '%s' -args -update rewrites it", path, begin, end, t.Name())
}
