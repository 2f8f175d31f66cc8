//go:build purego || !amd64

package vmath

func vecExp32(p impl, dst, src []float32) int { return 0 }
func vecLog32(p impl, dst, src []float32) int { return 0 }

func vecErf32(p impl, mode int, dst, x, dy []float32) int { return 0 }

const best = implScalar

func vecSinCos32(p impl, quarter int32, dst, src []float32) int { return 0 }
