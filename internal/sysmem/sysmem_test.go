package sysmem

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestParseMeminfo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text string
		n    int64
		ok   bool
	}{
		{"MemTotal:       24683620 kB\nMemFree:         1000 kB\nMemAvailable:   22921096 kB\n", 22921096 << 10, true},
		{"MemAvailable: 0 kB\n", 0, true},
		{"MemTotal: 5 kB\n", 0, false},
		{"MemAvailable: lots kB\n", 0, false},
		{"MemAvailable: -5 kB\n", 0, false},
		{"MemAvailable: 99999999999999999999 kB\n", 0, false},
		{"", 0, false},
	}
	for _, tc := range tests {
		n, ok := parseMeminfo([]byte(tc.text))
		if n != tc.n || ok != tc.ok {
			t.Errorf("parseMeminfo(%q) = %d, %v; want %d, %v", tc.text, n, ok, tc.n, tc.ok)
		}
	}
}

func TestAvailableOnLinux(t *testing.T) {
	t.Parallel()
	n, ok := Available()
	if runtime.GOOS == "linux" && (!ok || n <= 0) {
		t.Errorf("Available() = %d, %v; want a positive count on Linux", n, ok)
	}
}

// TestAvailableHonoursTheGoMemoryLimit checks that a memory limit set for
// the Go runtime caps what Available reports. It changes the process's
// limit, so it does not run in parallel.
func TestAvailableHonoursTheGoMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(12345 << 10)
	defer debug.SetMemoryLimit(old)
	if n, ok := Available(); n != 12345<<10 || !ok {
		t.Errorf("Available() = %d, %v under a limit of %d; want the limit", n, ok, 12345<<10)
	}
	if err := Check("batch", 12346<<10); err == nil || err.Error() != "batch of 12.1 MiB exceeds the 12.1 MiB of memory available" {
		t.Errorf("Check: %v", err)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	const gib = 1 << 30
	tests := []struct {
		n, avail int64
		known    bool
		want     string
	}{
		{32 * gib, 21*gib + 3*gib/10, true, "arena of 32.0 GiB exceeds the 21.3 GiB of memory available"},
		{21 * gib, 21 * gib, true, ""},
		{0, 0, true, ""},
		{32 * gib, 0, false, ""},
		{MaxAlloc, 0, false, ""},
		{MaxAlloc + 1, 0, false, "arena of 128.0 TiB exceeds the 128.0 TiB any process can address"},
		{MaxAlloc + 1, MaxAlloc * 2, true, "arena of 128.0 TiB exceeds the 128.0 TiB any process can address"},
		{-1, gib, true, "arena of -1 bytes: a negative size"},
	}
	for _, tc := range tests {
		err := check("arena", tc.n, tc.avail, tc.known)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("check(%d, %d, %v) = %q, want %q", tc.n, tc.avail, tc.known, got, tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 bytes"}, {1023, "1023 bytes"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{32 << 30, "32.0 GiB"}, {1 << 40, "1.0 TiB"}, {1 << 62, "4.0 EiB"},
	}
	for _, tc := range tests {
		if got := Format(tc.n); got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
