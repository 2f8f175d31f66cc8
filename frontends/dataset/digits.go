package dataset

import (
	"bytes"
	_ "embed"
)

// digitsCSVGz is digits/digits.csv.gz; see digits/README.md for its source
// and license.
//
//go:embed digits/digits.csv.gz
var digitsCSVGz []byte

// Digits returns the UCI handwritten digits data embedded in the package:
// 1797 rows of 64 pixel intensities (an 8x8 image, values 0..16) and a label
// 0..9, so N=1797, D=64 and Classes=10. Source: UCI Machine Learning
// Repository, E. Alpaydin and C. Kaynak (1998), licensed CC BY 4.0. Each
// call returns a fresh copy that the caller may modify.
func Digits() (*Dataset, error) {
	return ReadCSV(bytes.NewReader(digitsCSVGz), "digits.csv.gz")
}
