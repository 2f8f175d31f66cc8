package ir

import "testing"

// TestEveryOpHasARow checks the op table: each op of the enum has a row with
// a unique name, a doc line and (for computed ops) an Infer function; every
// attribute has a doc; non-differentiable ops that take floats say so.
func TestEveryOpHasARow(t *testing.T) {
	names := map[string]Op{}
	for _, op := range Ops() {
		info := op.Info()
		if info.Name == "" {
			t.Errorf("op %d has no row in the table", op)
			continue
		}
		if prev, dup := names[info.Name]; dup {
			t.Errorf("ops %d and %d are both named %q", prev, op, info.Name)
		}
		names[info.Name] = op
		if info.Doc == "" {
			t.Errorf("op %s has no Doc", op)
		}
		if !op.IsLeaf() && info.Infer == nil {
			t.Errorf("op %s has no Infer", op)
		}
		if info.Grad != nil && info.NoGrad != "" {
			t.Errorf("op %s has both a gradient rule and a NoGrad reason", op)
		}
		for _, a := range info.Attrs {
			if a.Doc == "" {
				t.Errorf("op %s attribute %s has no Doc", op, a.Name)
			}
		}
		if info.Optional > len(info.Args) {
			t.Errorf("op %s: Optional %d > %d args", op, info.Optional, len(info.Args))
		}
	}
}

// TestIndexArgsDeclared: every op with an argument named as indices or
// labels declares their range in its table row (Indices), so random test
// inputs for it stay in range.
func TestIndexArgsDeclared(t *testing.T) {
	for _, op := range Ops() {
		info := op.Info()
		for _, a := range info.Args {
			if (a == "labels" || a == "index" || a == "indices") && info.Indices == nil {
				t.Errorf("%s: argument %q holds indices, but the op's row has no Indices", info.Name, a)
			}
		}
	}
}
