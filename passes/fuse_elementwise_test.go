package passes

import (
	"github.com/kilnml/kiln/internal/golden"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilnml/kiln/ir"
)

// TestFuseElementwiseGolden runs the elementwise fusion and DCE over each
// testdata/fuseew/NAME.kir and compares the result with NAME.golden
// (go test ./passes -run FuseElementwiseGolden -update rewrites them). The
// result must pass ir.Check and parse back to itself.
func TestFuseElementwiseGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/fuseew/*.kir")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".kir")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			g, err := ir.Parse(file, src)
			if err != nil {
				t.Fatal(err)
			}
			if err := fuseElementwise(g); err != nil {
				t.Fatal(err)
			}
			if err := DCE(g); err != nil {
				t.Fatal(err)
			}
			if err := ir.Check(g); err != nil {
				t.Fatalf("after fusion: %v", err)
			}
			got := g.Format()
			back, err := ir.Parse(name, []byte(got))
			if err != nil {
				t.Fatalf("the fused graph does not parse: %v", err)
			}
			if d := cmp.Diff(got, back.Format()); d != "" {
				t.Errorf("the fused graph does not print back to itself:\n%s", d)
			}
			goldenPath := strings.TrimSuffix(file, ".kir") + ".golden"
			if golden.Update() {
				if err := os.WriteFile(goldenPath, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(want), got); d != "" {
				t.Errorf("%s differs (-want +got):\n%s", goldenPath, d)
			}
		})
	}
}
