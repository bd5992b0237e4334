package natsjs_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/natstest"
	"github.com/idemrt/idem/internal/redistest"
)

var prefixSeq atomic.Int64

// fleet is consumer processes (childMain) sharing a Redis.
type fleet struct {
	e      *env
	rc     *redis.Client
	prefix string
	kids   []*exec.Cmd
}

// startFleet starts n consumer processes of e's consumer; block is the key
// whose first run blocks ("" for none).
func startFleet(t *testing.T, e *env, n int, block string) *fleet {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	f := &fleet{e: e, rc: redis.NewClient(&redis.Options{Addr: srv.Addr}), prefix: fmt.Sprintf("t%d:", prefixSeq.Add(1))}
	t.Cleanup(func() { f.rc.Close() })
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChild+"="+strconv.Itoa(i), envURL+"="+e.srv.ClientURL(),
			envRedis+"="+srv.Addr, envPrefix+"="+f.prefix, envBlock+"="+block)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.kids = append(f.kids, cmd)
		t.Cleanup(func() { stopChild(t, cmd) })
	}
	return f
}

// stopChild stops a child with SIGTERM (SIGKILL after a while).
func stopChild(t *testing.T, cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("child %v: %v", cmd.Env[len(cmd.Env)-5], err)
		}
	case <-time.After(idemtest.Timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Error("a child did not stop on SIGTERM")
	}
}

// publishKeyed publishes a message with key in the Key header, copies times.
func (f *fleet) publishKeyed(t *testing.T, key string, copies int) {
	t.Helper()
	for range copies {
		msg := nats.NewMsg("s.x")
		msg.Header.Set(keyHeader, key)
		if _, err := f.e.js.PublishMsg(testCtx(t), msg); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fleet) effects(t *testing.T, key string) int {
	n, err := f.rc.Get(context.Background(), f.prefix+"effect:"+key).Int()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return n
}

func (f *fleet) runs(t *testing.T, key string) []string {
	l, err := f.rc.LRange(context.Background(), f.prefix+"runs:"+key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Three consumer processes on one Redis take each message published three
// times: every copy is answered, every effect happens once.
func TestProcessesWithRedisRunEachMessageOnce(t *testing.T) {
	onEachServer(t, testProcessesWithRedisRunEachMessageOnce)
}

func testProcessesWithRedisRunEachMessageOnce(t *testing.T, server natstest.Kind) {
	e := newEnv(t, setup{ackWait: childAckWait, server: server})
	f := startFleet(t, e, 3, "")
	ids := keys("m", 40)
	for round := range 3 {
		for _, id := range ids[round*len(ids)/3:] {
			f.publishKeyed(t, id, 1)
		}
		for _, id := range ids[:round*len(ids)/3] {
			f.publishKeyed(t, id, 1)
		}
		for _, id := range ids[(round+1)*len(ids)/3:] {
			f.publishKeyed(t, id, 1)
		}
	}
	e.settled(t)
	runners := map[string]bool{}
	for _, id := range ids {
		if n := f.effects(t, id); n != 1 {
			t.Errorf("message %s: %d effects (runs %v), want 1", id, n, f.runs(t, id))
		}
		for _, r := range f.runs(t, id) {
			runners[r] = true
		}
	}
	t.Logf("effects ran in %d processes", len(runners))
}

// A consumer process killed (SIGKILL) in the middle of a handler, after its
// effect: its message is redelivered to another process after AckWait,
// which waits (nak with the lease left) until the dead run's lease ends and
// then runs the message again. That message's effect happens twice (the
// killed run's and the retry's, as nothing recorded the first); every
// other message's once.
func TestProcessKilledMidHandler(t *testing.T) { onEachServer(t, testProcessKilledMidHandler) }

func testProcessKilledMidHandler(t *testing.T, server natstest.Kind) {
	e := newEnv(t, setup{ackWait: childAckWait, server: server})
	f := startFleet(t, e, 3, "victim")
	ids := keys("m", 30)
	f.publishKeyed(t, "victim", 2)
	for _, id := range ids {
		f.publishKeyed(t, id, 2)
	}
	var blocked string
	idemtest.Eventually(t, "a process blocked in the victim's handler", func() bool {
		l, err := f.rc.LRange(context.Background(), f.prefix+"blocked", 0, -1).Result()
		if err == nil && len(l) > 0 {
			blocked = l[0]
			return true
		}
		return false
	})
	killedAt := time.Now()
	victim := f.kids[mustAtoi(t, blocked)]
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.Wait()
	e.settled(t)
	took := time.Since(killedAt)
	runs := f.runs(t, "victim")
	if n := f.effects(t, "victim"); n != 2 || len(runs) != 2 || runs[0] != blocked || runs[1] == blocked {
		t.Errorf("victim: %d effects, runs %v; want 2, first by the killed process %s, then by another", n, runs, blocked)
	}
	if took < childLease/2 {
		t.Errorf("the victim settled %v after the kill, before the dead run's lease (%v) could end", took, childLease)
	}
	for _, id := range ids {
		if n := f.effects(t, id); n != 1 {
			t.Errorf("message %s: %d effects (runs %v), want 1", id, n, f.runs(t, id))
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
