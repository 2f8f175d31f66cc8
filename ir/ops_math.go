package ir

// Elementwise math: unary functions, clip, pow, binary min/max, floor division, comparisons and logic.

func mathOps() []opRow {
	return nil
}
