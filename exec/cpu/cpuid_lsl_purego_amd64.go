//go:build purego

package cpu

// cpuLSL reports false: no assembly in purego builds.
func cpuLSL() (cpu uint32, ok bool) { return 0, false }
