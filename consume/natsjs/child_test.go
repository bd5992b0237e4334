package natsjs_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/store/redisstore"
)

// The multi-process tests re-execute this test binary as consumer
// processes of the same durable consumer, each on an idem runtime with a
// Redis store of its own client. Each effect is an INCR of
// <prefix>effect:<key> in that Redis, outside the store's keys, so effects
// are counted outside the processes, a killed one's too; each run is also
// listed (RPUSH <prefix>runs:<key> <child>).

const (
	envChild  = "IDEM_NATSJS_CHILD"  // the child's id
	envURL    = "IDEM_NATSJS_URL"    // the NATS server
	envRedis  = "IDEM_NATSJS_REDIS"  // the Redis server
	envPrefix = "IDEM_NATSJS_PREFIX" // the test's Redis key prefix
	envBlock  = "IDEM_NATSJS_BLOCK"  // a key whose first run blocks for ever
)

// keyHeader carries the message keys of the multi-process tests (their
// duplicates are published within the stream's duplicate window, so they
// carry no Nats-Msg-Id).
const keyHeader = "Key"

const (
	childLease   = time.Second
	childAckWait = 500 * time.Millisecond
)

// childMain runs a consumer process until SIGTERM.
func childMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := runChild(ctx, os.Getenv(envChild)); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	return 0
}

func runChild(ctx context.Context, id string) error {
	prefix, block := os.Getenv(envPrefix), os.Getenv(envBlock)
	nc, err := nats.Connect(os.Getenv(envURL), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cons, err := js.Consumer(ctx, streamName, consumerName)
	if err != nil {
		return err
	}
	rc := redis.NewClient(&redis.Options{Addr: os.Getenv(envRedis)})
	defer rc.Close()
	st, err := redisstore.New(ctx, rc, redisstore.Options{KeyPrefix: prefix + "idem:"})
	if err != nil {
		return err
	}
	defer st.Close()
	rt, err := idem.New(idem.Options{Store: st, Policy: idem.Policy{Lease: childLease}})
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())
	c, err := consume.New(consume.Options{
		Runtime:  rt,
		Policy:   idem.Policy{Settle: 300 * time.Millisecond},
		MinDelay: 50 * time.Millisecond,
		MaxDelay: 2 * time.Second,
	})
	if err != nil {
		return err
	}
	a, err := natsjs.ForConsumer(cons, natsjs.Options{Consumer: c, Conn: nc,
		Key: func(m jetstream.Msg) string { return m.Headers().Get(keyHeader) }})
	if err != nil {
		return err
	}
	cc, err := cons.Consume(a.Handler(ctx, func(ctx context.Context, m *natsjs.Message) error {
		n, err := rc.Incr(ctx, prefix+"effect:"+m.Key).Result()
		if err != nil {
			return err
		}
		rc.RPush(ctx, prefix+"runs:"+m.Key, id)
		if m.Key == block && n == 1 {
			rc.RPush(ctx, prefix+"blocked", id)
			select {} // until killed
		}
		return nil
	}), jetstream.PullMaxMessages(4), jetstream.PullHeartbeat(time.Second), jetstream.PullExpiry(2*time.Second))
	if err != nil {
		return err
	}
	<-ctx.Done()
	cc.Stop()
	<-cc.Closed()
	return nil
}
