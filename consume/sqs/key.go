package sqs

import (
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemrt/idem/store"
)

// Attribute returns a key function that reads the value of the message
// attribute name: the string value of a String or Number attribute, or
// the bytes of a Binary one, taken as they are ("" when the message has no
// such attribute, or one with neither). The message's MessageAttributes
// must hold it: receive with MessageAttributeNames naming it (or "All", as
// Run does).
func Attribute(name string) func(types.Message) string {
	return func(m types.Message) string {
		a, ok := m.MessageAttributes[name]
		switch {
		case !ok:
			return ""
		case a.StringValue != nil:
			return *a.StringValue
		}
		return string(a.BinaryValue)
	}
}

// DeduplicationID returns a key of a FIFO queue message's
// MessageDeduplicationId system attribute (the producer's, or the SHA-256
// of the body with content-based deduplication) within its message group:
//
//	<MessageGroupId, ':' and '%' escaped as %3A and %25>:<MessageDeduplicationId>
//
// (the id alone for a message without a group). SQS drops a send with the
// same id within its 5-minute deduplication interval; with this key idem
// runs the message once past that interval too, for as long as its result
// is kept. The group is part of the key because a queue whose
// DeduplicationScope is messageGroup (high throughput FIFO) deduplicates
// within a group only: two groups' messages under one id are two
// messages. A producer's retry of a send keeps its group, so its key is
// the same. "" for a message of a standard queue, or received without
// asking for the attribute (MessageSystemAttributeNames; Run asks for
// all).
func DeduplicationID(m types.Message) string {
	id := m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)]
	group := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
	if id == "" || group == "" {
		return id
	}
	return store.EscapeSegment(group) + ":" + id
}

// MessageID returns the message's id. SQS gives every send a new id, a
// producer's retry of a send too: as a key, the id catches redeliveries
// of one message (a receive after a visibility timeout, a standard queue
// delivering twice), not a message sent twice. Prefer a key the producer
// sets (the default Key's attribute).
func MessageID(m types.Message) string {
	if m.MessageId == nil {
		return ""
	}
	return *m.MessageId
}
