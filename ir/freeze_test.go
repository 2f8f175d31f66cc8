package ir_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/kilnml/kiln/ir"
)

// TestMatchFrozen checks which params -freeze and -train freeze, and their
// errors.
func TestMatchFrozen(t *testing.T) {
	names := []string{"body.0.weight", "body.0.bias", "head.weight", "head.bias"}
	re := regexp.MustCompile
	for _, tc := range []struct {
		name          string
		freeze, train *regexp.Regexp
		want          []bool
		err           string
	}{
		{"none", nil, nil, []bool{false, false, false, false}, ""},
		{"freeze", re(`^body\.`), nil, []bool{true, true, false, false}, ""},
		{"train", nil, re(`weight$`), []bool{false, true, false, true}, ""},
		{"both", re("a"), re("b"), nil, "both a freeze and a train pattern are given; give one"},
		{"freeze matches none", re("conv"), nil, nil, `freeze pattern "conv" matches no param; the params are body.0.weight, body.0.bias, head.weight, head.bias`},
		{"train matches none", nil, re("^x"), nil, `train pattern "^x" matches no param; the params are body.0.weight, body.0.bias, head.weight, head.bias`},
	} {
		got, err := ir.MatchFrozen(names, tc.freeze, tc.train)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestFreezeFormat checks that Freeze marks the params it selects and that
// the mark survives formatting and parsing.
func TestFreezeFormat(t *testing.T) {
	src := "graph g\nparam %w: f32[2]\nparam %b: f32[2] {init=\"ones\"}\n%s = add %w, %b\n%l = sum %s\noutput %l\n"
	g, err := ir.Parse("g.kir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.Freeze(g, nil, regexp.MustCompile("w")); err != nil {
		t.Fatal(err)
	}
	h, err := ir.Parse("formatted", []byte(g.Format()))
	if err != nil {
		t.Fatalf("%v\n%s", err, g.Format())
	}
	w, _ := h.Lookup("w")
	b, _ := h.Lookup("b")
	if h.Frozen(w) || !h.Frozen(b) || !slices.Equal(h.Trainable(), []ir.ID{w}) {
		t.Errorf("after Freeze(-train w) and a round trip: w frozen %v, b frozen %v, trainable %v\n%s", h.Frozen(w), h.Frozen(b), h.Trainable(), g.Format())
	}
}
