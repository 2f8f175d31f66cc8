package ir

// Neural-network layers: convolution, pooling, normalization, dropout.

func nnOps() []opRow {
	return nil
}
