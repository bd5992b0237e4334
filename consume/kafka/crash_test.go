package kafka_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
)

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

// A member SIGKILLed in a handler after its effect, and in another
// partition after a result was stored but before its offset was
// committed: the next member runs the first record again (two effects,
// the most a crash costs with idem.Do) and replays the second (one
// effect); every other record has one effect, and every offset is
// committed.
func TestKilledMemberRunsAtMostTwice(t *testing.T) {
	e := newEnv(t, 2)
	srv := redistest.Start(t, redistest.Options{})
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rc.Close() })
	const prefix = "crash:"
	env := func(id, block, after string) []string {
		return []string{envChild + "=" + id, envBrokers + "=" + strings.Join(e.kc.Addrs, ","),
			envRedis + "=" + srv.Addr, envPrefix + "=" + prefix, envBlock + "=" + block, envAfter + "=" + after}
	}
	for _, k := range []string{"a0", "a1", "mid", "a2"} {
		e.produce(t, 0, k, 1)
	}
	for _, k := range []string{"b0", "a0", "after", "b1"} {
		e.produce(t, 1, k, 1)
	}
	first := startChild(t, env("0", "mid", "after")...)
	idemtest.Eventually(t, "the first member blocked in both partitions", func() bool {
		n, err := rc.LLen(context.Background(), prefix+"blocked").Result()
		return err == nil && n == 2
	})
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	startChild(t, env("1", "", "")...)
	e.allCommitted(t, 2)
	effects := func(k string) int {
		n, _ := rc.Get(context.Background(), prefix+"effect:"+k).Int()
		return n
	}
	for _, k := range []string{"a0", "a1", "a2", "b0", "b1", "after"} {
		if n := effects(k); n != 1 {
			t.Errorf("%s: %d effects, want 1", k, n)
		}
	}
	if n := effects("mid"); n < 1 || n > 2 {
		t.Errorf("mid: %d effects, want 1 or 2", n)
	}
	t.Logf("effects of the record killed mid-handler: %d", effects("mid"))
}
