//go:build purego || !amd64

package vmath

var (
	exp32Vec vec
	log32Vec vec
)

const best = implScalar
