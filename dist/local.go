package dist

import (
	"fmt"
	"runtime"
	"sync"
)

// Local returns the transports of an n-rank job whose ranks are goroutines
// of this process: rank r uses the r-th. It is the reference the MPI
// transport is checked against, and what tests train on.
func Local(n int) []Transport {
	j := &localJob{n: n, slots: make([][]byte, n)}
	j.cond = sync.NewCond(&j.mu)
	ts := make([]Transport, n)
	for r := range ts {
		ts[r] = &localRank{job: j, rank: r}
	}
	return ts
}

// localJob is the shared state of Local's ranks: one slot per rank for the
// collective in progress, and a barrier.
type localJob struct {
	n       int
	mu      sync.Mutex
	cond    *sync.Cond
	slots   [][]byte
	arrived int
	gen     uint64
	aborted error
}

type localRank struct {
	job  *localJob
	rank int
}

func (l *localRank) Rank() int { return l.rank }
func (l *localRank) Size() int { return l.job.n }

// barrier waits until every rank has reached it.
func (j *localJob) barrier() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.aborted != nil {
		return j.aborted
	}
	gen := j.gen
	j.arrived++
	if j.arrived == j.n {
		j.arrived = 0
		j.gen++
		j.cond.Broadcast()
		return nil
	}
	for gen == j.gen && j.aborted == nil {
		j.cond.Wait()
	}
	return j.aborted
}

// exchange publishes send as this rank's slot, waits for every rank's, lets
// read copy from them, and waits again so no slot changes while it is read.
func (l *localRank) exchange(send []byte, read func(slots [][]byte)) error {
	j := l.job
	j.mu.Lock()
	j.slots[l.rank] = send
	j.mu.Unlock()
	if err := j.barrier(); err != nil {
		return err
	}
	read(j.slots)
	return j.barrier()
}

func (l *localRank) Alltoall(send, recv []byte) error {
	n := l.job.n
	if len(send) != len(recv) || len(send)%n != 0 {
		return fmt.Errorf("alltoall: %d bytes to send and %d to receive, expected equal multiples of %d", len(send), len(recv), n)
	}
	b := len(send) / n
	return l.exchange(send, func(slots [][]byte) {
		for i, s := range slots {
			copy(recv[i*b:(i+1)*b], s[l.rank*b:(l.rank+1)*b])
		}
	})
}

func (l *localRank) Allgather(send, recv []byte) error {
	if len(recv) != l.job.n*len(send) {
		return fmt.Errorf("allgather: %d bytes to send and %d to receive, expected %d ranks' worth", len(send), len(recv), l.job.n)
	}
	return l.exchange(send, func(slots [][]byte) {
		for i, s := range slots {
			copy(recv[i*len(send):], s)
		}
	})
}

func (l *localRank) Bcast(buf []byte, root int) error {
	if root < 0 || root >= l.job.n {
		return fmt.Errorf("bcast: root %d, expected 0 to %d", root, l.job.n-1)
	}
	return l.exchange(buf, func(slots [][]byte) {
		if l.rank != root {
			copy(buf, slots[root])
		}
	})
}

// Abort makes every rank's collectives fail with msg from now on and ends
// the calling goroutine (runtime.Goexit): in one process the other ranks
// are goroutines that see the error, not processes to kill, and the
// program reports the error itself, so Local does not print msg.
func (l *localRank) Abort(code int, msg string) {
	j := l.job
	j.mu.Lock()
	if j.aborted == nil {
		j.aborted = fmt.Errorf("rank %d aborted the job (exit code %d): %s", l.rank, code, msg)
	}
	j.cond.Broadcast()
	j.mu.Unlock()
	runtime.Goexit()
}

func (l *localRank) Close() error { return nil }
