package runtime

import (
	"bytes"
	"crypto/sha256"
	"fmt"

	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/planner"
)

// Data-parallel training. A Trainer whose ExecOptions name a communicator
// of N ranks runs one rank's share of the work: at step i it trains the
// epoch's batch i*N + rank (every rank shuffles alike), so that the N ranks
// of a step train N consecutive batches, the ones one process with
// gradient accumulation over N steps trains for one update; the plan's
// collectives then give every rank the same gradients, bitwise those of
// that process. Dropout draws the mask of that batch's place in the run.
// Evaluation splits the batches over the ranks and reduces the tallies.

// PlanRanks returns the number of ranks p is compiled for: the "ranks" of
// its collectives, or 1 when it has none.
func PlanRanks(p *planner.Plan) (int, error) {
	ranks := 1
	for s, st := range p.Steps {
		if !st.Op.IsCollective() {
			continue
		}
		r := int(st.Attrs.Int("ranks", 0))
		if ranks != 1 && r != ranks {
			return 0, fmt.Errorf("step %d (%s) is compiled for %d ranks, an earlier one for %d", s, st.Op, r, ranks)
		}
		ranks = r
	}
	return ranks, nil
}

// checkRanks reports a plan and a communicator that do not go together.
func checkRanks(p *planner.Plan, c *dist.Comm) (int, error) {
	ranks, err := PlanRanks(p)
	if err != nil {
		return 0, err
	}
	size := 1
	if c != nil {
		size = c.Size()
	}
	switch {
	case ranks == size:
		return ranks, nil
	case ranks == 1:
		return 0, fmt.Errorf("the training step is compiled for one process, but this job has %d ranks: compile it for them (kiln train -dist, kiln compile -ranks %d)", size, size)
	case c == nil:
		return 0, fmt.Errorf("the training step is compiled for data-parallel training on %d ranks, but this process is not part of such a job: launch it under mpirun with -dist mpi", ranks)
	}
	return 0, fmt.Errorf("the training step is compiled for %d ranks, but this job has %d", ranks, size)
}

// Sharded reports whether each rank keeps its own shard of the optimizer
// state (the plan was compiled with Shard): a checkpoint of one rank then
// holds that rank's shard, so every rank saves and loads its own.
func (t *Trainer) Sharded() bool { return t.sharded }

// Ranks returns the number of processes training together (1 without a
// communicator).
func (t *Trainer) Ranks() int { return t.ranks }

// Rank returns this process's rank (0 without a communicator).
func (t *Trainer) Rank() int {
	if t.comm == nil {
		return 0
	}
	return t.comm.Rank()
}

// Broadcast copies rank 0's params to every rank, so that all start from
// the same values whatever each loaded. (The state starts alike on every
// rank, or is each rank's shard of the optimizer state.) Without a
// communicator it does nothing.
func (t *Trainer) Broadcast() error {
	if t.comm == nil {
		return nil
	}
	p := t.Plan
	for _, i := range p.Params {
		name := p.Buffers[i].Name
		v, err := t.train.Get(name)
		if err != nil {
			return err
		}
		buf := append([]byte(nil), v.Data...)
		if err := t.comm.Bcast(buf, 0); err != nil {
			return fmt.Errorf("broadcasting %%%s from rank 0: %v", name, err)
		}
		v.Data = buf
		if err := t.train.Set(name, v); err != nil {
			return err
		}
	}
	return nil
}

// ReduceTally returns the tally of every rank's a together: the sums of
// the losses, batches and counts, and the R² sums merged (Chan et al.'s
// pairwise update), in rank order, the same on every rank. Without a
// communicator it returns a.
func (t *Trainer) ReduceTally(a Tally) (Tally, error) {
	if t.comm == nil || t.ranks == 1 {
		return a, nil
	}
	k := len(a.Mean)
	if t.sig.Kind == Regression {
		k = t.sig.K
	}
	enc := encodeTally(a, k)
	all := make([]float64, len(enc)*t.ranks)
	if err := t.comm.AllgatherFloat64s(enc, all); err != nil {
		return a, fmt.Errorf("reducing the tallies of the ranks: %v", err)
	}
	var sum Tally
	for r := range t.ranks {
		sum.Merge(decodeTally(all[r*len(enc):(r+1)*len(enc)], k))
	}
	return sum, nil
}

// Merge adds b's batches and rows to a, as if a had counted them too.
func (a *Tally) Merge(b Tally) {
	a.Loss += b.Loss
	a.Batches += b.Batches
	a.Correct += b.Correct
	a.Total += b.Total
	if b.Count == 0 {
		return
	}
	if a.Count == 0 {
		a.Count = b.Count
		a.Mean, a.M2, a.Squares = append([]float64(nil), b.Mean...), append([]float64(nil), b.M2...), append([]float64(nil), b.Squares...)
		return
	}
	na, nb := float64(a.Count), float64(b.Count)
	n := na + nb
	for j := range a.Mean {
		d := b.Mean[j] - a.Mean[j]
		a.Mean[j] += d * nb / n
		a.M2[j] += b.M2[j] + d*d*na*nb/n
		a.Squares[j] += b.Squares[j]
	}
	a.Count += b.Count
}

// encodeTally writes a as float64s: loss, batches, correct, total, count,
// then k means, k M2s and k squares (zeros when a has none).
func encodeTally(a Tally, k int) []float64 {
	v := make([]float64, 5+3*k)
	v[0], v[1], v[2], v[3], v[4] = a.Loss, float64(a.Batches), float64(a.Correct), float64(a.Total), float64(a.Count)
	copy(v[5:], a.Mean)
	copy(v[5+k:], a.M2)
	copy(v[5+2*k:], a.Squares)
	return v
}

func decodeTally(v []float64, k int) Tally {
	a := Tally{Loss: v[0], Batches: int64(v[1]), Correct: int64(v[2]), Total: int64(v[3]), Count: int64(v[4])}
	if a.Count > 0 {
		a.Mean = append([]float64(nil), v[5:5+k]...)
		a.M2 = append([]float64(nil), v[5+k:5+2*k]...)
		a.Squares = append([]float64(nil), v[5+2*k:5+3*k]...)
	}
	return a
}

// SameParams checks that every rank holds the same params, bit for bit,
// and returns their SHA-256: each rank hashes its params in plan order and
// the ranks compare the hashes. An error names the first rank whose
// params differ from rank 0's. Without a communicator it returns the hash.
func (t *Trainer) SameParams() ([sha256.Size]byte, error) {
	h := sha256.New()
	for _, i := range t.Plan.Params {
		v, err := t.train.Get(t.Plan.Buffers[i].Name)
		if err != nil {
			return [sha256.Size]byte{}, err
		}
		h.Write(v.Data)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if t.comm == nil || t.ranks == 1 {
		return sum, nil
	}
	all := make([]byte, sha256.Size*t.ranks)
	if err := t.comm.Allgather(sum[:], all); err != nil {
		return sum, fmt.Errorf("comparing the ranks' params: %v", err)
	}
	for r := 1; r < t.ranks; r++ {
		if !bytes.Equal(all[r*sha256.Size:(r+1)*sha256.Size], all[:sha256.Size]) {
			return sum, fmt.Errorf("rank %d ended with other params than rank 0 (a bug in kiln: every rank applies the same update)", r)
		}
	}
	return sum, nil
}
