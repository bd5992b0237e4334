package store

import (
	"context"
	"time"
)

// Inspector is implemented by stores that can describe a key without
// claiming it: the runtime's State and Get, and the admin command, use it.
type Inspector interface {
	// Inspect returns the state of key as the store holds it now. An absent
	// key (never claimed, released, forgotten or expired) is State Absent
	// and a nil error; errors are the store's own failures.
	Inspect(ctx context.Context, key string) (Entry, error)
}

// Scanner is implemented by stores that can list their keys, a page at a
// time, without blocking the store: the runtime's Clear and the admin
// command use it.
type Scanner interface {
	// Scan returns up to about limit keys that start with prefix (every key
	// when prefix is ""), from the position cursor names ("" to start), and
	// the cursor of the next page ("" when the scan is over). A key present
	// for the whole scan is returned at least once; it may be returned more
	// than once (the Redis store's SCAN may), and keys created or deleted
	// during the scan may or may not be. limit must be positive.
	Scan(ctx context.Context, prefix, cursor string, limit int) (keys []string, next string, err error)
}

// State is what a store holds for a key.
type State uint8

// The states of a key.
const (
	// Absent: nothing is stored for the key.
	Absent State = iota
	// Held: an owner holds the key; its lease may have ended without
	// anyone taking it over yet (Entry.LeaseLeft is then zero).
	Held
	// Done: the key has a result (a value, or a permanent error when
	// Entry.Record.Failed).
	Done
)

// String returns the state's name.
func (s State) String() string {
	switch s {
	case Absent:
		return "absent"
	case Held:
		return "in-progress"
	case Done:
		return "completed"
	}
	return "unknown"
}

// Entry is the output of [Inspector.Inspect].
type Entry struct {
	State State
	// Token is the holder's token (Held) or the token that completed the
	// key (Done).
	Token Token
	// LeaseLeft is the lease time the holder has left (Held); zero when it
	// has ended.
	LeaseLeft time.Duration
	// Fingerprint is the holder's fingerprint (Held); for Done it is in
	// Record.Fingerprint.
	Fingerprint []byte
	// Record is the stored result (Done).
	Record Record
}
