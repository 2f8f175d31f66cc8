package cpu

import (
	"runtime"
	"syscall"
	"testing"
	"unsafe"
)

// TestCPULSLAgreesWithGetcpu checks that cpuLSL, where it works, gives the
// CPU getcpu(2) gives on the same thread (when the thread did not move
// between the two calls around it).
func TestCPULSLAgreesWithGetcpu(t *testing.T) {
	if _, ok := cpuLSL(); !ok {
		t.Skip("no per-CPU segment (purego, or not Linux's)")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	getcpu := func() uint32 {
		var c uint32
		if _, _, e := syscall.RawSyscall(309, uintptr(unsafe.Pointer(&c)), 0, 0); e != 0 {
			t.Fatalf("getcpu: %v", e)
		}
		return c
	}
	checked := 0
	for range 200 {
		before := getcpu()
		c, _ := cpuLSL()
		if after := getcpu(); before == after {
			checked++
			if c != before {
				t.Fatalf("cpuLSL = %d on CPU %d", c, before)
			}
		}
		runtime.Gosched()
	}
	if checked == 0 {
		t.Fatal("the thread moved between every pair of getcpu calls")
	}
}
