package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/store"
)

// Headers the consumer reads and writes.
const (
	// DefaultKeyHeader is the header a record's key is read from by
	// default ([HeaderKey]).
	DefaultKeyHeader = "Idempotency-Key"
	// TopicHeader names the topic a record was first consumed from, on the
	// copies sent to the retry and dead-letter topics. A record of the
	// retry topic is keyed in the scope of that topic, so that its retry
	// replays or joins the first attempt's key.
	TopicHeader = "Idem-Topic"
	// PartitionHeader and OffsetHeader locate the first record, on the
	// copies.
	PartitionHeader = "Idem-Partition"
	OffsetHeader    = "Idem-Offset"
	// AttemptHeader carries the attempts already made, on the copies.
	AttemptHeader = "Idem-Attempt"
	// ErrorHeader carries the last error, on the copies: its first
	// MaxErrorHeader bytes, then "...", when it is longer.
	ErrorHeader = "Idem-Error"
)

// MaxErrorHeader bounds the error text of ErrorHeader: an error that
// carries a response body must not make a copy too large for the brokers
// to take, which would hold its record, and its partition, for ever.
const MaxErrorHeader = 4 << 10

// Defaults of Options.
const (
	DefaultCommitInterval  = time.Second
	DefaultInPlaceAttempts = 3
)

// Record is what a handler is given: the record and its key.
type Record struct {
	// Record is the record as franz-go fetched it. Its Context is not the
	// handler's.
	*kgo.Record
	// Key is the record's key (Options.Key's answer) and Scope its scope;
	// IdemKey is the idem key built of both (see consume.Key), for the
	// runtime's Get, State or Forget.
	Key, Scope, IdemKey string
	// Attempt is the attempt of this call: 1 for the first, growing with
	// each retry in place and carried over to the retry topic.
	Attempt int
}

// HandlerFunc handles one record. Return nil when it is done, an error
// marked idem.Permanent (or one the runtime's classifier calls permanent)
// to give it up (to the dead-letter topic, if one is set), or any other
// error to have it retried.
type HandlerFunc func(ctx context.Context, r *Record) error

// Options configures a [Consumer].
type Options struct {
	// Consumer decides about each record and holds the idem runtime and
	// policy (consume.Options). Required.
	Consumer *consume.Consumer

	// Group is the consumer group. Required.
	Group string

	// Topics are the topics consumed. Required (the retry topic, when set,
	// is added to them).
	Topics []string

	// Handler handles each record. Required.
	Handler HandlerFunc

	// Key returns a record's key; "" means it has none (see
	// consume.Options.MissingKey: by default such a record is given up).
	// Use [HeaderKey] for a header of your own, [RecordKey] for the
	// record's key: only when the producer puts a unique id there, since a
	// record key usually names an entity whose records share it.
	// A record of the retry topic is given to it as its first record: a
	// copy with the Topic, Partition and Offset of the record first
	// consumed (from the Idem-* headers), its key and headers unchanged,
	// so that a key made of them is the first record's.
	// Default: HeaderKey(DefaultKeyHeader).
	Key func(*kgo.Record) string

	// Scope returns the scope of a record's keys from its topic.
	// Default: "<topic>/<group>": each group runs a record once. A record
	// of the retry topic is given the topic of its TopicHeader.
	Scope func(topic, group string) string

	// DeadLetterTopic, if set, receives a copy of each record given up
	// (a permanent error, no key, a fingerprint mismatch, retries spent
	// without a retry topic), with the Idem-* headers; the record's offset
	// is committed only after the copy is acknowledged by the brokers.
	// Without it, such records are logged and skipped.
	DeadLetterTopic string

	// RetryTopic, if set, receives a copy of a record whose retries in
	// place are spent (InPlaceAttempts), and the record's offset is
	// committed after the copy is acknowledged: its partition moves on.
	// The consumer consumes it too (it is added to Topics), in the first
	// topic's scope, its attempts counted on from the Idem-Attempt header
	// (so its backoff goes on growing); a copy whose retries in place are
	// spent again goes back to the retry topic. It must not be the first
	// of Topics: other groups of that topic would take its copies for
	// new records.
	// Default: none: records are retried in place until they succeed,
	// unless InPlaceAttempts is set.
	RetryTopic string

	// InPlaceAttempts is how many times a record whose handler failed
	// with a transient error is tried in place (its partition paused, the
	// records behind it waiting) before it goes to RetryTopic, or, with
	// no retry topic, to DeadLetterTopic (which must then be set).
	// Waits for a key held elsewhere do not count.
	// Default: 3 with a RetryTopic; without one, no limit.
	InPlaceAttempts int

	// Fingerprint ties each key to the record's value: a key reused for
	// a different value is given up with idem.ErrFingerprintMismatch.
	// Default: false.
	Fingerprint bool

	// CommitInterval is how often the offsets of the records done are
	// committed. Offsets are committed too when partitions are revoked
	// and when the consumer stops. Default: 1s.
	CommitInterval time.Duration

	// Run, if set, makes each handler call in place of idem.Do (see
	// consume.Runner). Package kafkatx sets it; leave it nil otherwise.
	Run consume.Runner[struct{}]

	// OnVerdict, if set, is called after each attempt at a record with
	// its verdict: for metrics, logs and tests. Keep it quick.
	OnVerdict func(r *Record, v consume.Verdict)

	// Logger receives warnings. Default: slog.Default().
	Logger *slog.Logger
}

// HeaderKey returns a key function that reads the header name (the first
// one of that name).
func HeaderKey(name string) func(*kgo.Record) string {
	return func(r *kgo.Record) string { return header(r, name) }
}

// RecordKey is a key function that returns the record's key.
func RecordKey(r *kgo.Record) string { return string(r.Key) }

func header(r *kgo.Record, name string) string {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}

func defaultScope(topic, group string) string { return topic + "/" + group }

// errClosed is returned by Run on a consumer closed or already run.
var errClosed = errors.New("kafka: the consumer is closed or already running")

func (o *Options) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("kafka: Options.%s: %w", fmt.Sprintf(format, args...), idem.ErrInvalidArgument)
	}
	switch {
	case o.Consumer == nil:
		return bad("Consumer is nil")
	case o.Consumer.Runtime() == nil:
		return bad("Consumer was not built by consume.New (it has no runtime)")
	case o.Group == "":
		return bad("Group is empty")
	case len(o.Topics) == 0:
		return bad("Topics is empty")
	case o.Handler == nil:
		return bad("Handler is nil")
	case o.InPlaceAttempts < 0:
		return bad("InPlaceAttempts is %d; it must not be negative", o.InPlaceAttempts)
	case o.CommitInterval < 0 || o.CommitInterval > store.MaxDuration:
		return bad("CommitInterval is %v; it must be between 0 (the default) and %v", o.CommitInterval, store.MaxDuration)
	case o.InPlaceAttempts > 0 && o.RetryTopic == "" && o.DeadLetterTopic == "":
		return bad("InPlaceAttempts is set without a RetryTopic or a DeadLetterTopic; a record whose attempts are spent would be lost")
	case o.DeadLetterTopic != "" && slices.Contains(o.Topics, o.DeadLetterTopic):
		return bad("DeadLetterTopic %q is among Topics", o.DeadLetterTopic)
	case o.DeadLetterTopic != "" && o.DeadLetterTopic == o.RetryTopic:
		return bad("DeadLetterTopic and RetryTopic are both %q", o.RetryTopic)
	case o.RetryTopic != "" && o.RetryTopic == o.Topics[0]:
		// The copies would go back into the topic itself, where every
		// other group consuming it would see them as new records.
		return bad("RetryTopic %q is the first of Topics, the one it retries for: give it a topic of its own", o.RetryTopic)
	}
	if slices.Contains(o.Topics, "") {
		return bad("Topics holds an empty name")
	}
	return nil
}

func (o *Options) fillDefaults() {
	if o.Key == nil {
		o.Key = HeaderKey(DefaultKeyHeader)
	}
	if o.Scope == nil {
		o.Scope = defaultScope
	}
	if o.RetryTopic != "" && !slices.Contains(o.Topics, o.RetryTopic) {
		o.Topics = append(slices.Clip(o.Topics), o.RetryTopic)
	}
	if o.InPlaceAttempts == 0 && o.RetryTopic != "" {
		o.InPlaceAttempts = DefaultInPlaceAttempts
	}
	if o.CommitInterval == 0 {
		o.CommitInterval = DefaultCommitInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// copyFor returns a copy of r for topic (the retry or dead-letter topic),
// with the Idem-* headers set.
func copyFor(topic string, r *Record, err error) *kgo.Record {
	first := header(r.Record, TopicHeader)
	if first == "" {
		first = r.Topic
	}
	hs := make([]kgo.RecordHeader, 0, len(r.Headers)+5)
	for _, h := range r.Headers {
		switch h.Key {
		case TopicHeader, PartitionHeader, OffsetHeader, AttemptHeader, ErrorHeader:
		default:
			hs = append(hs, h)
		}
	}
	part, off := header(r.Record, PartitionHeader), header(r.Record, OffsetHeader)
	if part == "" {
		part, off = strconv.Itoa(int(r.Partition)), strconv.FormatInt(r.Offset, 10)
	}
	hs = append(hs,
		kgo.RecordHeader{Key: TopicHeader, Value: []byte(first)},
		kgo.RecordHeader{Key: PartitionHeader, Value: []byte(part)},
		kgo.RecordHeader{Key: OffsetHeader, Value: []byte(off)},
		kgo.RecordHeader{Key: AttemptHeader, Value: []byte(strconv.Itoa(r.Attempt))})
	if err != nil {
		hs = append(hs, kgo.RecordHeader{Key: ErrorHeader, Value: errorHeader(err.Error())})
	}
	return &kgo.Record{Topic: topic, Key: r.Record.Key, Value: r.Value, Headers: hs}
}

// errorHeader returns msg, or its first MaxErrorHeader bytes (cut at a
// rune's start) and "..." when it is longer.
func errorHeader(msg string) []byte {
	if len(msg) <= MaxErrorHeader {
		return []byte(msg)
	}
	cut := MaxErrorHeader
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return []byte(msg[:cut] + "...")
}
