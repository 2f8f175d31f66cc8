package cpu

import "time"

// TraceFunc receives the timing of one plan step: its index in the plan,
// the worker that ran it (0 with one worker; else in [0, Workers())) and
// when the kernel (or copy) started and ended.
type TraceFunc func(step, worker int, start, end time.Time)

// Trace sets f to be called for every step of the next Step, by the
// goroutine that ran the step, right after it; so with several workers f
// is called concurrently and must be safe for that. The Step that follows
// clears it. Without a trace the steps run untimed.
func (x *Executor) Trace(f TraceFunc) { x.run.trace = f }

// step runs step s on worker w and reports it to the trace, when one is set.
func (r *runner) step(s, w int) error {
	if r.trace == nil {
		return r.exec(s)
	}
	start := time.Now()
	err := r.exec(s)
	r.trace(s, w, start, time.Now())
	return err
}
