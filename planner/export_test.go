package planner

// Disjoint and Overlapping expose Check's two overlap tests.
func (p *Plan) Disjoint() bool     { return p.disjoint() }
func (p *Plan) Overlapping() error { return p.overlapping() }
