package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress shows how far a training run is: the step, the loss so far,
// samples (or steps) per second and the time left. On a terminal it is a
// bar redrawn in place at most ten times a second, which clear erases
// before other output; elsewhere (a file, a pipe) it is a plain line every
// plainEvery, and nothing for runs shorter than that.
type progress struct {
	w          io.Writer
	tty        bool
	total      int64 // steps of the whole run
	batch      int   // samples per step; 0 counts steps
	first      int64 // the step the run (or its resumption) started from
	start      time.Time
	last       time.Time // of the last line drawn
	shown      bool      // a bar is on the terminal's line
	now        func() time.Time
	plainEvery time.Duration
}

// newProgress returns a progress display on w for a run of total steps,
// resumed (or started) at step first.
func newProgress(w io.Writer, total int64, batch int, first int64) *progress {
	p := &progress{w: w, tty: isTerminal(w), total: total, batch: batch, first: first, now: time.Now, plainEvery: 10 * time.Second}
	p.start = p.now()
	p.last = p.start
	return p
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// update records that step (of total) is done, with the loss so far; where
// says where in the run it is ("epoch 3/30 batch 12/45"), or is empty
// when the step count says it all.
func (p *progress) update(step int64, where string, loss float64) {
	now := p.now()
	interval := p.plainEvery
	if p.tty {
		interval = 100 * time.Millisecond
	}
	if now.Sub(p.last) < interval {
		return
	}
	p.last = now
	line := p.line(step, where, loss, now)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.shown = true
		return
	}
	fmt.Fprintln(p.w, line)
}

// line formats the progress of step at time now.
func (p *progress) line(step int64, where string, loss float64, now time.Time) string {
	var b strings.Builder
	if p.tty {
		const width = 20
		done := int(width * step / max(p.total, 1))
		fmt.Fprintf(&b, "[%s%s] ", strings.Repeat("=", done), strings.Repeat(" ", width-done))
	}
	if where != "" {
		fmt.Fprintf(&b, "%s  ", where)
	}
	fmt.Fprintf(&b, "step %d/%d  loss %.4g", step, p.total, loss)
	elapsed := now.Sub(p.start).Seconds()
	if n := step - p.first; n > 0 && elapsed > 0 {
		rate, unit := float64(n)/elapsed, "steps/s"
		if p.batch > 0 {
			rate, unit = rate*float64(p.batch), "samples/s"
		}
		left := time.Duration(float64(p.total-step) * elapsed / float64(n) * float64(time.Second))
		fmt.Fprintf(&b, "  %.3g %s  %s left", rate, unit, left.Round(time.Second))
	}
	return b.String()
}

// clear erases the bar from the terminal's line, so that other output
// starts on a clean line.
func (p *progress) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}
