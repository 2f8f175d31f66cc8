//go:build !linux || !(amd64 || arm64)

package cpu

// currentCPU reports false: no getcpu here.
func currentCPU() (int, bool) { return 0, false }
