package mpi

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// BindingWarning returns a one-line warning when this process may run on
// one CPU of a machine that has more (runtime.NumCPU, the affinity mask,
// is 1 while Linux reports more CPUs online): what OpenMPI's default
// binding of each rank to one core does, which leaves kiln's workers one
// core. The warning has no prefix; the caller adds its own. It returns ""
// when the process may use more than one CPU, when the machine has one,
// or when the online CPUs cannot be read.
func BindingWarning() string {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return ""
	}
	online, err := countCPUList(strings.TrimSpace(string(b)))
	if err != nil {
		return ""
	}
	return bindingWarning(runtime.NumCPU(), online)
}

// bindingWarning is BindingWarning for a process that may use usable of
// the machine's online CPUs.
func bindingWarning(usable, online int) string {
	if usable != 1 || online <= 1 {
		return ""
	}
	return fmt.Sprintf("this process may use only 1 of the machine's %d CPUs (the launcher bound it to one core): start it with mpirun --bind-to none, or --map-by ppr:1:node:PE=%d for one rank per machine", online, online)
}

// countCPUList returns the number of CPUs in a Linux CPU list such as
// "0-3,8,10-11".
func countCPUList(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("empty CPU list")
	}
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0, fmt.Errorf("CPU list %q: expected numbers and ranges, found %q", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("CPU list %q: expected numbers and ranges, found %q", s, part)
			}
		}
		n += b - a + 1
	}
	return n, nil
}
