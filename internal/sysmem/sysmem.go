// Package sysmem tells how much memory kiln may still allocate, so that an
// arena, a batch or a tensor too large for the machine is refused with an
// error naming its size before anything is allocated, rather than ending in
// the Go runtime's "out of memory". Every allocation check in kiln goes
// through Check.
package sysmem

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
)

// MaxAlloc is the largest allocation Check lets through where the memory
// available cannot be read: 2^47 bytes (128 TiB), the user address space of
// x86-64 and arm64 Linux, so nothing larger could be mapped anywhere.
const MaxAlloc = 1 << 47

// Available returns the memory available for new allocations, in bytes: the
// MemAvailable line of /proc/meminfo (which counts free memory and the
// caches the kernel can drop), or the Go runtime's memory limit (GOMEMLIMIT,
// debug.SetMemoryLimit) where one is set and smaller. It returns false where
// neither is known.
func Available() (int64, bool) {
	n, ok := int64(0), false
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		n, ok = parseMeminfo(data)
	}
	if lim := debug.SetMemoryLimit(-1); lim < math.MaxInt64 && (!ok || lim < n) {
		n, ok = lim, true
	}
	return n, ok
}

// parseMeminfo returns the MemAvailable figure of a /proc/meminfo text in
// bytes.
func parseMeminfo(data []byte) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 || string(f[0]) != "MemAvailable:" {
			continue
		}
		n, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil || n < 0 || n > MaxAlloc>>10 {
			return 0, false
		}
		if len(f) >= 3 && string(f[2]) == "kB" {
			n <<= 10
		}
		return n, true
	}
	return 0, false
}

// Check returns nil when n bytes of what (such as "arena" or "input %x")
// may be allocated: n is at most the memory Available, or at most MaxAlloc
// where that is unknown. Otherwise it returns an error such as
// "arena of 32.0 GiB exceeds the 21.3 GiB of memory available".
func Check(what string, n int64) error {
	avail, ok := Available()
	return check(what, n, avail, ok)
}

func check(what string, n, avail int64, known bool) error {
	switch {
	case n < 0:
		return fmt.Errorf("%s of %d bytes: a negative size", what, n)
	case n > MaxAlloc:
		return fmt.Errorf("%s of %s exceeds the %s any process can address", what, Format(n), Format(MaxAlloc))
	case known && n > avail:
		return fmt.Errorf("%s of %s exceeds the %s of memory available", what, Format(n), Format(avail))
	}
	return nil
}

// Format writes n bytes for people, with one decimal in the largest unit
// that keeps the number at least 1: "512 bytes", "1.5 KiB", "32.0 GiB".
func Format(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	f, u := float64(n)/1024, 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	return fmt.Sprintf("%.1f %ciB", f, units[u])
}
