// Package gputest holds what tests that need a GPU share: Need, which
// decides between running, failing and skipping.
package gputest

import (
	"os"
	"testing"

	"github.com/kilnml/kiln/exec/gpu"
)

// Need skips t when no GPU adapter exists, except in CI (CI set), where
// the software adapter must be there and its absence fails the test.
func Need(t testing.TB) {
	t.Helper()
	if _, err := gpu.Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI has no GPU adapter (install mesa-vulkan-drivers): %v", err)
		}
		t.Skipf("skipped: no GPU adapter on this machine (%v); CI runs this on Mesa's software adapter", err)
	}
}
