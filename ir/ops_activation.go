package ir

// Activations.

func activationOps() []opRow {
	return nil
}
