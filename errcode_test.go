package idem_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
	"github.com/idemrt/idem/store/redisstore"
)

// Permanent errors that keep their identity in the store: a registered
// sentinel matches errors.Is, a registered type errors.As, on every
// instance; an unregistered error keeps only its message.

var errTestDeclined = errors.New("card declined")

// limitError is a typed permanent error whose field survives the store
// through its message.
type limitError struct{ Limit int }

func (e *limitError) Error() string { return fmt.Sprintf("over the limit of %d", e.Limit) }

func decodeLimit(msg string) *limitError {
	var e limitError
	if _, err := fmt.Sscanf(msg, "over the limit of %d", &e.Limit); err != nil {
		return nil
	}
	return &e
}

// Registered once per test binary: registrations last for the process.
func init() {
	if err := idem.RegisterError("test.card_declined", errTestDeclined); err != nil {
		panic(err)
	}
	if err := idem.RegisterErrorType("test.limit", decodeLimit); err != nil {
		panic(err)
	}
}

func failWith(err error) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return "", err }
}

// checkTyped checks what an instance that did not run the key gets back.
func checkTyped(t *testing.T, who string, declined, limited, plain error) {
	t.Helper()
	var re *idem.ReplayedError
	// The sentinel was wrapped: Detail is its own message, not the whole.
	if !errors.Is(declined, errTestDeclined) || !errors.As(declined, &re) || re.Code != "test.card_declined" ||
		re.Detail != "card declined" || declined.Error() != "charge o-1: card declined" || !idem.IsPermanent(declined) {
		t.Errorf("%s: the declined card: %#v", who, declined)
	}
	var le *limitError
	if !errors.As(limited, &re) || re.Detail != "over the limit of 500" ||
		!errors.As(limited, &le) || le.Limit != 500 || limited.Error() != "charge o-2: over the limit of 500" || !idem.IsPermanent(limited) {
		t.Errorf("%s: the limit: %#v", who, limited)
	}
	if !errors.As(plain, &re) || re.Code != "" || errors.Unwrap(plain) != nil || plain.Error() != "no such card" || !idem.IsPermanent(plain) {
		t.Errorf("%s: the unregistered error: %#v", who, plain)
	}
}

// run stores the three permanent errors through rt.
func storeThree(t *testing.T, rt *idem.Runtime) {
	t.Helper()
	for key, err := range map[string]error{
		"o-1": fmt.Errorf("charge o-1: %w", errTestDeclined),
		"o-2": fmt.Errorf("charge o-2: %w", &limitError{Limit: 500}),
		"o-3": errors.New("no such card"),
	} {
		if _, got := idem.Do(bg, rt, key, failWith(idem.Permanent(err))); got == nil || got.Error() != err.Error() {
			t.Fatalf("%s: %v", key, got)
		}
	}
}

// replayThree returns what Do and Get of rt give for the three keys.
func replayThree(t *testing.T, rt *idem.Runtime) (doErrs, getErrs [3]error) {
	t.Helper()
	for i, key := range []string{"o-1", "o-2", "o-3"} {
		_, doErrs[i] = idem.Do(bg, rt, key, idemtest.MustNotRun(t))
		_, getErrs[i] = idem.Get[string](bg, rt, key)
	}
	return doErrs, getErrs
}

func TestTypedErrorsAcrossInstancesOnRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	instance := func() *idem.Runtime {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { c.Close() })
		s, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: "typed:"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return idemtest.Runtime(t, idem.Options{Store: s})
	}
	a, b := instance(), instance()
	storeThree(t, a)
	doErrs, getErrs := replayThree(t, b)
	checkTyped(t, "Do on the other instance", doErrs[0], doErrs[1], doErrs[2])
	checkTyped(t, "Get on the other instance", getErrs[0], getErrs[1], getErrs[2])
}

// In the owner's process, once the result is no longer cached (here a
// runtime without a cache; a second runtime on the store is the same).
func TestTypedErrorsFromTheStore(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	storeThree(t, idemtest.Runtime(t, idem.Options{Store: mem}))
	doErrs, getErrs := replayThree(t, idemtest.Runtime(t, idem.Options{Store: mem, DisableCache: true}))
	checkTyped(t, "Do from the store", doErrs[0], doErrs[1], doErrs[2])
	checkTyped(t, "Get from the store", getErrs[0], getErrs[1], getErrs[2])
}

// An error made permanent by a classifier keeps its code as one marked
// with Permanent does.
func TestTypedErrorClassified(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	rt := idemtest.Runtime(t, idem.Options{Store: mem, Policy: idem.Policy{Classifier: func(err error) bool { return errors.Is(err, errTestDeclined) }}})
	if _, err := idem.Do(bg, rt, "k", failWith(errTestDeclined)); !errors.Is(err, errTestDeclined) {
		t.Fatal(err)
	}
	other := idemtest.Runtime(t, idem.Options{Store: mem})
	if _, err := idem.Do(bg, other, "k", idemtest.MustNotRun(t)); !errors.Is(err, errTestDeclined) || !idem.IsPermanent(err) {
		t.Fatalf("replayed: %#v", err)
	}
}

// A code this process does not know (registered by another service, or in
// a later version) replays as its message; storing the replayed error
// again keeps its code.
func TestUnknownCode(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	claim, err := mem.Claim(bg, "k", store.ClaimRequest{Owner: "elsewhere", Lease: 60e9, TTL: 60e9})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Complete(bg, "k", claim.Token, store.Record{Failed: true, Error: "[idem:not.here] stolen card"}, 60e9); err != nil {
		t.Fatal(err)
	}
	rt := idemtest.Runtime(t, idem.Options{Store: mem})
	_, err = idem.Get[string](bg, rt, "k")
	var re *idem.ReplayedError
	if !errors.As(err, &re) || re.Message != "stolen card" || re.Code != "not.here" || re.Detail != "stolen card" || re.Unwrap() != nil {
		t.Fatalf("unknown code: %#v", err)
	}
	if _, err := idem.Do(bg, rt, "again", failWith(idem.Permanent(fmt.Errorf("step: %w", err)))); err == nil {
		t.Fatal("no error")
	}
	rec, err := mem.Get(bg, "again")
	if err != nil || rec.Error != `[idem:not.here "stolen card"] step: stolen card` {
		t.Fatalf("stored again as %q, %v", rec.Error, err)
	}
}

// A result the codec cannot encode is the same permanent error on every
// instance: the owner (its cached error) and another instance (its replay
// from the store) both get an error that IsPermanent, and in which
// errors.As finds the *CodecError, key and all.
func TestCodecErrorOnEveryInstance(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	owner := idemtest.Runtime(t, idem.Options{Store: mem})
	other := idemtest.Runtime(t, idem.Options{Store: mem})
	unencodable := func(context.Context) (chan int, error) { return make(chan int), nil }
	for _, key := range []string{"k", store.BuildKey("o:1 \"x\"", store.Scope{Namespace: "shop:eu", Version: "%v"})} {
		_, err1 := idem.Do(bg, owner, key, unencodable)
		_, err2 := idem.Do(bg, other, key, func(context.Context) (chan int, error) {
			t.Error("ran again on the other instance")
			return nil, nil
		})
		for who, err := range map[string]error{"the owner": err1, "another instance": err2} {
			var ce *idem.CodecError
			if !idem.IsPermanent(err) || !errors.As(err, &ce) || ce.Key != key || ce.Op != "encode" || ce.Err == nil || err.Error() != err1.Error() {
				t.Errorf("%s, key %q: %#v; want a permanent error with the *CodecError", who, key, err)
			}
		}
		var re *idem.ReplayedError
		if !errors.As(err2, &re) || re.Code != "idem.codec" {
			t.Errorf("another instance, key %q: %#v, want a *ReplayedError with the code idem.codec", key, err2)
		}
	}
	if err := idem.RegisterErrorType("test.codec", func(string) *idem.CodecError { return nil }); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("registering *CodecError again: %v, want ErrInvalidArgument", err)
	}
}

func TestRegisterErrorRefuses(t *testing.T) {
	for name, err := range map[string]error{
		"empty code":            idem.RegisterError("", errors.New("x")),
		"long code":             idem.RegisterError(string(make([]byte, 65)), errors.New("x")),
		"bad character":         idem.RegisterError("a b", errors.New("x")),
		"a bracket":             idem.RegisterError("a]", errors.New("x")),
		"nil sentinel":          idem.RegisterError("test.nil", nil),
		"taken code":            idem.RegisterError("test.card_declined", errors.New("x")),
		"taken sentinel":        idem.RegisterError("test.again", errTestDeclined),
		"taken type":            idem.RegisterErrorType("test.again", decodeLimit),
		"taken code (type)":     idem.RegisterErrorType("test.limit", func(string) *idem.ConflictError { return nil }),
		"interface type":        idem.RegisterErrorType("test.iface", func(string) error { return nil }),
		"nil decode":            idem.RegisterErrorType[*idem.StoreError]("test.nildecode", nil),
		"uncomparable sentinel": idem.RegisterError("test.slice", sliceErr{}),
	} {
		if !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

type sliceErr []string

func (sliceErr) Error() string { return "slice" }

func TestNewReplayedError(t *testing.T) {
	if idem.NewReplayedError("k", nil) != nil {
		t.Fatal("nil error: not nil")
	}
	re := idem.NewReplayedError("k", fmt.Errorf("a: %w", &limitError{Limit: 3}))
	var le *limitError
	if re.Key != "k" || re.Message != "a: over the limit of 3" || re.Code != "test.limit" ||
		re.Detail != "over the limit of 3" || !errors.As(re, &le) || le.Limit != 3 {
		t.Fatalf("%#v", re)
	}
	// Built again from its fields, as a front end that stored them does.
	again := &idem.ReplayedError{Key: "k", Message: re.Message, Code: re.Code, Detail: re.Detail}
	if !errors.As(again, &le) || le.Limit != 3 {
		t.Fatalf("rebuilt: %#v", again)
	}
}
