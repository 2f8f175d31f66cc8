package ir

// Reductions beyond sum and mean.

func reduceOps() []opRow {
	return nil
}
