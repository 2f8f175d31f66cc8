package ir

// Kolmogorov-Arnold (B-spline) and differentiable logic-gate layers.

func kanOps() []opRow {
	return nil
}
