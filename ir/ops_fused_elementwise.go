package ir

// Fused elementwise chains, matmul epilogues and reduction prologues: ops
// that carry a small elementwise program in their attributes. They appear
// only after autodiff.

func fusedElementwiseOps() []opRow {
	return nil
}
