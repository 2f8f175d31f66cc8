package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed, r.msg = true, format
}
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }
func (r *recorder) Name() string                      { return "TestX" }

// TestCheck: equal text passes, different text fails naming the file, a
// missing file fails, and -update writes the file so the check passes.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "a.golden")
	r := &recorder{TB: t}
	Check(r, path, []byte("x\n"))
	if !r.failed {
		t.Error("a missing golden file passed")
	}
	*update = true
	r = &recorder{TB: t}
	Check(r, path, []byte("x\n"))
	*update = false
	if r.failed {
		t.Errorf("-update failed: %s", r.msg)
	}
	if b, _ := os.ReadFile(path); string(b) != "x\n" {
		t.Errorf("-update wrote %q", b)
	}
	r = &recorder{TB: t}
	Check(r, path, []byte("x\n"))
	if r.failed {
		t.Errorf("equal text failed: %s", r.msg)
	}
	r = &recorder{TB: t}
	Check(r, path, []byte("y\n"))
	if !r.failed || !strings.Contains(r.msg, "differs") {
		t.Errorf("different text: failed %v, %q", r.failed, r.msg)
	}
}
