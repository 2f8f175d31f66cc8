package dataset

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kilnml/kiln/internal/sysmem"
)

// KAN2D returns n points drawn uniformly from [-1,1]² (the features x, y)
// with the float target f(x, y) = exp(sin(πx) + y²), the regression task of
// the Kolmogorov-Arnold network example: D = 2, K = 1, targets in R. The
// points depend on seed alone (math/rand/v2's PCG seeded with (seed, 1)).
// It returns an error unless n > 0, and when the rows do not fit in the
// memory available.
func KAN2D(n int, seed uint64) (*Dataset, error) {
	if n <= 0 {
		return nil, fmt.Errorf("kan2d: the number of rows must be positive, found %d", n)
	}
	if err := checkRows("kan2d", n, 3*8); err != nil {
		return nil, err
	}
	src := rand.NewPCG(seed, 1)
	d := &Dataset{X: make([]float64, 2*n), R: make([]float64, n), N: n, D: 2, K: 1}
	for i := range n {
		x, y := uniform(src), uniform(src)
		d.X[2*i], d.X[2*i+1] = x, y
		d.R[i] = KAN2DFunc(x, y)
	}
	return d, nil
}

// KAN2DFunc is the target of KAN2D: exp(sin(πx) + y²).
func KAN2DFunc(x, y float64) float64 { return math.Exp(math.Sin(math.Pi*x) + y*y) }

// checkRows refuses n generated rows of rowBytes bytes each that do not fit
// in the memory available (sysmem.Check), before they are allocated.
func checkRows(name string, n, rowBytes int) error {
	what := fmt.Sprintf("%s: %d rows", name, n)
	if n > sysmem.MaxAlloc/rowBytes {
		return fmt.Errorf("%s of %d bytes each exceed the %s any process can address", what, rowBytes, sysmem.Format(sysmem.MaxAlloc))
	}
	return sysmem.Check(what, int64(n)*int64(rowBytes))
}

// uniform returns a value uniform in [-1, 1) from the 53 high bits of one
// draw, computed here so that it does not depend on the Go release.
func uniform(src *rand.PCG) float64 {
	return float64(src.Uint64()>>11)/(1<<52) - 1
}

// Reverse returns n random token sequences of length length over the
// tokens [0, vocab), each with its reversal as the per-token labels: the
// sequence task of the transformer example. D = K = length, Vocab = Classes
// = vocab, targets in Y. The sequences depend on seed alone. It returns an
// error unless n and length are positive and vocab is at least 2, and when
// the rows do not fit in the memory available.
func Reverse(n, length, vocab int, seed uint64) (*Dataset, error) {
	switch {
	case n <= 0:
		return nil, fmt.Errorf("reverse: the number of rows must be positive, found %d", n)
	case length <= 0:
		return nil, fmt.Errorf("reverse: the sequence length must be positive, found %d", length)
	case vocab < 2:
		return nil, fmt.Errorf("reverse: the vocabulary must have at least 2 tokens, found %d", vocab)
	case length > sysmem.MaxAlloc/16:
		return nil, fmt.Errorf("reverse: a sequence length of %d cannot be addressed", length)
	}
	if err := checkRows("reverse", n, 16*length); err != nil {
		return nil, err
	}
	src := rand.NewPCG(seed, 2)
	d := &Dataset{
		X: make([]float64, n*length), Y: make([]int64, n*length),
		N: n, D: length, K: length, Classes: vocab, Vocab: vocab,
	}
	for i := range n {
		row := d.X[i*length : (i+1)*length]
		for j := range row {
			row[j] = float64(uint64n(src, uint64(vocab)))
		}
		for j := range row {
			d.Y[i*length+j] = int64(row[length-1-j])
		}
	}
	return d, nil
}
