package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/dist/mpi"
)

// distFlags are -dist, taken by the commands that train (train, run):
// how this process joins a data-parallel job; and, for train, which
// compiles its step, -dist-bucket and -dist-shard.
type distFlags struct {
	mode, bucket string
	shard        bool
}

func addDistFlags(fs *flag.FlagSet, compiles bool) *distFlags {
	d := &distFlags{bucket: "25MB"}
	fs.StringVar(&d.mode, "dist", "", "train data-parallel: mpi (this process is one rank of an mpirun job; kiln built with -tags mpi or -tags mpich) or local:N (N ranks in this process, to try a recipe without MPI)")
	if compiles {
		fs.StringVar(&d.bucket, "dist-bucket", "25MB", "with -dist, reduce the gradients over the ranks in buckets of up to this size (1MB, 25MB)")
		fs.BoolVar(&d.shard, "dist-shard", false, "with -dist, shard the optimizer state over the ranks: each keeps and updates 1/N of it (bitwise the same params)")
	}
	return d
}

// bucketBytes returns -dist-bucket in bytes; a bad value is a usage error.
func (d *distFlags) bucketBytes() (int64, error) { return parseBucket(d.bucket) }

func parseBucket(s string) (int64, error) {
	n, err := checkpoint.ParseBytes(s)
	if err != nil || n <= 0 {
		return 0, usagef("-dist-bucket: expected a positive size such as 25MB, found %q", s)
	}
	return n, nil
}

// ranksFlags are -ranks and -dist-bucket, taken by the commands that
// compile without running (compile, plan, dump): a plan for data-parallel
// training on that many ranks, to write or to look at.
type ranksFlags struct {
	ranks  int
	bucket string
	shard  bool
}

func addRanksFlags(fs *flag.FlagSet) *ranksFlags {
	r := &ranksFlags{}
	fs.IntVar(&r.ranks, "ranks", 1, "compile the training step for data-parallel training on this many ranks (kiln run -dist mpi under mpirun -np RANKS runs it)")
	fs.StringVar(&r.bucket, "dist-bucket", "25MB", "with -ranks, reduce the gradients over the ranks in buckets of up to this size")
	fs.BoolVar(&r.shard, "dist-shard", false, "with -ranks, shard the optimizer state over the ranks: each keeps and updates 1/N of it")
	return r
}

// apply checks the flags and sets them in opts; bad values are usage
// errors. A nil r sets nothing.
func (r *ranksFlags) apply(opts *kiln.Options) error {
	if r == nil {
		return nil
	}
	if r.ranks < 1 || r.ranks > 1<<20 {
		return usagef("-ranks: expected 1 or more, found %d", r.ranks)
	}
	n, err := parseBucket(r.bucket)
	if err != nil {
		return err
	}
	if r.shard && r.ranks < 2 {
		return usagef("-dist-shard needs -ranks of 2 or more")
	}
	opts.Ranks, opts.BucketBytes, opts.Shard = r.ranks, n, r.shard
	if r.ranks == 1 {
		opts.Ranks = 0
	}
	return nil
}

// localRanks returns N of -dist local:N, 0 for another mode; a bad N is a
// usage error.
func (d *distFlags) localRanks() (int, error) {
	s, ok := strings.CutPrefix(d.mode, "local:")
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1024 {
		return 0, usagef("-dist local:N: expected N from 1 to 1024, found %q", s)
	}
	return n, nil
}

// check reports a bad -dist or -dist-bucket as a usage error.
func (d *distFlags) check() error {
	switch {
	case d.mode == "", d.mode == "mpi":
	case strings.HasPrefix(d.mode, "local:"):
		if _, err := d.localRanks(); err != nil {
			return err
		}
	default:
		return usagef("-dist: expected mpi or local:N, found %q", d.mode)
	}
	if d.shard && d.mode == "" {
		return usagef("-dist-shard needs -dist")
	}
	_, err := d.bucketBytes()
	return err
}

// run runs body as this process's part of the job -dist names, with the
// job's communicator (nil without -dist) and the writer for its output:
// stdout on rank 0, discarded on the others, so that rank 0 alone prints.
//
// Without -dist, a process that the environment says is one of several
// ranks (mpirun, srun) is refused: the copies would train unsynchronised.
// With -dist mpi, an error or a panic on any rank ends the whole job
// (MPI_Abort) with that rank's message, rather than leaving the others
// waiting in a collective. With -dist local:N the N ranks are goroutines,
// and the first rank's error that stopped the job is returned.
func (d *distFlags) run(stdout io.Writer, body func(stdout io.Writer, comm *dist.Comm) error) error {
	n, err := d.localRanks()
	if err != nil {
		return err
	}
	switch {
	case n > 0:
		return runLocal(n, stdout, body)
	case d.mode == "mpi":
		t, err := mpi.Open()
		if err != nil {
			return fmt.Errorf("-dist mpi: %v", err)
		}
		comm := dist.NewComm(t)
		if comm.Rank() != 0 {
			stdout = io.Discard
		} else if w := mpi.BindingWarning(); w != "" {
			fmt.Fprintln(os.Stderr, w)
		}
		if err := guard(func() error { return body(stdout, comm) }); err != nil {
			if comm.Size() > 1 {
				t.Abort(1, fmt.Sprintf("kiln: rank %d of %d: %v", comm.Rank(), comm.Size(), err))
			}
			t.Close()
			return err
		}
		return t.Close()
	}
	if r := dist.LaunchedRanks(); r > 1 {
		hint := ""
		if !mpi.Available() {
			hint = " (and this kiln was built without MPI: build it with -tags mpi or -tags mpich)"
		}
		return fmt.Errorf("this process is one of %d ranks of a parallel job, but -dist mpi is not given%s: each rank would train alone, unsynchronised", r, hint)
	}
	return body(stdout, nil)
}

// runLocal runs body on n ranks that are goroutines of this process.
func runLocal(n int, stdout io.Writer, body func(stdout io.Writer, comm *dist.Comm) error) error {
	errs := make([]error, n)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first = -1 // the rank whose failure stopped the job
	)
	for r, t := range dist.Local(n) {
		out := stdout
		if r != 0 {
			out = io.Discard
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := guard(func() error { return body(out, dist.NewComm(t)) })
			if err == nil {
				return
			}
			mu.Lock()
			errs[r] = err
			stops := first < 0
			if stops {
				first = r
			}
			mu.Unlock()
			if stops && n > 1 {
				t.Abort(1, err.Error())
			}
		}()
	}
	wg.Wait()
	if first < 0 {
		return nil
	}
	if n == 1 {
		return errs[first]
	}
	return fmt.Errorf("rank %d of %d: %w", first, n, errs[first])
}

// guard runs f, turning a panic into an error, so that a rank that panics
// still ends the job.
func guard(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			msg, _, _ := strings.Cut(fmt.Sprint(r), "\n")
			err = fmt.Errorf("internal error (a bug in kiln): %s", msg)
		}
	}()
	return f()
}

// saveCheckpoint saves the training state in dir: with several ranks the
// tally of every rank's batches, written by rank 0 alone (the params and
// optimizer state are every rank's alike), or with sharded optimizer state
// by every rank in its own dir. Every rank calls it at the same steps.
func saveCheckpoint(t *kiln.Trainer, dir string, st kiln.TrainState) error {
	var err error
	if st.Tally, err = t.ReduceTally(st.Tally); err != nil {
		return err
	}
	if t.Rank() != 0 && !t.Sharded() {
		return nil
	}
	return t.SaveCheckpoint(dir, st)
}
