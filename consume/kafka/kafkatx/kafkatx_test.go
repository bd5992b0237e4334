package kafkatx_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume/kafka"
	"github.com/idemrt/idem/internal/idemtest"
)

// Records produced twice apply their row once; a permanent error rolls
// its row back and sends the record to the dead-letter topic.
func TestDuplicatesApplyOnce(t *testing.T) {
	e := newEnv(t, 2)
	e.start(t, kafka.Options{DeadLetterTopic: dlt}, func(ctx context.Context, tx pgx.Tx, r *kafka.Record) error {
		if err := apply(ctx, tx, r); err != nil {
			return err
		}
		if r.Key == "bad" {
			return idem.Permanent(errors.New("no such account"))
		}
		return nil
	})
	ids := []string{"c0", "c1", "c2", "c3", "bad"}
	for i, id := range ids {
		e.produce(t, int32(i%2), id, 2)
		e.produce(t, int32((i+1)%2), id, 1)
	}
	e.allCommitted(t, 2)
	for _, id := range ids[:4] {
		if n := e.applied(t, id); n != 1 {
			t.Errorf("%s applied %d rows, want 1", id, n)
		}
	}
	if n := e.applied(t, "bad"); n != 0 {
		t.Errorf("bad applied %d rows, want 0 (rolled back)", n)
	}
}

// A member SIGKILLed inside a handler's transaction, and in another
// partition after a COMMIT but before its offset commit: every record
// applies exactly one row, and every offset is committed.
func TestKilledMemberAppliesOnce(t *testing.T) {
	e := newEnv(t, 2)
	env := func(id, block, after string) []string {
		return []string{envChild + "=" + id, envBrokers + "=" + brokers(e), envDSN + "=" + e.dsn,
			envBlock + "=" + block, envAfter + "=" + after}
	}
	for _, k := range []string{"a0", "a1", "mid", "a2"} {
		e.produce(t, 0, k, 1)
	}
	for _, k := range []string{"b0", "a0", "after", "b1"} {
		e.produce(t, 1, k, 1)
	}
	first := startChild(t, env("0", "mid", "after")...)
	idemtest.Eventually(t, "the first member blocked in both partitions", func() bool {
		var n int
		err := e.work.QueryRow(context.Background(), `SELECT count(*) FROM blocked`).Scan(&n)
		return err == nil && n == 2
	})
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	startChild(t, env("1", "", "")...)
	e.allCommitted(t, 2)
	for _, k := range []string{"a0", "a1", "mid", "a2", "b0", "b1", "after"} {
		if n := e.applied(t, k); n != 1 {
			t.Errorf("%s: %d rows, want exactly 1", k, n)
		}
	}
}

// startChild starts a group member process (childMain) with env.
func startChild(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState != nil {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("child: %v", err)
			}
		case <-time.After(idemtest.Timeout):
			_ = cmd.Process.Kill()
			<-done
			t.Error("a child did not stop on SIGTERM")
		}
	})
	return cmd
}
