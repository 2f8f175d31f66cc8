package planner

// Overlap exposes Check's overlap test.
func (p *Plan) Overlap() error { return p.overlap() }
