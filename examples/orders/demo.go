package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
)

// demo is the parent's side: the stream and its consumer, the shared
// Redis, and the consumer processes.
type demo struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	cons      jetstream.Consumer
	rc        *redis.Client
	natsURL   string
	redisAddr string
	kids      map[string]*kid
}

// kid is a consumer process.
type kid struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser // closing it stops the consumer
	exited chan struct{}
	err    error // its exit status, once exited is closed
	done   bool  // stopped or killed
}

// newDemo connects to both servers and creates the stream and its durable
// consumer.
func newDemo(natsURL, redisAddr string) (*demo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return nil, err
	}
	d := &demo{nc: nc, natsURL: natsURL, redisAddr: redisAddr, kids: map[string]*kid{},
		rc: redis.NewClient(&redis.Options{Addr: redisAddr})}
	if d.js, err = jetstream.New(nc); err != nil {
		d.close()
		return nil, err
	}
	if _, err = d.js.CreateStream(ctx, jetstream.StreamConfig{Name: streamName,
		Subjects: []string{"orders.>"}, Duplicates: time.Minute}); err != nil {
		d.close()
		return nil, err
	}
	d.cons, err = d.js.CreateOrUpdateConsumer(ctx, streamName, jetstream.ConsumerConfig{
		Durable:   consumerName,
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   ackWait,
		// Every delivery counts against MaxDeliver, the naks of a message
		// whose order is held by a (dead) run too: no limit here.
		MaxDeliver: -1,
	})
	if err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// close stops the consumers, if they run, and the connections.
func (d *demo) close() {
	_ = d.stopConsumers()
	d.rc.Close()
	d.nc.Close()
}

// play is the demonstration, from the start of the consumers to the report.
func (d *demo) play() (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fmt.Printf("%d consumer processes share the durable consumer %q (AckWait %v) and an idem store on Redis (lease %v)\n",
		consumers, consumerName, ackWait, lease)
	if err := d.startConsumers(ctx); err != nil {
		return nil, err
	}
	stored, dropped, err := d.publish(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Printf("published %d orders as %d messages: each order under two message ids; JetStream's duplicate window dropped %d more, resent under the same id\n",
		numOrders, stored, dropped)
	killedAt, err := d.killVictim(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Printf("SIGKILL to the consumer inside %s's handler, before its charge\n", victim)
	if err := d.waitCharged(ctx, victim); err != nil {
		return nil, err
	}
	fmt.Printf("%s charged by another consumer %.1fs after the kill: redelivered after AckWait (%v), run once the dead run's lease (%v) had ended\n",
		victim, time.Since(killedAt).Seconds(), ackWait, lease)
	if err := d.waitAnswered(ctx, stored); err != nil {
		return nil, err
	}
	if err := d.stopConsumers(); err != nil {
		return nil, err
	}
	return d.report(ctx)
}

// startConsumers starts the consumer processes and waits until each
// consumes.
func (d *demo) startConsumers(ctx context.Context) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	for i := 1; i <= consumers; i++ {
		id := strconv.Itoa(i)
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), envChild+"="+id, envNATS+"="+d.natsURL, envRedis+"="+d.redisAddr)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		dieWithParent(cmd)
		k := &kid{cmd: cmd, exited: make(chan struct{})}
		if k.stdin, err = cmd.StdinPipe(); err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("consumer %s: %w", id, err)
		}
		go func() { k.err = cmd.Wait(); close(k.exited) }()
		d.kids[id] = k
	}
	return poll(ctx, "the consumers to start", func() (bool, error) {
		for _, k := range d.kids {
			select {
			case <-k.exited:
				return false, fmt.Errorf("a consumer exited at start: %v", k.err)
			default:
			}
		}
		n, err := d.rc.SCard(ctx, keyReady).Result()
		return n == consumers, err
	})
}

// stopConsumers closes the standard input of every consumer that runs and
// waits until they exit (kills one after 10s). It returns the first
// consumer's failure.
func (d *demo) stopConsumers() error {
	var stopping []string
	for id, k := range d.kids {
		if !k.done {
			k.done = true
			_ = k.stdin.Close()
			stopping = append(stopping, id)
		}
	}
	var first error
	for _, id := range stopping {
		k := d.kids[id]
		select {
		case <-k.exited:
		case <-time.After(10 * time.Second):
			_ = k.cmd.Process.Kill()
			<-k.exited
			k.err = errors.New("it did not stop within 10s")
		}
		if k.err != nil && first == nil {
			first = fmt.Errorf("consumer %s: %w", id, k.err)
		}
	}
	return first
}

// publish publishes every order as a message (message id <order>#1),
// sends every other order again under that id (JetStream drops it), then
// publishes every order again under a new id (<order>#2): a producer that
// restarted and lost track of what it sent. It returns the messages the
// stream stored and those it dropped.
func (d *demo) publish(ctx context.Context) (stored, dropped int, err error) {
	send := func(order, msgID string) error {
		msg := nats.NewMsg("orders.charge")
		msg.Header.Set(jetstream.MsgIDHeader, msgID)
		msg.Header.Set(orderHeader, order)
		msg.Data = []byte(`{"order":"` + order + `","cents":4200}`)
		ack, err := d.js.PublishMsg(ctx, msg)
		if err == nil && ack.Duplicate {
			dropped++
		} else if err == nil {
			stored++
		}
		return err
	}
	for i, order := range orders() {
		if err := send(order, order+"#1"); err != nil {
			return 0, 0, err
		}
		if i%2 == 0 {
			if err := send(order, order+"#1"); err != nil {
				return 0, 0, err
			}
		}
	}
	for _, order := range orders() {
		if err := send(order, order+"#2"); err != nil {
			return 0, 0, err
		}
	}
	return stored, dropped, nil
}

// killVictim waits until a consumer blocks in the victim's handler, kills
// it with SIGKILL, and returns when.
func (d *demo) killVictim(ctx context.Context) (time.Time, error) {
	var id string
	err := poll(ctx, "a consumer inside "+victim+"'s handler", func() (bool, error) {
		var err error
		id, err = d.rc.Get(ctx, keyBlocked).Result()
		if errors.Is(err, redis.Nil) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return time.Time{}, err
	}
	k := d.kids[id]
	if k == nil {
		return time.Time{}, fmt.Errorf("no consumer %q", id)
	}
	k.done = true
	if err := k.cmd.Process.Kill(); err != nil {
		return time.Time{}, err
	}
	at := time.Now()
	<-k.exited
	return at, nil
}

// waitCharged waits until order is charged.
func (d *demo) waitCharged(ctx context.Context, order string) error {
	return poll(ctx, order+"'s charge", func() (bool, error) {
		n, err := d.rc.Get(ctx, keyCharges+order).Int()
		if errors.Is(err, redis.Nil) {
			return false, nil
		}
		return n > 0, err
	})
}

// poll calls done every 20ms until it reports true or fails, or ctx ends.
func poll(ctx context.Context, what string, done func() (bool, error)) error {
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
