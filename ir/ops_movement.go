package ir

// Shape and data movement.

func movementOps() []opRow {
	return nil
}
