//go:build purego || !amd64

package cpufeat

func detect() (avx2, fma, avx512 bool) { return false, false, false }

func detectPrefetchW() bool { return false }
