package cpu

import "testing"

// reportPerCPU reports work (in the unit's thousands of millions, done
// since cpu0 = cpuSeconds()) per CPU-second as the metric unit, where the
// CPU time can be read.
func reportPerCPU(b *testing.B, work float64, unit string, cpu0 float64) {
	if d := cpuSeconds() - cpu0; cpu0 > 0 && d > 0 {
		b.ReportMetric(work/d, unit)
	}
}
