package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputIsInput checks that every command that writes a file refuses an
// output that is one of its inputs (by another spelling of the path or a
// link too) or another output, before doing anything, and leaves the input
// as it was.
func TestOutputIsInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	tiny := path("tiny.kir")
	if err := os.WriteFile(tiny, []byte(tinyMLPKir), 0o644); err != nil {
		t.Fatal(err)
	}
	csv := path("blobs.csv")
	if err := os.WriteFile(csv, []byte(separableCSV(100, 2, 3)), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := path("tiny.kplan")
	runKiln(t, "compile", tiny, "-o", plan).want(t, 0)
	params := path("p.safetensors")
	runKiln(t, "train", tiny, "-data", csv, "-epochs", "1", "-save", params).want(t, 0)
	link := path("link.kir")
	if err := os.Symlink(tiny, link); err != nil {
		t.Fatal(err)
	}
	// Another spelling of tiny.kir: through a ./ and a .. relative to the
	// working directory.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, tiny)
	if err != nil {
		t.Fatal(err)
	}
	respelled := "./" + filepath.Join(filepath.Dir(rel), "..", filepath.Base(dir), "tiny.kir")
	inputs := []string{tiny, csv, plan, params}
	before := map[string][]byte{}
	for _, p := range inputs {
		before[p], _ = os.ReadFile(p)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"compile", tiny, "-o", tiny}, "-o " + tiny + " is the input MODEL.kir"},
		{[]string{"compile", tiny, "-o", respelled}, "-o " + respelled + " is the input MODEL.kir " + tiny},
		{[]string{"compile", link, "-o", tiny}, "-o " + tiny + " is the input MODEL.kir " + link},
		{[]string{"compile", tiny, "-init", params, "-o", params}, "-o " + params + " is the input -init " + params},
		{[]string{"grad", tiny, "-inputs", params, "-out", params}, "-out " + params + " is the input -inputs " + params},
		{[]string{"grad", tiny, "-inputs", params, "-out", tiny}, "-out " + tiny + " is the input FILE.kir " + tiny},
		{[]string{"train", tiny, "-data", csv, "-save", tiny}, "-save " + tiny + " is the input MODEL.kir " + tiny},
		{[]string{"train", tiny, "-data", csv, "-init", params, "-save", params}, "-save " + params + " is the input -init " + params},
		{[]string{"train", tiny, "-data", csv, "-plot", csv}, "-plot " + csv + " is the input -data " + csv},
		{[]string{"train", tiny, "-data", csv, "-save", path("x"), "-plot", path("x")}, "-plot " + path("x") + " is also -save " + path("x")},
		{[]string{"run", plan, "-data", csv, "-save", plan}, "-save " + plan + " is the input FILE.kplan " + plan},
		{[]string{"dump", "-html", tiny, tiny}, "-html " + tiny + " is the input FILE.kir " + tiny},
		{[]string{"bench", "-trace", tiny, tiny}, "-trace " + tiny + " is the input FILE.kir " + tiny},
	} {
		r := runKiln(t, tt.args...)
		r.want(t, 2)
		containsAll(t, strings.Join(tt.args, " "), r.stderr, tt.want, "; it would be overwritten")
		if r.stdout != "" {
			t.Errorf("%v wrote to stdout before refusing:\n%s", tt.args, r.stdout)
		}
	}
	for _, p := range inputs {
		if after, _ := os.ReadFile(p); !bytes.Equal(before[p], after) {
			t.Errorf("%s changed", p)
		}
	}
}

// TestUnwritableOutputs checks that an output that cannot be written (its
// directory is missing, or is a file) is refused before any training or
// compiling, naming the path as given.
func TestUnwritableOutputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tiny := writeFile(t, "tiny.kir", tinyMLPKir)
	csv := writeFile(t, "blobs.csv", separableCSV(100, 2, 3))
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing", "out")
	under := filepath.Join(file, "out")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"train", tiny, "-data", csv, "-save", missing}, "-save " + missing + ": cannot write in " + filepath.Dir(missing) + ": "},
		{[]string{"train", tiny, "-data", csv, "-plot", under}, "-plot " + under + ": cannot write in " + file + ": "},
		{[]string{"train", tiny, "-data", csv, "-save", dir}, "-save " + dir + ": is a directory"},
		{[]string{"train", tiny, "-data", csv, "-checkpoint", filepath.Join(under, "ck")}, "-checkpoint " + filepath.Join(under, "ck") + ": cannot write in " + file + ": "},
		{[]string{"compile", tiny, "-o", missing}, "-o " + missing + ": cannot write in " + filepath.Dir(missing) + ": "},
		{[]string{"grad", tiny, "-inputs", csv, "-out", under}, "-out " + under + ": cannot write in " + file + ": "},
	} {
		r := runKiln(t, tt.args...)
		r.want(t, 1)
		containsAll(t, strings.Join(tt.args, " "), oneLine(t, r.stderr), tt.want)
		if strings.Contains(r.stdout, "epoch") || strings.Contains(r.stdout, "wrote") {
			t.Errorf("%v ran before refusing:\n%s", tt.args, r.stdout)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d entries in %s after the refusals, want only the file", len(entries), dir)
	}
}

// TestWriteOutputFallback checks that an output that cannot be written at
// the end of a run is written to a file in the temporary directory instead,
// and that the error names the path given and the fallback.
func TestWriteOutputFallback(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	missing := filepath.Join(t.TempDir(), "gone", "p.safetensors")
	err := writeOutput("-save", missing, "the trained params", "tiny_mlp", []byte("data"))
	if err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
	entries, _ := os.ReadDir(tmp)
	if len(entries) != 1 {
		t.Fatalf("%d files in the temporary directory, want the fallback", len(entries))
	}
	fallback := filepath.Join(tmp, entries[0].Name())
	if got, _ := os.ReadFile(fallback); string(got) != "data" {
		t.Errorf("the fallback holds %q, want %q", got, "data")
	}
	if !strings.HasPrefix(entries[0].Name(), "kiln-tiny_mlp-") || !strings.HasSuffix(fallback, ".safetensors") {
		t.Errorf("fallback name %s, want kiln-tiny_mlp-*.safetensors", entries[0].Name())
	}
	msg := err.Error()
	containsAll(t, "error", msg, "-save "+missing+": ", "; wrote the trained params to "+fallback+" instead")
	if strings.Contains(msg, ".tmp") {
		t.Errorf("the error names a temporary file: %s", msg)
	}
}
