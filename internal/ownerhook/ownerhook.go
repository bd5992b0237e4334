// Package ownerhook lets packages of this module run a call of the runtime
// whose owner stores its result itself, somewhere the runtime's store cannot
// reach on its own: in a transaction that also holds the function's work
// (package pgtx). Package idem sets its variables when it is initialized;
// nothing outside this module can import it.
package ownerhook

import (
	"errors"
	"time"

	"github.com/idemrt/idem/store"
)

// Completer stores an owner's result in place of the runtime's store.
type Completer interface {
	// Complete stores rec as the result of the key held by tok, for ttl,
	// and returns the record as stored. It is called on the owner's
	// goroutine once its function has returned a result to keep (a value or
	// a permanent error), after the key's shard has stopped renewing the
	// lease. hold is the longest Complete may keep the key's record locked
	// before its outcome is known.
	//
	// Its error says what became of the result: store.ErrLeaseLost when the
	// key was no longer tok's (nothing was stored, and the function's work
	// did not commit); any other error when nothing was stored for another
	// reason (the key is then released, fenced by tok, as after a
	// transient failure, and the caller gets that error); ErrByStore when
	// nothing of rec waits on the Completer (no work of the function's to
	// commit with it): the runtime stores rec through its store then, as
	// for any call, and keeps offering it until the store answers.
	Complete(tok store.Token, rec store.Record, ttl, hold time.Duration) (store.Record, error)
}

// ErrByStore is a Completer's answer that the runtime is to store the
// result itself (see Completer).
var ErrByStore = errors.New("ownerhook: stored by the runtime's store")

// Option returns an idem.CallOption (as any) that has the owner of the call
// store its result with c. Set by package idem.
var Option func(c Completer) any

// StoreOf returns the store of an *idem.Runtime (given as any). Set by
// package idem.
var StoreOf func(rt any) store.Store
