package sqs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/store"
)

// Client is the part of the SDK's client the adapter calls: *sqs.Client
// of github.com/aws/aws-sdk-go-v2/service/sqs satisfies it.
type Client interface {
	ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, optFns ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *awssqs.ChangeMessageVisibilityInput, optFns ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityOutput, error)
	DeleteMessage(ctx context.Context, in *awssqs.DeleteMessageInput, optFns ...func(*awssqs.Options)) (*awssqs.DeleteMessageOutput, error)
}

// KeyAttribute is the message attribute a message's key is read from by
// default: an attribute the producer sets (String; a Binary one's bytes
// are taken as the key), the same on every send of one message (its
// retries too).
const KeyAttribute = "Idempotency-Key"

// Defaults and limits of Options.
const (
	// DefaultVisibilityTimeout is the queue's visibility timeout assumed
	// when Options.VisibilityTimeout is zero: SQS's own default.
	DefaultVisibilityTimeout = 30 * time.Second
	// MaxVisibility is SQS's limit on how long one receive of a message
	// may keep it invisible, extensions included.
	MaxVisibility = 12 * time.Hour
	// MinExtend is the shortest Options.Extend accepted: each extension
	// is a call to SQS, and a shorter period is almost surely a count of
	// seconds written without its unit.
	MinExtend = 100 * time.Millisecond
	// DefaultMaxVisibility is a minute short of MaxVisibility: room for
	// the time between SQS's receipt and the adapter's.
	DefaultMaxVisibility = MaxVisibility - time.Minute
	// DefaultWaitTime is Run's long-poll wait: SQS's longest.
	DefaultWaitTime = 20 * time.Second
	// DefaultConcurrency is how many messages Run handles at once.
	DefaultConcurrency = 10
	// DefaultAnswerTimeout bounds each DeleteMessage and
	// ChangeMessageVisibility call.
	DefaultAnswerTimeout = 10 * time.Second
)

// OnPermanent is what the adapter does with a message whose handler
// failed with a permanent error (consume.Term).
type OnPermanent uint8

const (
	// Delete deletes the message: it is done, and a duplicate of it is
	// deleted too. The default.
	Delete OnPermanent = iota + 1
	// Leave leaves the message in the queue, untouched: it is received
	// again once its visibility timeout ends, replays its stored error
	// (the handler does not run again) and is left again, until the
	// queue's redrive policy moves it to the dead-letter queue after
	// maxReceiveCount receives. Without a redrive policy it comes back
	// every visibility timeout until the queue's retention period ends.
	Leave
)

// String returns "delete", "leave" or "none".
func (p OnPermanent) String() string {
	switch p {
	case Delete:
		return "delete"
	case Leave:
		return "leave"
	}
	return "none"
}

// Options configures an [Adapter]. Zero fields take the documented
// default; negative durations are errors.
type Options struct {
	// Consumer decides about each message and holds the idem runtime and
	// the policy (settle time, lease, TTL, retry delays, what a missing
	// key does). Required.
	Consumer *consume.Consumer

	// Client sends the adapter's calls to SQS: an *sqs.Client. Required.
	Client Client

	// QueueURL is the queue's URL. Required.
	QueueURL string

	// Handler handles each message. Required.
	Handler HandlerFunc

	// Scope is where keys are unique (see consume.Delivery.Scope).
	// Default: QueueURL, which names the account, region and queue: two
	// queues fed by one producer (an SNS fan-out) each run a message once.
	// Set one scope on several queues to run a message once across them.
	// Every consumer of a queue must give it the same URL (or the same
	// Scope): SQS accepts more than one form of a queue's URL.
	Scope string

	// KeyAttribute is the message attribute read by the default Key.
	// Default: "Idempotency-Key" (KeyAttribute).
	KeyAttribute string

	// Key returns a message's key; "" means it has none (see
	// consume.Options.MissingKey). Use [MessageID] only to catch
	// redeliveries: SQS gives a message sent again (a producer's retry) a
	// new id.
	// Default: the value of the KeyAttribute message attribute (see
	// [Attribute]), or
	// else the MessageDeduplicationId system attribute within the message
	// group (FIFO queues; Run asks for both; see [DeduplicationID]).
	Key func(m types.Message) string

	// VisibilityTimeout is how long a receive hides a message: Run asks
	// for it in every ReceiveMessage; with Process, give the visibility
	// timeout your loop receives with (or the queue's). In whole seconds
	// (rounded up), 1s at least.
	// Default: 30s (SQS's default).
	VisibilityTimeout time.Duration

	// Extend is how often a message whose handler runs (or that waits for
	// a duplicate in flight) gets its visibility timeout set again to
	// VisibilityTimeout from now (ChangeMessageVisibility), so that SQS
	// does not hand it to another consumer meanwhile. It must be shorter
	// than VisibilityTimeout, and MinExtend at least.
	// Default: VisibilityTimeout / 3.
	Extend time.Duration

	// MaxVisibility bounds how long after its receipt a message is kept
	// invisible, extensions and retry delays included: SQS refuses to go
	// past 12 hours from a receive (MaxVisibility, the largest value
	// allowed). A handler still running then stops being covered: the
	// message becomes visible, and its next receive waits for the run or
	// is given back (consume's Settle).
	// Default: DefaultMaxVisibility (12h less a minute).
	MaxVisibility time.Duration

	// OnPermanent is what a permanent error (and a message that cannot be
	// keyed, or whose key was used for another payload) does: Delete or
	// Leave (for a redrive policy that moves it to a dead-letter queue).
	// Default: Delete.
	OnPermanent OnPermanent

	// Concurrency is how many messages Run handles at once; Run asks for
	// no more messages than it has room for (10 at most per receive).
	// Default: 10.
	Concurrency int

	// WaitTime is Run's long-poll wait (WaitTimeSeconds), in whole
	// seconds, at most 20s.
	// Default: 20s.
	WaitTime time.Duration

	// AnswerTimeout bounds each DeleteMessage and ChangeMessageVisibility
	// call. Answers are sent also after the context given to Run or
	// Process has ended (a shutdown still gives its messages back).
	// Default: 10s.
	AnswerTimeout time.Duration

	// Fingerprint ties each key to the message's body: a key reused for a
	// different body is given up with idem.ErrFingerprintMismatch instead
	// of replaying the first message's result.
	// Default: false.
	Fingerprint bool

	// Run, if set, makes each message's handler call in place of idem.Do
	// (see consume.Runner): pgtx.Do, say, to commit the handler's rows
	// with the message's record.
	// Default: nil (idem.Do).
	Run consume.Runner[struct{}]

	// OnVerdict, if set, is called after each message is answered, with
	// the verdict and the error of the answer: for metrics and logs. It
	// runs on the message's goroutine: keep it quick.
	// Default: nil.
	OnVerdict func(m *Message, v consume.Verdict, answerErr error)

	// Logger receives warnings: messages given up or left, answers and
	// receives that failed.
	// Default: slog.Default().
	Logger *slog.Logger
}

// Adapter runs SQS message handlers once per message key. It holds no
// goroutines of its own outside Run (a timer per message in flight) and
// is safe for concurrent use. Build it with [New].
type Adapter struct {
	o Options
}

// New returns an adapter with opts, or an error matching
// idem.ErrInvalidArgument: a required field missing, a Consumer not built
// by consume.New, a negative duration or Concurrency, Extend not shorter
// than VisibilityTimeout, a VisibilityTimeout or MaxVisibility over 12
// hours, a WaitTime over 20s, an OnPermanent other than Delete or
// Leave, or a Scope (QueueURL by default) that no idem key can be built
// in (one holding a NUL byte, or too long: see consume.Key).
func New(opts Options) (*Adapter, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("sqs: Options.%s: %w", fmt.Sprintf(format, args...), idem.ErrInvalidArgument)
	}
	switch {
	case opts.Consumer == nil:
		return nil, bad("Consumer is nil")
	case opts.Consumer.Runtime() == nil:
		return nil, bad("Consumer was not built by consume.New (it has no runtime)")
	case opts.Client == nil:
		return nil, bad("Client is nil")
	case opts.QueueURL == "":
		return nil, bad("QueueURL is empty")
	case opts.Handler == nil:
		return nil, bad("Handler is nil")
	case opts.Concurrency < 0:
		return nil, bad("Concurrency is %d; it must not be negative (zero means the default)", opts.Concurrency)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"VisibilityTimeout", opts.VisibilityTimeout}, {"Extend", opts.Extend},
		{"MaxVisibility", opts.MaxVisibility}, {"WaitTime", opts.WaitTime}, {"AnswerTimeout", opts.AnswerTimeout},
	} {
		if d.v < 0 || d.v > store.MaxDuration {
			return nil, bad("%s is %v; it must be between 0 (the default) and %v", d.name, d.v, store.MaxDuration)
		}
	}
	if opts.VisibilityTimeout > MaxVisibility || opts.MaxVisibility > MaxVisibility {
		return nil, bad("VisibilityTimeout (%v) and MaxVisibility (%v) must not be over SQS's 12h",
			opts.VisibilityTimeout, opts.MaxVisibility)
	}
	if opts.WaitTime > DefaultWaitTime {
		return nil, bad("WaitTime is %v; SQS waits 20s at most", opts.WaitTime)
	}
	switch opts.OnPermanent {
	case 0, Delete, Leave:
	default:
		return nil, bad("OnPermanent is %v; it must be Delete or Leave", opts.OnPermanent)
	}
	// SQS counts these in whole seconds, and each extension is a call to
	// it: a value set under these floors is almost surely a count meant in
	// seconds (VisibilityTimeout: 30 is 30ns).
	if opts.VisibilityTimeout > 0 && opts.VisibilityTimeout < time.Second {
		return nil, bad("VisibilityTimeout is %v; SQS counts it in whole seconds, 1s at least (a number of seconds needs * time.Second)", opts.VisibilityTimeout)
	}
	if opts.Extend > 0 && opts.Extend < MinExtend {
		return nil, bad("Extend is %v; it must be %v at least (a number of seconds needs * time.Second)", opts.Extend, MinExtend)
	}
	if opts.VisibilityTimeout == 0 {
		opts.VisibilityTimeout = DefaultVisibilityTimeout
	}
	opts.VisibilityTimeout = time.Duration(seconds(opts.VisibilityTimeout)) * time.Second
	if opts.Extend == 0 {
		opts.Extend = opts.VisibilityTimeout / 3
	}
	if opts.Extend >= opts.VisibilityTimeout {
		return nil, bad("Extend (%v) must be shorter than VisibilityTimeout (%v)", opts.Extend, opts.VisibilityTimeout)
	}
	if opts.MaxVisibility == 0 {
		opts.MaxVisibility = DefaultMaxVisibility
	}
	if opts.OnPermanent == 0 {
		opts.OnPermanent = Delete
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.WaitTime == 0 {
		opts.WaitTime = DefaultWaitTime
	}
	if opts.AnswerTimeout == 0 {
		opts.AnswerTimeout = DefaultAnswerTimeout
	}
	if opts.Scope == "" {
		opts.Scope = opts.QueueURL
	}
	if _, err := consume.Key(opts.Scope, "k"); err != nil {
		// Every message would be given up (deleted by default) unrun.
		return nil, bad("Scope (or QueueURL, the default scope) leaves no valid idem key: %v", err)
	}
	if opts.KeyAttribute == "" {
		opts.KeyAttribute = KeyAttribute
	}
	if opts.Key == nil {
		attr := Attribute(opts.KeyAttribute)
		opts.Key = func(m types.Message) string {
			if k := attr(m); k != "" {
				return k
			}
			return DeduplicationID(m)
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Adapter{o: opts}, nil
}

// seconds is d in whole seconds, rounded up, as SQS counts visibility,
// and at most MaxVisibility's 43200: no duration, however long, wraps
// around int32 (or int64, rounding up) into a negative count.
func seconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	if d >= MaxVisibility {
		return int32(MaxVisibility / time.Second)
	}
	return int32((d + time.Second - 1) / time.Second)
}
