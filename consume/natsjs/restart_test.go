package natsjs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/internal/natstest"
)

// The server restarts while messages are being handled: the consumer
// reconnects and goes on; acknowledgements lost in the restart make the
// server redeliver, and the redeliveries replay. Each message's effect
// happens once, and none that was published is lost. One message in five
// fails permanently: it is terminated (again, as a replay, if the
// restart lost the Term) and the consumer drains.
//
// The embedded server shuts down cleanly; the installed one is killed
// (SIGKILL) and started again on its store, as after a crash.
func TestServerRestartMidRun(t *testing.T) { onEachServer(t, testServerRestartMidRun) }

func testServerRestartMidRun(t *testing.T, server natstest.Kind) {
	e := newEnv(t, setup{server: server})
	l := newLedger()
	a := e.adapter(t, idem.Options{}, consume.Options{}, natsjs.Options{OnVerdict: l.onVerdict})
	e.consume(t, a.Handler(context.Background(), func(_ context.Context, m *natsjs.Message) error {
		time.Sleep(10 * time.Millisecond)
		l.effect(m.Key)
		if declined(m.Key) {
			return idem.Permanent(errors.New("declined"))
		}
		return nil
	}))
	before, after := keys("a", 40), keys("b", 20)
	for _, id := range before {
		e.publish(t, id)
	}
	l.waitVerdicts(t, before[5], 1)
	e.srv.Restart()
	for _, id := range after {
		e.publish(t, id) // waits for the client to reconnect
	}
	for _, id := range append(before, after...) {
		l.waitVerdicts(t, id, 1)
	}
	e.settled(t)
	l.exactlyOnce(t, append(before, after...))
	for _, id := range append(before, after...) {
		for _, v := range l.verdictsOf(id) {
			if declined(id) != strings.HasPrefix(v, "term/") {
				t.Errorf("%s: verdicts %v", id, l.verdictsOf(id))
				break
			}
		}
	}
}

// declined reports whether the restart test's handler fails key
// permanently: one key in five.
func declined(key string) bool { return strings.HasSuffix(key, "0") || strings.HasSuffix(key, "5") }
