package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteFile(path, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("two")); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	entries, _ := os.ReadDir(dir)
	if string(got) != "two" || st.Mode().Perm() != 0o644 || len(entries) != 1 {
		t.Errorf("content %q, mode %v, %d files; want \"two\", 0644, 1", got, st.Mode().Perm(), len(entries))
	}
	// A failed write leaves the old file and no temporary one.
	if err := WriteFile(filepath.Join(dir, "missing", "f"), []byte("x")); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files after a failed write", len(entries))
	}
}

// TestErrorsNamePath checks that errors name the destination, not the
// temporary file, and that CheckDir finds an unwritable directory.
func TestErrorsNamePath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "missing", "f")
	err := WriteFile(path, []byte("x"))
	if err == nil || err.Error() != "write "+path+": no such file or directory" {
		t.Errorf("WriteFile into a missing directory: %v", err)
	}
	if err := CheckDir(dir); err != nil {
		t.Errorf("CheckDir(%s): %v", dir, err)
	}
	if err := CheckDir(filepath.Join(dir, "missing")); err == nil || err.Error() != "no such file or directory" {
		t.Errorf("CheckDir of a missing directory: %v", err)
	}
	if err := CheckDir(file); err == nil || err.Error() != "not a directory" {
		t.Errorf("CheckDir of a file: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d entries after CheckDir, want 1", len(entries))
	}
}
