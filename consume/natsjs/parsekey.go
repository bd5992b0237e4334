package natsjs

import (
	"strings"

	"github.com/idemrt/idem/consume"
)

// KeyParts are the parts of the idem key of a message, as a consumer with
// the default Options.Scope (the stream and the consumer) builds it.
type KeyParts struct {
	Stream, Consumer string
	// Key is the message's key (its Nats-Msg-Id, or Options.Key's); when
	// Digest is set, the hex SHA-256 that stands for a key too long to be
	// used as it is (see consume.Key).
	Key    string
	Digest bool
}

// ParseKey splits the idem key of a message back into its stream,
// consumer and message key, for tools that list a store's keys (the admin
// command cmd/idem shows consumer records by them). It reports false for a
// key that is not a consumer's, or whose scope is not "<stream>/<consumer>"
// (a custom Options.Scope: read it with consume.ParseKey). consume/kafka's
// default scope, "<topic>/<group>", has the same form: its topic reads as
// Stream and its group as Consumer.
func ParseKey(idemKey string) (KeyParts, bool) {
	p, ok := consume.ParseKey(idemKey)
	if !ok {
		return KeyParts{}, false
	}
	// Stream and consumer names hold no '/': a scope with another count
	// of them (an SQS queue's URL, say) is not a JetStream consumer's.
	stream, consumer, ok := strings.Cut(p.Scope, "/")
	if !ok || stream == "" || consumer == "" || strings.Contains(consumer, "/") {
		return KeyParts{}, false
	}
	return KeyParts{Stream: stream, Consumer: consumer, Key: p.Key, Digest: p.Digest}, true
}
