package cpu_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
)

// TestArenaTooLargeIsRefused checks that New refuses an arena no process
// could allocate, naming the plan and the size, before allocating it: 130
// inputs of 1 TiB each, every one legal alone.
func TestArenaTooLargeIsRefused(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("graph huge\n")
	var outs []string
	for i := range 130 {
		fmt.Fprintf(&b, "input %%x%d: f32[268435456,1024]\n%%s%d = sum %%x%d\n", i, i, i)
		outs = append(outs, fmt.Sprintf("%%s%d", i))
	}
	b.WriteString("output " + strings.Join(outs, ", ") + "\n")
	p := plan(t, b.String(), kiln.Options{})
	x, err := cpu.New(p, cpu.Options{Workers: 1})
	if err == nil {
		x.Close()
		t.Fatalf("New allocated an arena of %d bytes", p.ArenaBytes)
	}
	want := "plan huge: arena of 130.0 TiB exceeds the 128.0 TiB any process can address"
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}
