package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/store/redisstore"
)

// A consumer process is this program's binary run again with envChild set
// (by go run's binary and by the test binary alike). It consumes the
// billing consumer's messages until its standard input closes: the parent
// closes it to stop the consumers, and it closes by itself if the parent
// dies.

const (
	envChild = "IDEM_ORDERS_CONSUMER" // the consumer's number
	envNATS  = "IDEM_ORDERS_NATS"     // the NATS server's URL
	envRedis = "IDEM_ORDERS_REDIS"    // the Redis server's address
)

// What the consumers write in Redis, beside idem's own records (under
// "idem:"): the effects and what the parent reports.
const (
	keyCharges  = "orders:charges:"  // + order: the charge, INCR'd by the handler
	keyRuns     = "orders:runs:"     // + order: the consumers whose handler ran for it
	keyVerdicts = "orders:verdicts:" // + order: decisions and outcomes, counted
	keyReady    = "orders:ready"     // the consumers that are consuming
	keyBlocked  = "orders:blocked"   // the consumer that blocked in the victim's handler
)

// orderHeader carries a message's key: the order it charges.
const orderHeader = "Order-Id"

// consumerMain runs consumer id until its standard input closes, and
// returns the process's exit code.
func consumerMain(id string) int {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := consumeOrders(ctx, id); err != nil {
		fmt.Fprintf(os.Stderr, "consumer %s: %v\n", id, err)
		return 1
	}
	return 0
}

// consumeOrders charges orders until ctx ends, on an idem runtime whose
// store is the shared Redis.
func consumeOrders(ctx context.Context, id string) error {
	nc, err := nats.Connect(os.Getenv(envNATS))
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
	st, err := redisstore.New(ctx, rc, redisstore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	rt, err := idem.New(idem.Options{Store: st, Policy: idem.Policy{Lease: lease}})
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())
	c, err := consume.New(consume.Options{Runtime: rt, Policy: idem.Policy{Settle: settle}, MaxDelay: 5 * time.Second})
	if err != nil {
		return err
	}
	b := &biller{id: id, rc: rc}
	a, err := natsjs.ForConsumer(cons, natsjs.Options{
		Consumer:  c,
		Conn:      nc, // a Term carries its reason only to a server that honours it (2.10.4+)
		Key:       func(m jetstream.Msg) string { return m.Headers().Get(orderHeader) },
		OnVerdict: b.tally,
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return err
	}
	// A short buffer: only the message being handled is kept in progress,
	// and those waiting behind it would be redelivered after AckWait.
	cc, err := cons.Consume(a.Handler(ctx, b.charge), jetstream.PullMaxMessages(2))
	if err != nil {
		return err
	}
	defer func() { cc.Stop(); <-cc.Closed() }()
	if err := rc.SAdd(ctx, keyReady, id).Err(); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// biller charges orders; the charge is an INCR in Redis, so the parent
// counts every charge, a killed consumer's too.
type biller struct {
	id string
	rc *redis.Client
}

// charge is the handler: it charges the message's order. The first run of
// the victim's handler blocks before it charges, until the parent kills
// this process: a consumer that dies in the middle of a message, before
// its effect. (Killed after the charge, the order would be charged twice:
// nothing records a charge whose result was never stored, and once the
// dead run's lease ends the next delivery runs the handler again. That
// is the one case idem cannot cover by itself; pass the order id to the
// payment provider as its idempotency key to cover it there.)
func (b *biller) charge(ctx context.Context, m *natsjs.Message) error {
	order := m.Key
	if err := b.rc.RPush(ctx, keyRuns+order, b.id).Err(); err != nil {
		return err // transient: the message is redelivered
	}
	if order == victim {
		first, err := b.rc.SetNX(ctx, keyBlocked, b.id, 0).Result()
		if err != nil {
			return err
		}
		if first {
			select {} // until SIGKILL
		}
	}
	time.Sleep(gateway) // the payment provider's round trip
	return b.rc.Incr(ctx, keyCharges+order).Err()
}

// tally counts each answer by order, decision and outcome ("ack executed",
// "ack replayed", "retry none", ...), for the parent's report.
func (b *biller) tally(m *natsjs.Message, v consume.Verdict, ackErr error) {
	if ackErr != nil {
		return // not answered: the server redelivers the message
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.rc.HIncrBy(ctx, keyVerdicts+m.Key, v.Decision.String()+" "+v.Outcome.String(), 1)
}
