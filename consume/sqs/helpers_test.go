package sqs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/sqs"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/sqstest"
)

// emu is the process's SQS emulator (goaws keeps global state: one per
// process), started by TestMain.
var emu *sqstest.Emulator

var quiet = slog.New(slog.DiscardHandler)

// TestMain sends the child consumer processes of the crash test to
// childMain, and runs the tests against one emulator, checking for leaked
// goroutines once it is stopped.
func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(childMain())
	}
	var err error
	emu, err = sqstest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	emu.Close()
	if code == 0 {
		// The SDK clients' idle connections end with the emulator.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var queueSeq atomic.Int64

// env is one queue of the emulator and a client of it.
type env struct {
	cl   *awssqs.Client
	url  string
	name string
	vis  time.Duration // the queue's visibility timeout
}

// newEnv creates a queue with a visibility timeout of vis seconds and
// attrs (a redrive policy, say).
func newEnv(t testing.TB, vis int, attrs map[string]string) *env {
	t.Helper()
	name := fmt.Sprintf("q%d-%s", queueSeq.Add(1), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
	if len(name) > 80 {
		name = name[:80]
	}
	return createQueue(t, sqstest.Client(emu.URL), name, vis, attrs)
}

func createQueue(t testing.TB, cl *awssqs.Client, name string, vis int, attrs map[string]string) *env {
	t.Helper()
	a := map[string]string{"VisibilityTimeout": strconv.Itoa(vis)}
	for k, v := range attrs {
		a[k] = v
	}
	out, err := cl.CreateQueue(testCtx(t), &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: a})
	if err != nil {
		t.Fatal(err)
	}
	return &env{cl: cl, url: aws.ToString(out.QueueUrl), name: name, vis: time.Duration(vis) * time.Second}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), idemtest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// send sends body with key in the Idempotency-Key attribute (none if "").
func (e *env) send(t testing.TB, key, body string) {
	t.Helper()
	in := &awssqs.SendMessageInput{QueueUrl: &e.url, MessageBody: aws.String(body)}
	if key != "" {
		in.MessageAttributes = map[string]types.MessageAttributeValue{
			sqs.KeyAttribute: {DataType: aws.String("String"), StringValue: aws.String(key)},
		}
	}
	if _, err := e.cl.SendMessage(testCtx(t), in); err != nil {
		t.Fatal(err)
	}
}

// count is the number of messages in the queue, visible or in flight.
func (e *env) count(t testing.TB) int {
	t.Helper()
	out, err := e.cl.GetQueueAttributes(testCtx(t), &awssqs.GetQueueAttributesInput{QueueUrl: &e.url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// receive receives one message, waiting up to 1s ("", false if none).
func (e *env) receive(t testing.TB) (types.Message, bool) {
	t.Helper()
	out, err := e.cl.ReceiveMessage(testCtx(t), &awssqs.ReceiveMessageInput{QueueUrl: &e.url,
		MaxNumberOfMessages: 1, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) == 0 {
		return types.Message{}, false
	}
	return out.Messages[0], true
}

// consumer returns a consume.Consumer on a runtime of rtOpts (in-memory
// unless set), with quick delays unless co sets them.
func consumer(t testing.TB, rtOpts idem.Options, co consume.Options) *consume.Consumer {
	t.Helper()
	if co.Runtime == nil {
		co.Runtime = idemtest.Runtime(t, rtOpts)
	}
	if co.MinDelay == 0 && co.MaxDelay == 0 {
		co.MinDelay, co.MaxDelay = 100*time.Millisecond, 2*time.Second
	}
	if co.Logger == nil {
		co.Logger = quiet
	}
	c, err := consume.New(co)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// adapter returns an adapter of e's queue with o, filling Consumer (a
// fresh one), Client, QueueURL, VisibilityTimeout (the queue's) and Logger
// when o leaves them unset, and a 1s WaitTime.
func (e *env) adapter(t testing.TB, o sqs.Options) *sqs.Adapter {
	t.Helper()
	if o.Consumer == nil {
		o.Consumer = consumer(t, idem.Options{}, consume.Options{})
	}
	if o.Client == nil {
		o.Client = e.cl
	}
	if o.QueueURL == "" {
		o.QueueURL = e.url
	}
	if o.Logger == nil {
		o.Logger = quiet
	}
	if o.VisibilityTimeout == 0 {
		o.VisibilityTimeout = e.vis
	}
	if o.WaitTime == 0 {
		o.WaitTime = time.Second
	}
	a, err := sqs.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// run runs a until the end of the test, and checks that Run returned.
func run(t testing.TB, a *sqs.Adapter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run returned %v, want context.Canceled", err)
			}
		case <-time.After(idemtest.Timeout):
			t.Error("Run did not return")
		}
	})
}

// ledger counts effects per key and keeps the verdicts.
type ledger struct {
	mu       sync.Mutex
	effects  map[string]int
	verdicts map[string][]consume.Verdict
}

func newLedger() *ledger {
	return &ledger{effects: map[string]int{}, verdicts: map[string][]consume.Verdict{}}
}

func (l *ledger) effect(key string) {
	l.mu.Lock()
	l.effects[key]++
	l.mu.Unlock()
}

func (l *ledger) onVerdict(m *sqs.Message, v consume.Verdict, _ error) {
	l.mu.Lock()
	l.verdicts[m.Key] = append(l.verdicts[m.Key], v)
	l.mu.Unlock()
}

func (l *ledger) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.effects[key]
}

func (l *ledger) decisions(key string) []consume.Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []consume.Decision
	for _, v := range l.verdicts[key] {
		out = append(out, v.Decision)
	}
	return out
}

// recorder wraps the client: it counts each message id's receives and
// lets a test look at each call.
type recorder struct {
	sqs.Client
	mu        sync.Mutex
	received  map[string]int
	onDelete  func(*awssqs.DeleteMessageInput)
	onVisible func(*awssqs.ChangeMessageVisibilityInput)
}

func newRecorder(cl sqs.Client) *recorder { return &recorder{Client: cl, received: map[string]int{}} }

func (r *recorder) ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, opts ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error) {
	out, err := r.Client.ReceiveMessage(ctx, in, opts...)
	if err == nil {
		r.mu.Lock()
		for _, m := range out.Messages {
			r.received[aws.ToString(m.MessageId)]++
		}
		r.mu.Unlock()
	}
	return out, err
}

func (r *recorder) DeleteMessage(ctx context.Context, in *awssqs.DeleteMessageInput, opts ...func(*awssqs.Options)) (*awssqs.DeleteMessageOutput, error) {
	if r.onDelete != nil {
		r.onDelete(in)
	}
	return r.Client.DeleteMessage(ctx, in, opts...)
}

func (r *recorder) ChangeMessageVisibility(ctx context.Context, in *awssqs.ChangeMessageVisibilityInput, opts ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityOutput, error) {
	if r.onVisible != nil {
		r.onVisible(in)
	}
	return r.Client.ChangeMessageVisibility(ctx, in, opts...)
}

// receives returns how often each message id was received.
func (r *recorder) receives() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.received))
	for k, v := range r.received {
		out[k] = v
	}
	return out
}
