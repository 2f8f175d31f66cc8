// Package examples embeds kiln's example models, so that kiln train runs
// them from any directory and a fresh clone has everything it needs.
package examples

import _ "embed"

// DigitsMLP is the built-in example: an MLP (64-64-10) for the 8x8 digits.
//
//go:embed digits/mlp.kir
var DigitsMLP []byte

// DigitsMLPFile is the path of DigitsMLP in the repository, for messages.
const DigitsMLPFile = "examples/digits/mlp.kir"
