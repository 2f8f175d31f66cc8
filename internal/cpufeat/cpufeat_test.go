package cpufeat

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestAgreesWithProcCPUInfo checks the detection against the flags Linux
// reports in /proc/cpuinfo (which also accounts for the operating system's
// support): each instruction set is found exactly when the kernel lists it,
// and none in a purego build.
func TestAgreesWithProcCPUInfo(t *testing.T) {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil || runtime.GOARCH != "amd64" {
		t.Skipf("needs Linux on amd64 (%s, %v)", runtime.GOARCH, err)
	}
	var flags map[string]bool
	for _, line := range strings.Split(string(data), "\n") {
		if name, list, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "flags" {
			flags = map[string]bool{}
			for _, f := range strings.Fields(list) {
				flags[f] = true
			}
			break
		}
	}
	if flags == nil {
		t.Fatal("no flags line in /proc/cpuinfo")
	}
	want512 := flags["avx512f"] && flags["avx512bw"] && flags["avx512dq"] && flags["avx512vl"]
	for _, c := range []struct {
		name      string
		got, want bool
	}{
		{"AVX2", AVX2, flags["avx2"]},
		{"FMA", FMA, flags["avx2"] && flags["fma"]},
		{"AVX512", AVX512, want512},
		{"PrefetchW", PrefetchW, flags["3dnowprefetch"]},
	} {
		if purego {
			c.want = false
		}
		if c.got != c.want {
			t.Errorf("%s: detected %v, /proc/cpuinfo says %v", c.name, c.got, c.want)
		}
	}
}
