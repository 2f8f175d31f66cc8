package mpi

import (
	"strings"
	"testing"
)

func TestCountCPUList(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		fail bool
	}{
		{s: "0", n: 1},
		{s: "0-1", n: 2},
		{s: "0-3,8,10-11", n: 7},
		{s: "0-63", n: 64},
		{s: "", fail: true},
		{s: "0-", fail: true},
		{s: "3-1", fail: true},
		{s: "a", fail: true},
		{s: "0,,1", fail: true},
	} {
		n, err := countCPUList(tc.s)
		if tc.fail {
			if err == nil {
				t.Errorf("countCPUList(%q) = %d, want an error", tc.s, n)
			}
			continue
		}
		if err != nil || n != tc.n {
			t.Errorf("countCPUList(%q) = %d, %v; want %d", tc.s, n, err, tc.n)
		}
	}
}

func TestBindingWarning(t *testing.T) {
	for _, tc := range []struct {
		usable, online int
		warn           bool
	}{
		{1, 1, false}, {2, 2, false}, {4, 8, false}, {1, 2, true}, {1, 64, true},
	} {
		w := bindingWarning(tc.usable, tc.online)
		if (w != "") != tc.warn {
			t.Errorf("bindingWarning(%d, %d) = %q, want a warning: %v", tc.usable, tc.online, w, tc.warn)
		}
		if w != "" && (!strings.Contains(w, "--bind-to none") || !strings.Contains(w, "PE=") || strings.Contains(w, "\n")) {
			t.Errorf("bindingWarning(%d, %d) = %q: expected one line naming --bind-to none and --map-by ppr:1:node:PE=N", tc.usable, tc.online, w)
		}
	}
	// On this machine: a warning exactly when bound to one of several CPUs.
	if w := BindingWarning(); w != "" && !strings.Contains(w, "--bind-to none") {
		t.Errorf("BindingWarning() = %q", w)
	}
}
