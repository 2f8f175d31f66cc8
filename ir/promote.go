package ir

import "fmt"

// Promote returns a copy of g computed in float64: every f32 value becomes
// f64, and so does every dtype attribute that says "f32" (const, one_hot).
// Numerical checks run the promoted graph as their reference.
func (g *Graph) Promote() (*Graph, error) {
	c := g.Clone()
	for i := range c.Values {
		v := &c.Values[i]
		if v.Type.DType == F32 {
			v.Type.DType = F64
		}
		if d, ok := v.Attrs.Get("dtype"); ok && d.Kind == AttrString && d.S == "f32" {
			v.Attrs = v.Attrs.With("dtype", String("f64"))
		}
	}
	if err := Check(c); err != nil {
		return nil, fmt.Errorf("promoting %s to f64: %w", g.Name, err)
	}
	return c, nil
}
