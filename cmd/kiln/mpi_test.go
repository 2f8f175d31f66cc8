//go:build mpi

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These tests run kiln train under OpenMPI's mpirun: go test -tags mpi
// -run TestMPI ./cmd/kiln (.ci/run does). They build the kiln binary with
// the tag and launch it on this machine's loopback.

// mpiKiln builds kiln with -tags mpi once per test and returns its path.
func mpiKiln(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kiln")
	out, err := exec.Command("go", "build", "-tags", "mpi", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -tags mpi: %v\n%s", err, out)
	}
	return bin
}

// mpirun returns the command that runs args on n ranks of this machine.
func mpirun(n int, args ...string) *exec.Cmd {
	cmd := exec.Command("mpirun", append([]string{"-np", fmt.Sprint(n), "--oversubscribe", "--bind-to", "none"}, args...)...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	return cmd
}

// TestMPITrainEqualsAccum checks the contract of -dist mpi: N ranks under
// mpirun save bitwise the params of one process training with -accum N,
// every rank ending with the same params, for N = 2 and 4, with SGD and
// Adam, on the digits MLP and the transformer example, with the optimizer
// state sharded or not.
func TestMPITrainEqualsAccum(t *testing.T) {
	kiln := mpiKiln(t)
	transformer := []string{"../../examples/transformer/reverse.kir", "-data", "reverse", "-rows", "512", "-epochs", "1"}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"digits/sgd", []string{"-optimizer", "sgd", "-lr", "0.1", "-momentum", "0.9", "-epochs", "2"}},
		{"digits/adam/shard", []string{"-dist-shard", "-optimizer", "adam", "-lr", "0.01", "-epochs", "1"}},
		{"transformer/adamw", append([]string{"-optimizer", "adamw", "-lr", "0.003", "-clip-norm", "1"}, transformer...)},
		{"transformer/adam/shard", append([]string{"-dist-shard", "-optimizer", "adam", "-lr", "0.003"}, transformer...)},
	} {
		for _, n := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, n), func(t *testing.T) {
				dir := t.TempDir()
				accum, distP := filepath.Join(dir, "accum.safetensors"), filepath.Join(dir, "dist.safetensors")
				one := tc.args
				if one[0] == "-dist-shard" {
					one = one[1:]
				}
				runKiln(t, append([]string{"train", "-accum", fmt.Sprint(n), "-save", accum}, one...)...).want(t, 0)
				cmd := mpirun(n, append([]string{kiln, "train", "-dist", "mpi", "-workers", "1", "-save", distP}, tc.args...)...)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("mpirun: %v\n%s", err, out)
				}
				sameFile(t, "mpirun -dist mpi against -accum", distP, accum)
				containsAll(t, "output", string(out), fmt.Sprintf("data-parallel on %d ranks", n), fmt.Sprintf("all %d ranks hold the same params", n))
			})
		}
	}
}

// TestMPIKilledRank checks that a rank killed mid-training ends the whole
// job within seconds, with the launcher's message naming the rank.
func TestMPIKilledRank(t *testing.T) {
	kiln := mpiKiln(t)
	cmd := mpirun(2, kiln, "train", "-dist", "mpi", "-workers", "1", "-epochs", "1000")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.Contains(sc.Text(), "epoch   2/") {
	}
	// The ranks are the launcher's children: kill one.
	pids, err := exec.Command("pgrep", "-P", fmt.Sprint(cmd.Process.Pid)).Output()
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("pgrep -P %d: %v", cmd.Process.Pid, err)
	}
	victim := strings.Fields(string(pids))[0]
	if err := exec.Command("kill", "-KILL", victim).Run(); err != nil {
		t.Fatal(err)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("mpirun exited 0 after a rank was killed")
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("the job ended %v after the kill", d)
		}
		containsAll(t, "mpirun's stderr", strings.Join(strings.Fields(stderr.String()), " "), "process rank", "signal 9")
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the job still ran 60 s after a rank was killed")
	}
}

// TestMPIRankErrorAbortsJob checks that an error on one rank ends the job
// (MPI_Abort) with that rank's message, while the other waits in a
// collective: rank 1 is given a data file that does not exist.
func TestMPIRankErrorAbortsJob(t *testing.T) {
	kiln := mpiKiln(t)
	missing := filepath.Join(t.TempDir(), "missing.csv")
	cmd := exec.Command("mpirun", "--oversubscribe", "--bind-to", "none",
		"-np", "1", kiln, "train", "-dist", "mpi", "-epochs", "1000", ":",
		"-np", "1", kiln, "train", "-dist", "mpi", "-epochs", "1000", "-data", missing, "../../examples/digits/mlp.kir")
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("mpirun exited 0 with a failing rank:\n%s", out)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the job took %v to end", d)
	}
	containsAll(t, "output", string(out), "kiln: rank 1 of 2: ", missing)
}
