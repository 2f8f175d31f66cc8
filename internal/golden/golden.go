// Package golden is the one setup of kiln's golden-file tests: the -update
// flag that rewrites the files under testdata/ (and the generated docs)
// instead of comparing with them, and the comparison itself.
package golden

import (
	"flag"
	"os"
	"path/filepath"
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
