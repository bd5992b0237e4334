package natsjs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
)

// Message is what a handler is given: the JetStream message and its
// metadata. The adapter acknowledges the message: a handler must not call
// Msg's Ack, Nak, Term or InProgress.
type Message struct {
	// Msg is the message as the jetstream package delivered it.
	Msg jetstream.Msg
	// Metadata is the message's JetStream metadata: stream and consumer
	// sequences, delivery count (NumDelivered), stream and consumer names,
	// the time it was stored. NumDelivered is the delivery's attempt
	// (consume.Delivery.Attempt), which grows the retry delay: it counts
	// every delivery, those after a Nak (a retry, a key held elsewhere, a
	// shutdown) too.
	Metadata *jetstream.MsgMetadata
	// Key is the message's key (its Nats-Msg-Id, or Options.Key's answer)
	// and Scope its scope; IdemKey is the idem key built of both (see
	// consume.Key), for the runtime's Get, State or Forget.
	Key, Scope, IdemKey string
}

// Data returns the message's payload (nil for a nil or zero Message).
func (m *Message) Data() []byte {
	if m == nil || m.Msg == nil {
		return nil
	}
	return m.Msg.Data()
}

// Subject returns the subject the message was published on ("" for a nil
// or zero Message).
func (m *Message) Subject() string {
	if m == nil || m.Msg == nil {
		return ""
	}
	return m.Msg.Subject()
}

// Headers returns the message's headers (nil for a nil or zero Message).
func (m *Message) Headers() nats.Header {
	if m == nil || m.Msg == nil {
		return nil
	}
	return m.Msg.Headers()
}

// HandlerFunc handles a message: its effects happen once per message key.
// An error marked idem.Permanent (or one the runtime's classifier calls
// permanent) terminates the message; any other error has it redelivered.
type HandlerFunc func(ctx context.Context, m *Message) error

// Handler returns a jetstream.MessageHandler, for Consumer.Consume, that
// processes each message with h (see [Adapter.Process]). ctx is the
// consumer's: when it ends, messages in flight are given back to the
// server (a Nak delayed by the backoff, MinDelay for a first delivery)
// instead of acknowledged, and their handlers go on detached and store
// their results for the redelivery to replay. Stop (or drain) the
// subscription before closing the idem runtime: every message delivered
// to a closed runtime is given back the same way.
func (a *Adapter) Handler(ctx context.Context, h HandlerFunc) jetstream.MessageHandler {
	return func(msg jetstream.Msg) { _, _ = a.Process(ctx, msg, h) }
}

// Process handles one message with h and answers the server: Ack, Nak
// (with a delay) or Term, as the verdict says (see the package
// documentation). It returns the verdict and the error of the answer. Use
// it in a Messages().Next() or Fetch loop; a message without JetStream
// metadata (not from a JetStream consumer) is not answered and its error
// returned, as is a nil message or an adapter nil or not built by [New]
// (an error matching idem.ErrInvalidArgument): the server redelivers such
// a message after AckWait. A nil ctx is taken for context.Background(). Process does not recover panics of the user's
// code outside the handler (Options.Key, Scope, Run outside its call of idem.Do, OnVerdict, a logger): such
// a panic goes on up with the message unanswered and no longer reported in
// progress, so the server redelivers it after AckWait.
func (a *Adapter) Process(ctx context.Context, msg jetstream.Msg, h HandlerFunc) (consume.Verdict, error) {
	if a == nil || a.o.Consumer == nil || msg == nil {
		err := fmt.Errorf("%w: natsjs: Process with a nil message, or an adapter nil or not built by New",
			idem.ErrInvalidArgument)
		return consume.Verdict{Err: err}, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	md, err := msg.Metadata()
	if err != nil {
		return consume.Verdict{Err: err}, err
	}
	m := &Message{Msg: msg, Metadata: md, Key: a.o.Key(msg), Scope: a.o.Scope(md)}
	m.IdemKey, _ = consume.Key(m.Scope, m.Key)
	d := consume.Delivery{Scope: m.Scope, Key: m.Key, Attempt: int(min(md.NumDelivered, 1<<30))}
	if a.o.Fingerprint {
		sum := sha256.Sum256(msg.Data())
		d.Fingerprint = sum[:]
	}
	var fn func(context.Context) (struct{}, error)
	if h != nil {
		fn = func(ctx context.Context) (struct{}, error) { return struct{}{}, h(ctx, m) }
	}
	v := a.handle(ctx, msg, d, fn)
	ackErr := a.answer(msg, v)
	a.report(m, v, ackErr)
	return v, ackErr
}

// handle runs consume.HandleWith (with Options.Run) while msg is reported
// in progress. The reports stop on every path: it does not panic on its own,
// but a panic from code of the user's it calls (a slog handler, a codec)
// goes on up unanswered, and the server redelivers the message after
// AckWait instead of seeing it in progress forever.
func (a *Adapter) handle(ctx context.Context, msg jetstream.Msg, d consume.Delivery,
	fn func(context.Context) (struct{}, error)) consume.Verdict {
	ka := keepAlive(msg, a.o.Progress)
	defer ka.stop()
	_, v := consume.HandleWith(ctx, a.o.Consumer, d, a.o.Run, fn)
	return v
}

// answer tells the server the verdict about msg.
func (a *Adapter) answer(msg jetstream.Msg, v consume.Verdict) error {
	switch v.Decision {
	case consume.Ack:
		if a.o.DoubleAck {
			ctx, cancel := context.WithTimeout(context.Background(), a.o.AckTimeout)
			defer cancel()
			return msg.DoubleAck(ctx)
		}
		return msg.Ack()
	case consume.Retry:
		// consume.Handle gives every Retry a delay; a plain Nak would
		// have the message back at once, and a consumer on a closed
		// runtime would spin on it.
		return msg.NakWithDelay(v.Delay)
	case consume.Term:
		return terminate(a.o.Conn, msg, termReason(v.Err))
	}
	return errors.New("natsjs: no decision") // not reached: Handle always decides
}

// report logs what needs a warning and calls OnVerdict.
func (a *Adapter) report(m *Message, v consume.Verdict, ackErr error) {
	if v.Decision == consume.Term {
		a.o.Logger.Warn("natsjs: message terminated", "stream", m.Metadata.Stream, "consumer", m.Metadata.Consumer,
			"stream_seq", m.Metadata.Sequence.Stream, "key", m.Key, "replayed", v.Replayed(), "reason", errText(v.Err))
	}
	if ackErr != nil {
		a.o.Logger.Warn("natsjs: answering a message failed; the server will redeliver it", "decision", v.Decision.String(),
			"stream", m.Metadata.Stream, "consumer", m.Metadata.Consumer, "stream_seq", m.Metadata.Sequence.Stream, "error", ackErr)
	}
	if a.o.OnVerdict != nil {
		a.o.OnVerdict(m, v, ackErr)
	}
}

// maxReason bounds the reason sent with a Term (it goes into an advisory).
const maxReason = 256

// termReason is the reason sent with a Term: err's text, cut to
// maxReason bytes at a rune boundary.
func termReason(err error) string {
	r := "idem: " + errText(err)
	if len(r) > maxReason {
		n := maxReason
		for n > 0 && !utf8.RuneStart(r[n]) {
			n--
		}
		r = r[:n]
	}
	return r
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// progress reports a message in progress every interval until stopped.
type progress struct {
	mu      sync.Mutex
	msg     jetstream.Msg
	every   time.Duration
	t       *time.Timer
	stopped bool
}

// keepAlive starts reporting msg in progress every interval. It costs a
// timer, not a goroutine, until the first report.
func keepAlive(msg jetstream.Msg, every time.Duration) *progress {
	p := &progress{msg: msg, every: every}
	p.mu.Lock()
	p.t = time.AfterFunc(every, p.fire)
	p.mu.Unlock()
	return p
}

func (p *progress) fire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	_ = p.msg.InProgress() // a lost report costs a redelivery, which waits or replays
	p.t.Reset(p.every)
}

// stop ends the reports; none is sent after it returns.
func (p *progress) stop() {
	p.mu.Lock()
	p.stopped = true
	p.t.Stop()
	p.mu.Unlock()
}
