package natsjs

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/store"
)

// MsgIDHeader is the header a message's key is read from by default: the
// id JetStream's duplicate window is keyed by.
const MsgIDHeader = jetstream.MsgIDHeader

// Defaults of Options.
const (
	// DefaultAckWait is the AckWait assumed when Options.AckWait is zero:
	// the server's own default.
	DefaultAckWait = 30 * time.Second
	// DefaultAckTimeout bounds a DoubleAck.
	DefaultAckTimeout = 5 * time.Second
)

// Options configures an [Adapter]. The messages it handles must come from
// a consumer that acknowledges explicitly (AckExplicitPolicy): under
// AckAll or AckNone, retried and terminated messages are lost.
// [ForConsumer] checks it; [New] cannot.
type Options struct {
	// Consumer decides about each delivery and holds the idem runtime.
	// Required.
	Consumer *consume.Consumer

	// Key returns a message's key; "" means it has none.
	// Default: the value of its Nats-Msg-Id header.
	Key func(jetstream.Msg) string

	// Scope returns the scope of a message's key from its metadata.
	// Default: "<stream>/<consumer>" (names hold no '/'): consumers of one
	// stream each run a message once. Return the stream alone to run a
	// message once across consumers. Stream and consumer names are unique
	// only within a NATS account (and JetStream domain): when consumers of
	// several accounts or domains share one idem store, put the account or
	// domain into the scope, or their keys meet.
	Scope func(*jetstream.MsgMetadata) string

	// AckWait is the consumer's AckWait: how long the server waits for an
	// acknowledgement before it redelivers. [ForConsumer] reads it from
	// the consumer's info, once. A consumer with a BackOff list waits its
	// entries instead after a redelivery: then give the shortest of them
	// (or set Progress below it).
	// Default: 30s (the server's default). At most store.MaxDuration, as
	// Progress and AckTimeout.
	AckWait time.Duration

	// Progress is how often a message whose handler is still running (or
	// that waits for a duplicate in flight) is reported in progress
	// (InProgress), which restarts the server's AckWait. It must be
	// shorter than AckWait. Only the message being handled is reported:
	// those waiting in Consume's buffer are not, and one that waits there
	// past AckWait is redelivered (and replayed: no second effect, but
	// the work twice). Keep jetstream.PullMaxMessages times the handler's
	// usual time under AckWait.
	// Default: AckWait / 3.
	Progress time.Duration

	// DoubleAck makes the acknowledgement wait for the server's
	// confirmation (DoubleAck), bounded by AckTimeout; an acknowledgement
	// that fails is logged and the message is redelivered and replayed.
	// Default: false (Ack, one publish).
	DoubleAck bool

	// AckTimeout bounds a DoubleAck. Default: 5s.
	AckTimeout time.Duration

	// Fingerprint ties each key to the message's payload: a key reused
	// for a different payload is terminated with idem.ErrFingerprintMismatch
	// instead of replaying the first message's result.
	// Default: false.
	Fingerprint bool

	// Conn is the connection the consumer's messages arrive on (a
	// *nats.Conn: jetstream.JetStream's Conn()). Before each termination
	// the adapter reads the version of the server it is connected to: a
	// server from 2.10.4 on gets the reason with the Term
	// (TermWithReason), for its advisory; an older one a plain Term, as it
	// ignores a Term with a reason (the message would come back after
	// every AckWait). While the client reconnects the version is unknown,
	// and the Term is plain. In a cluster the Term is handled by the
	// consumer's leader, which may not be the server the client is
	// connected to: while a cluster with a server older than 2.10.4 is
	// upgraded, leave Conn nil.
	// Default: nil: every termination is a plain Term, which every server
	// honours; the advisory then carries no reason.
	Conn ServerConn

	// Run, if set, makes each message's handler call in place of idem.Do
	// (see consume.Runner): the hook for running a handler's work in a
	// form this package knows nothing of. Package natstx sets it to run
	// each handler in a PostgreSQL transaction that commits with the
	// message's record (pgtx.Do), and hands the handler that transaction;
	// use natstx rather than setting it to that yourself. Everything else
	// (keys, progress reports, verdicts, answers) is as without it.
	// Default: nil (idem.Do).
	Run consume.Runner[struct{}]

	// OnVerdict, if set, is called after each message is answered with the
	// verdict and the error of the answer (Ack, Nak or Term): for metrics
	// and logs. It runs on the handler's goroutine, before Process returns
	// and so before Consume hands over the next message: keep it quick.
	// Default: nil.
	OnVerdict func(m *Message, v consume.Verdict, ackErr error)

	// Logger receives warnings: messages terminated, answers that failed.
	// Default: slog.Default().
	Logger *slog.Logger
}

// Adapter runs JetStream message handlers once per message key. It holds
// no goroutines of its own (a timer per message in progress) and is safe
// for concurrent use.
type Adapter struct {
	o Options
}

// New returns an adapter with opts, or an error matching
// idem.ErrInvalidArgument (a nil Consumer or one not built by
// consume.New, a negative duration, Progress not shorter than AckWait). It cannot check the consumer the messages
// come from: give it only the messages of a consumer with
// AckExplicitPolicy (see [ForConsumer], which checks), and that
// consumer's AckWait in Options.AckWait.
func New(opts Options) (*Adapter, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: natsjs.Options.%s", idem.ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	if opts.Consumer == nil {
		return nil, bad("Consumer is nil")
	}
	if opts.Consumer.Runtime() == nil {
		return nil, bad("Consumer was not built by consume.New (it has no runtime)")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"AckWait", opts.AckWait}, {"Progress", opts.Progress}, {"AckTimeout", opts.AckTimeout}} {
		if d.v < 0 || d.v > store.MaxDuration {
			return nil, bad("%s is %v; it must be between 0 (the default) and %v", d.name, d.v, store.MaxDuration)
		}
	}
	if opts.AckWait == 0 {
		opts.AckWait = DefaultAckWait
	}
	if opts.Progress == 0 {
		opts.Progress = opts.AckWait / 3
	}
	if opts.Progress >= opts.AckWait {
		return nil, bad("Progress (%v) must be shorter than AckWait (%v)", opts.Progress, opts.AckWait)
	}
	if opts.AckTimeout == 0 {
		opts.AckTimeout = DefaultAckTimeout
	}
	if opts.Key == nil {
		opts.Key = msgID
	}
	if opts.Scope == nil {
		opts.Scope = defaultScope
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Adapter{o: opts}, nil
}

// ForConsumer returns an adapter for the messages of c: as [New], with
// AckWait, when opts leaves it zero, taken from c's cached info (the
// consumer's configuration when it was created or looked up; it is read
// once, here: an adapter does not see a later change of the consumer's
// AckWait).
//
// c must acknowledge explicitly (jetstream.AckExplicitPolicy): under
// AckAll, the Ack of a later message acknowledges an earlier one that was
// given back for a retry, and under AckNone (an ordered consumer) the
// server ignores Nak and Term; either way a message is lost. Another ack
// policy, or a consumer without cached info (an ordered consumer before it
// starts), is an error matching idem.ErrInvalidArgument.
func ForConsumer(c jetstream.Consumer, opts Options) (*Adapter, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: natsjs.ForConsumer with a nil consumer", idem.ErrInvalidArgument)
	}
	info := c.CachedInfo()
	if info == nil {
		return nil, fmt.Errorf("%w: natsjs.ForConsumer: the consumer has no cached info, so its ack policy is unknown "+
			"(an ordered consumer has none before it starts, and acknowledges nothing); use a durable consumer "+
			"with AckExplicitPolicy", idem.ErrInvalidArgument)
	}
	if p := info.Config.AckPolicy; p != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("%w: natsjs.ForConsumer: consumer %q acknowledges with %v, not explicitly: "+
			"a retried or terminated message would be lost (AckAll acknowledges it with a later message, AckNone "+
			"ignores Nak and Term); use AckExplicitPolicy", idem.ErrInvalidArgument, info.Name, p)
	}
	if opts.AckWait == 0 {
		opts.AckWait = info.Config.AckWait
	}
	return New(opts)
}

func msgID(m jetstream.Msg) string { return m.Headers().Get(MsgIDHeader) }

func defaultScope(md *jetstream.MsgMetadata) string { return md.Stream + "/" + md.Consumer }
