package sqs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
)

// Message is what a handler is given: the SQS message and what the
// adapter made of it. The adapter deletes the message or changes its
// visibility: a handler must not.
type Message struct {
	// Msg is the message as ReceiveMessage returned it.
	Msg types.Message
	// Key is the message's key (Options.Key's answer) and Scope its
	// scope; IdemKey is the idem key built of both (see consume.Key), for
	// the runtime's Get, State or Forget.
	Key, Scope, IdemKey string
	// Attempt is the message's ApproximateReceiveCount (1 when SQS did
	// not give it): it grows the retry delay.
	Attempt int
	// ReceivedAt is when the adapter took the message to be received:
	// MaxVisibility counts from it.
	ReceivedAt time.Time
}

// Body returns the message's body ("" for a nil Message or none).
func (m *Message) Body() string {
	if m == nil || m.Msg.Body == nil {
		return ""
	}
	return *m.Msg.Body
}

// HandlerFunc handles a message: its effects happen once per message key.
// An error marked idem.Permanent (or one the runtime's classifier calls
// permanent) ends the message as Options.OnPermanent says; any other
// error has it received again after the retry delay.
type HandlerFunc func(ctx context.Context, m *Message) error

// Process handles one message with Options.Handler and answers SQS as the
// verdict says: DeleteMessage after the result is stored or replayed
// (Ack), ChangeMessageVisibility to the retry delay (Retry), and on a
// permanent error (Term) DeleteMessage or nothing, by Options.OnPermanent.
// While the handler runs, and while a duplicate waits for a run in
// flight, the message's visibility timeout is extended every
// Options.Extend, up to Options.MaxVisibility after the call. It returns
// the verdict and the error of the answer.
//
// Use it in a receive loop of your own: receive with the VisibilityTimeout
// of Options, the key's attribute among MessageAttributeNames (and
// ApproximateReceiveCount among the system attributes, and on a FIFO
// queue MessageGroupId and MessageDeduplicationId: the default key falls
// back to both, and without the group it is not the key Run gives the
// message), and call Process at once: the 12-hour
// limit counts from the receive. A message without a receipt handle, or
// an adapter nil or not built by [New], is not answered and its error
// (matching idem.ErrInvalidArgument) returned. A nil ctx is taken for
// context.Background(). When ctx ends, the message is given back after
// the backoff and its handler goes on detached, storing its result for
// the next receive to replay. On a FIFO queue, keep a message group's
// order as Run does: process the messages of a group one after the other,
// and once one is not done with (a Retry, or a Term left by Leave), give
// back the rest of the group received with it (ChangeMessageVisibility to
// 0) instead of processing them. Panics of user code outside the handler
// (Key, Run outside its idem call, OnVerdict) go on up, with the message
// unanswered: it comes back after its visibility timeout.
func (a *Adapter) Process(ctx context.Context, msg types.Message) (consume.Verdict, error) {
	return a.process(ctx, msg, time.Now(), nil)
}

// process is Process with the time of the receive, and k the extensions
// of msg already under way (nil: start them); it stops k.
func (a *Adapter) process(ctx context.Context, msg types.Message, receivedAt time.Time, k *invisible) (consume.Verdict, error) {
	if a == nil || a.o.Consumer == nil || msg.ReceiptHandle == nil {
		if k != nil {
			k.stop()
		}
		err := fmt.Errorf("sqs: Process with a message without a receipt handle, or an adapter nil or not built by New: %w",
			idem.ErrInvalidArgument)
		return consume.Verdict{Err: err}, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	m := a.message(msg, receivedAt)
	d := consume.Delivery{Scope: m.Scope, Key: m.Key, Attempt: m.Attempt}
	if a.o.Fingerprint {
		sum := sha256.Sum256([]byte(m.Body()))
		d.Fingerprint = sum[:]
	}
	h := a.o.Handler
	fn := func(ctx context.Context) (struct{}, error) { return struct{}{}, h(ctx, m) }
	deadline := receivedAt.Add(a.o.MaxVisibility)
	v := a.handle(ctx, msg, deadline, d, fn, k)
	err := a.answer(ctx, msg, deadline, v)
	a.report(m, v, err)
	return v, err
}

// message is what a handler is given of msg, received at receivedAt. It
// calls Options.Key.
func (a *Adapter) message(msg types.Message, receivedAt time.Time) *Message {
	m := &Message{Msg: msg, Key: a.o.Key(msg), Scope: a.o.Scope, Attempt: 1, ReceivedAt: receivedAt}
	if n, err := strconv.Atoi(msg.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]); err == nil && n > 1 {
		m.Attempt = n
	}
	m.IdemKey, _ = consume.Key(m.Scope, m.Key)
	return m
}

// handle runs consume.HandleWith while msg's visibility is extended (by
// k, or else by extensions it starts). The extensions stop on every path,
// a panic of user code included.
func (a *Adapter) handle(ctx context.Context, msg types.Message, deadline time.Time, d consume.Delivery,
	fn func(context.Context) (struct{}, error), k *invisible) consume.Verdict {
	if k == nil {
		k = a.keepInvisible(msg, deadline)
	}
	defer k.stop()
	_, v := consume.HandleWith(ctx, a.o.Consumer, d, a.o.Run, fn)
	return v
}

// answer tells SQS the verdict about msg.
func (a *Adapter) answer(ctx context.Context, msg types.Message, deadline time.Time, v consume.Verdict) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.o.AnswerTimeout)
	defer cancel()
	switch v.Decision {
	case consume.Ack:
		return a.delete(actx, msg)
	case consume.Retry:
		// Never past the 12-hour limit: SQS refuses such a change, and
		// the message would come back at once instead of after a delay.
		left := time.Until(deadline)
		return a.setVisibility(actx, msg, max(min(seconds(v.Delay), floorSeconds(left)), 0))
	case consume.Term:
		if a.o.OnPermanent == Leave {
			return nil
		}
		return a.delete(actx, msg)
	}
	return errors.New("sqs: no decision") // not reached: HandleWith always decides
}

func (a *Adapter) delete(ctx context.Context, msg types.Message) error {
	_, err := a.o.Client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{
		QueueUrl: &a.o.QueueURL, ReceiptHandle: msg.ReceiptHandle})
	return err
}

func (a *Adapter) setVisibility(ctx context.Context, msg types.Message, secs int32) error {
	_, err := a.o.Client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{
		QueueUrl: &a.o.QueueURL, ReceiptHandle: msg.ReceiptHandle, VisibilityTimeout: secs})
	return err
}

// report logs what needs a warning and calls OnVerdict.
func (a *Adapter) report(m *Message, v consume.Verdict, answerErr error) {
	if v.Decision == consume.Term {
		a.o.Logger.Warn("sqs: message given up", "queue", a.o.QueueURL, "message_id", MessageID(m.Msg),
			"key", m.Key, "on_permanent", a.o.OnPermanent.String(), "replayed", v.Replayed(), "reason", errText(v.Err))
	}
	if answerErr != nil {
		a.o.Logger.Warn("sqs: answering a message failed; it comes back after its visibility timeout",
			"decision", v.Decision.String(), "queue", a.o.QueueURL, "message_id", MessageID(m.Msg), "error", answerErr)
	}
	if a.o.OnVerdict != nil {
		a.o.OnVerdict(m, v, answerErr)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// floorSeconds is d in whole seconds, rounded down (0 for d ≤ 0).
func floorSeconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(d / time.Second)
}

// invisible extends a message's visibility timeout every Extend until it
// is stopped or the deadline (MaxVisibility after the receive) leaves no
// whole second to extend by.
type invisible struct {
	a        *Adapter
	msg      types.Message
	deadline time.Time

	mu      sync.Mutex
	t       *time.Timer
	stopped bool
}

// keepInvisible starts extending msg's visibility. It costs a timer, not
// a goroutine, until the first extension.
func (a *Adapter) keepInvisible(msg types.Message, deadline time.Time) *invisible {
	k := &invisible{a: a, msg: msg, deadline: deadline}
	k.mu.Lock()
	k.t = time.AfterFunc(a.o.Extend, k.fire)
	k.mu.Unlock()
	return k
}

// fire sends one extension, holding mu: stop waits for it, so that no
// extension follows the answer (it would undo a retry's delay).
func (k *invisible) fire() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	secs := min(seconds(k.a.o.VisibilityTimeout), floorSeconds(time.Until(k.deadline)))
	if secs <= 0 {
		k.a.o.Logger.Warn("sqs: a message's handler outlasts MaxVisibility; it becomes visible again",
			"queue", k.a.o.QueueURL, "message_id", MessageID(k.msg), "max_visibility", k.a.o.MaxVisibility)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.a.o.AnswerTimeout)
	err := k.a.setVisibility(ctx, k.msg, secs)
	cancel()
	if err != nil {
		// A lost extension costs a receive elsewhere, which waits for
		// this run or is given back: no second effect.
		k.a.o.Logger.Warn("sqs: extending a message's visibility failed", "queue", k.a.o.QueueURL,
			"message_id", MessageID(k.msg), "error", err)
	}
	k.t.Reset(k.a.o.Extend)
}

// stop ends the extensions; none is sent after it returns.
func (k *invisible) stop() {
	k.mu.Lock()
	k.stopped = true
	k.t.Stop()
	k.mu.Unlock()
}
