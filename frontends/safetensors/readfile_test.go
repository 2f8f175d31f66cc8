package safetensors

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// TestReadFileTooLarge checks that ReadFile refuses a file larger than the
// memory available before reading it, naming the file and both sizes. The
// file is sparse, and the memory available is capped with the Go memory
// limit, so the test changes the process's limit and does not run in
// parallel.
func TestReadFileTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.safetensors")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	old := debug.SetMemoryLimit(256 << 20)
	defer debug.SetMemoryLimit(old)
	_, _, err = ReadFile(path)
	want := path + ": file of 1.0 GiB exceeds the 256.0 MiB of memory available"
	if err == nil || err.Error() != want {
		t.Errorf("ReadFile: %v, want %s", err, want)
	}
}
