//go:build !purego

package cpu

// cpuLSL returns the CPU number Linux stores in the limit of the per-CPU
// segment (GDT entry 15, selector 0x7b: what the vDSO's getcpu reads with
// LSL where the CPU has no RDPID), and false where the selector is not
// valid.
//
//go:noescape
func cpuLSL() (cpu uint32, ok bool)
