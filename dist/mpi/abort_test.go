//go:build cgo && ((mpi && !mpich) || (mpich && !mpi))

package mpi

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kilnml/kiln/dist"
)

// abortChildEnv names the case a process started by TestAbortEndsJob
// runs: "idle" or "busy".
const abortChildEnv = "KILN_MPI_ABORT_TEST"

// TestAbortEndsJob starts 2-rank jobs of this test binary in which rank 1
// calls Abort, and checks that each job ends, with the status Abort was given and
// rank 1's message, instead of leaving rank 0 waiting: "idle", rank 1
// aborts from its MPI thread while rank 0 waits in a broadcast from rank 1;
// "busy", rank 1 aborts from another goroutine while its MPI thread waits
// in a broadcast from rank 0, which is asleep outside MPI. The test starts
// its own jobs, so it runs in a process started alone (go test, or the
// test binary run directly); under mpirun it is the job's rank that runs.
func TestAbortEndsJob(t *testing.T) {
	if c := os.Getenv(abortChildEnv); c != "" {
		abortChild(c)
		t.Fatalf("rank of an abort job: still running after Abort")
	}
	if n := dist.LaunchedRanks(); n > 1 {
		t.Skipf("this process is one of %d ranks; the test starts its own jobs when the binary runs alone", n)
	}
	launcher := ""
	for _, l := range launchers {
		if p, err := exec.LookPath(l); err == nil {
			launcher = p
			break
		}
	}
	if launcher == "" {
		t.Fatalf("none of the MPI launchers %v is on PATH", launchers)
	}
	for _, c := range []string{"idle", "busy"} {
		t.Run(c, func(t *testing.T) {
			// A job that hangs is killed after a minute: the failure this
			// test exists to catch.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			args := append(append([]string{}, launchFlags...), os.Args[0], "-test.run=^TestAbortEndsJob$")
			cmd := exec.CommandContext(ctx, launcher, args...)
			cmd.Env = append(jobEnv(), abortChildEnv+"="+c)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("the job did not end within a minute after rank 1 aborted; output:\n%s", out.String())
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 3 {
				t.Fatalf("job: %v, want exit status 3, Abort's code; output:\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "rank 1: test abort ("+c+")") {
				t.Errorf("job output lacks rank 1's message; output:\n%s", out.String())
			}
		})
	}
}

// jobEnv returns this process's environment without the variables of an
// MPI job it may itself belong to (a 1-rank job started without a
// launcher), and with OpenMPI's consent to run as root.
func jobEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OMPI_") || strings.HasPrefix(k, "PMIX_") || strings.HasPrefix(k, "PMI_") ||
			strings.HasPrefix(k, "OPAL_") || strings.HasPrefix(k, "HYDRA_") || strings.HasPrefix(k, "MPI_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
}

// abortChild is a rank of TestAbortEndsJob's job for case c.
func abortChild(c string) {
	tr, err := Open()
	if err != nil {
		panic(err)
	}
	buf := make([]byte, 64)
	switch {
	case c == "idle" && tr.Rank() == 0:
		_ = tr.Bcast(buf, 1) // rank 1 never sends
	case c == "idle":
		time.Sleep(200 * time.Millisecond)
		tr.Abort(3, "rank 1: test abort (idle)")
	case c == "busy" && tr.Rank() == 0:
		time.Sleep(2 * time.Minute)
	default:
		go func() { _ = tr.Bcast(buf, 0) }() // rank 0 never sends
		// Wait until the broadcast holds the MPI thread, so that Abort
		// takes the path for a busy thread.
		w := tr.(*transport)
		for w.mu.TryLock() {
			w.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		tr.Abort(3, "rank 1: test abort (busy)")
	}
}
