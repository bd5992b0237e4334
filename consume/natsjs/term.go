package natsjs

import (
	"regexp"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// The first server version that honours a Term with a reason
// (TermWithReason): older servers take "+TERM <reason>" for no answer
// they know, leave the message pending and redeliver it after every
// AckWait, for ever under MaxDeliver -1.
const (
	reasonMajor = 2
	reasonMinor = 10
	reasonPatch = 4
)

var semver = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)`)

// TermReasonHonoured reports whether a NATS server of version v (as
// nats.Conn.ConnectedServerVersion reports it: "2.10.4", "2.11.0-RC.1")
// honours a Term with a reason: 2.10.4 and later do, not a pre-release of
// 2.10.4. An empty or unreadable version does not.
func TermReasonHonoured(v string) bool {
	m := semver.FindStringSubmatch(v)
	if m == nil {
		return false
	}
	var n [3]int
	for i := range n {
		x, err := strconv.Atoi(m[i+1])
		if err != nil {
			return false
		}
		n[i] = x
	}
	switch {
	case n[0] != reasonMajor:
		return n[0] > reasonMajor
	case n[1] != reasonMinor:
		return n[1] > reasonMinor
	case n[2] == reasonPatch:
		// A pre-release of 2.10.4 ("2.10.4-RC.1") may predate the
		// change: a plain Term is safe on it.
		return len(v) == len(m[0]) || v[len(m[0])] != '-'
	}
	return n[2] > reasonPatch
}

// ServerConn is what an adapter needs of a NATS connection: the version of
// the server it is connected to, "" while it is not. *nats.Conn has it.
type ServerConn interface {
	ConnectedServerVersion() string
}

// terminate terminates msg in a form the server it came through honours:
// with reason when the connection's server is 2.10.4 or later, a plain
// Term otherwise (no connection given, a server older or unknown, the
// client reconnecting).
func terminate(nc ServerConn, msg jetstream.Msg, reason string) error {
	if nc != nil && TermReasonHonoured(nc.ConnectedServerVersion()) {
		return msg.TermWithReason(reason)
	}
	return msg.Term()
}
