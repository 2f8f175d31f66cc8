package ir

// Fused patterns: ops that the fuse pass puts in place of a group of ops
// with a dedicated one-pass kernel. They appear only after autodiff.

func fusedPatternOps() []opRow {
	return nil
}
