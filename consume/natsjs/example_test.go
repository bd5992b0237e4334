package natsjs_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
)

// example is what the examples run on: an embedded NATS server with a
// stream ORDERS (subjects orders.>) and a durable consumer "shipper", and
// an idem runtime on the in-memory store.
type example struct {
	js   jetstream.JetStream
	cons jetstream.Consumer
	c    *consume.Consumer
	stop func()
}

func startExample() example {
	dir, _ := os.MkdirTemp("", "natsjs-example")
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		panic("no server")
	}
	nc, _ := nats.Connect(srv.ClientURL())
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	_, _ = js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	cons, _ := js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{
		Durable: "shipper", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Second})
	rt, _ := idem.New(idem.Options{})
	c, _ := consume.New(consume.Options{Runtime: rt})
	return example{js: js, cons: cons, c: c, stop: func() {
		_ = rt.Close(ctx)
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}}
}

// publish publishes an order with a message id.
func (x example) publish(id, order string) {
	msg := nats.NewMsg("orders.new")
	msg.Header.Set(jetstream.MsgIDHeader, id)
	msg.Data = []byte(order)
	if _, err := x.js.PublishMsg(context.Background(), msg); err != nil {
		panic(err)
	}
}

// A consumer that ships each order once. The second message carries the
// same Order-Id in a new message (a producer's retry that JetStream's
// duplicate window did not catch): it is acknowledged as a replay.
func ExampleForConsumer() {
	x := startExample()
	defer x.stop()
	verdicts := make(chan consume.Verdict)
	a, err := natsjs.ForConsumer(x.cons, natsjs.Options{
		Consumer:  x.c,
		Conn:      x.js.Conn(), // how a Term is sent depends on the server's version
		Key:       func(m jetstream.Msg) string { return m.Headers().Get("Order-Id") },
		OnVerdict: func(_ *natsjs.Message, v consume.Verdict, _ error) { verdicts <- v },
	})
	if err != nil {
		panic(err)
	}
	shipped := 0
	cc, _ := x.cons.Consume(a.Handler(context.Background(), func(ctx context.Context, m *natsjs.Message) error {
		shipped++
		return nil
	}))
	defer func() { cc.Stop(); <-cc.Closed() }()

	for _, id := range []string{"msg-1", "msg-2"} {
		msg := nats.NewMsg("orders.new")
		msg.Header.Set(jetstream.MsgIDHeader, id)
		msg.Header.Set("Order-Id", "order-7")
		_, _ = x.js.PublishMsg(context.Background(), msg)
		v := <-verdicts
		fmt.Println(v.Decision, v.Outcome)
	}
	fmt.Println("shipped:", shipped)
	// Output:
	// ack executed
	// ack replayed
	// shipped: 1
}

// Handler fits Consume: messages are keyed by their Nats-Msg-Id.
func ExampleAdapter_Handler() {
	x := startExample()
	defer x.stop()
	done := make(chan string)
	a, _ := natsjs.ForConsumer(x.cons, natsjs.Options{Consumer: x.c})
	cc, _ := x.cons.Consume(a.Handler(context.Background(), func(ctx context.Context, m *natsjs.Message) error {
		done <- fmt.Sprintf("%s: %s (stream seq %d, delivery %d)", m.Key, m.Data(), m.Metadata.Sequence.Stream, m.Metadata.NumDelivered)
		return nil
	}))
	defer func() { cc.Stop(); <-cc.Closed() }()
	x.publish("msg-1", "2 books")
	fmt.Println(<-done)
	// Output: msg-1: 2 books (stream seq 1, delivery 1)
}

// Process handles the messages of a Messages().Next() loop; a permanent
// error gives the message up (terminated, never redelivered).
func ExampleAdapter_Process() {
	x := startExample()
	defer x.stop()
	a, _ := natsjs.ForConsumer(x.cons, natsjs.Options{Consumer: x.c})
	x.publish("msg-1", "2 books")
	x.publish("msg-2", "-1 books")
	it, _ := x.cons.Messages()
	defer it.Stop()
	for range 2 {
		msg, err := it.Next()
		if err != nil {
			panic(err)
		}
		v, err := a.Process(context.Background(), msg, func(ctx context.Context, m *natsjs.Message) error {
			if m.Data()[0] == '-' {
				return idem.Permanent(fmt.Errorf("invalid quantity in %q", m.Data()))
			}
			return nil
		})
		fmt.Println(v.Decision, v.Err, err)
	}
	// Output:
	// ack <nil> <nil>
	// term invalid quantity in "-1 books" <nil>
}

// New needs the consumer's AckWait when it is not the server's default:
// the adapter reports a running handler in progress every third of it.
func ExampleNew() {
	x := startExample()
	defer x.stop()
	a, err := natsjs.New(natsjs.Options{Consumer: x.c, AckWait: 10 * time.Second, DoubleAck: true})
	if err != nil {
		panic(err)
	}
	x.publish("msg-1", "2 books")
	batch, _ := x.cons.Fetch(1)
	for msg := range batch.Messages() {
		v, err := a.Process(context.Background(), msg, func(context.Context, *natsjs.Message) error { return nil })
		fmt.Println(v.Decision, v.Outcome, err)
	}
	// Output: ack executed <nil>
}
