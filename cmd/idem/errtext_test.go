package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	idemrt "github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

var errDeclined = errors.New("card declined")

// limitError is a registered error type whose message its decoder reads.
type limitError struct{ Limit int }

func (e *limitError) Error() string { return fmt.Sprintf("over the limit of %d", e.Limit) }

var registerOnce sync.Once

// registerErrors registers the test's error kinds, once per test binary.
func registerErrors(t testing.TB) {
	registerOnce.Do(func() {
		if err := idemrt.RegisterError("cmd-test.declined", errDeclined); err != nil {
			t.Fatal(err)
		}
		err := idemrt.RegisterErrorType("cmd-test/limit", func(msg string) *limitError {
			var n int
			if _, err := fmt.Sscanf(msg, "over the limit of %d", &n); err != nil {
				return nil
			}
			return &limitError{Limit: n}
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// permanentErrors are errors of each form the runtime stores: a registered
// sentinel, alone and wrapped; a registered type, wrapped; an error of no
// registered kind, plain, starting with the code mark, or holding quotes
// and brackets.
func permanentErrors() []error {
	return []error{
		errDeclined,
		fmt.Errorf("charge order-1: %w", errDeclined),
		fmt.Errorf("payment: %w", &limitError{Limit: 500}),
		&limitError{Limit: 7},
		errors.New("address not found"),
		errors.New("[idem:x] looks coded"),
		errors.New("[idem:] looks coded too"),
		errors.New(`quote " and ] bracket`),
		errors.New(""),
	}
}

// runtimeState is what package idem reads from a stored error text: the
// message and code of Runtime.State, and the detail of the *ReplayedError
// that idem.Get returns.
func runtimeState(t *testing.T, rt *idemrt.Runtime, key string) (msg, code, detail string) {
	t.Helper()
	st, err := rt.State(bg, key)
	if err != nil || st.Status != idemrt.KeyFailed {
		t.Fatalf("State(%q) = %+v, %v; want failed", key, st, err)
	}
	_, err = idemrt.Get[string](bg, rt, key)
	var re *idemrt.ReplayedError
	if !errors.As(err, &re) {
		t.Fatalf("Get(%q) = %v, want a *ReplayedError", key, err)
	}
	if re.Message != st.Error || re.Code != st.ErrorCode {
		t.Fatalf("Get(%q) = %+v, but State says %q, %q", key, re, st.Error, st.ErrorCode)
	}
	return st.Error, st.ErrorCode, re.Detail
}

// checkParse fails the test unless parseStoredError reads text as package
// idem does (its detail is given only when it differs from the message).
func checkParse(t *testing.T, text, msg, code, detail string) {
	t.Helper()
	if detail == msg {
		detail = ""
	}
	if got, want := parseStoredError(text), (storedError{Message: msg, Code: code, Detail: detail}); got != want {
		t.Errorf("parseStoredError(%q) = %+v; package idem reads %+v", text, got, want)
	}
}

// The command reads a stored error text as the runtime does: for each form
// of error the runtime stores, and for texts the runtime did not write,
// malformed marks among them, its message, code and detail are those of
// Runtime.State and the *ReplayedError of idem.Get on the same record.
func TestStoredErrorAsTheRuntimeReadsIt(t *testing.T) {
	registerErrors(t)
	mem := memstore.New(memstore.Options{})
	rt := idemtest.Runtime(t, idemrt.Options{Store: mem, DisableCache: true})
	for i, perr := range permanentErrors() {
		key := fmt.Sprint("written-", i)
		_, err := idemrt.Do(bg, rt, key, func(context.Context) (string, error) { return "", idemrt.Permanent(perr) })
		if err == nil {
			t.Fatalf("%q: Do succeeded", perr)
		}
		rec, err := mem.Get(bg, key)
		if err != nil || !rec.Failed {
			t.Fatalf("%q: stored %+v, %v", perr, rec, err)
		}
		msg, code, detail := runtimeState(t, rt, key)
		checkParse(t, rec.Error, msg, code, detail)
		if want := idemrt.NewReplayedError(key, perr); msg != want.Message || code != want.Code {
			t.Errorf("%q: read as %q, code %q; want %+v", perr, msg, code, want)
		}
	}
	for i, text := range storedTexts {
		key := fmt.Sprint("text-", i)
		storeFailed(t, mem, key, text)
		msg, code, detail := runtimeState(t, rt, key)
		checkParse(t, text, msg, code, detail)
	}
}

// storedTexts are stored error texts, well formed or not.
var storedTexts = []string{
	"plain", "", "[idem:", "[idem:]", "[idem:] ", "[idem:]  x", "[idem:a] b", "[idem:a]b",
	"[idem:a b] c", `[idem:a "b"] c`, `[idem:a "b] c`, `[idem:a "b"]c`, `[idem: "b"] c`,
	`[idem:a "\u00e9\n"] c`, `[idem:a "x" ] c`, "[idem:a!] b", "[idem:" + strings.Repeat("a", 65) + "] b",
	"[idem:" + strings.Repeat("a", 64) + "] b", "[IDEM:a] b", " [idem:a] b", "[idem:a] [idem:b] c",
	"[idem:a `b`] c", "[idem:a/b.c_d-e] f", "[idem:a \"b\\\"\"] c",
}

// storeFailed stores text as key's permanent error in mem.
func storeFailed(t testing.TB, mem *memstore.Store, key, text string) {
	t.Helper()
	res, err := mem.Claim(bg, key, store.ClaimRequest{Owner: "w", Lease: time.Minute, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Complete(bg, key, res.Token, store.Record{Failed: true, Error: text}, time.Hour); err != nil {
		t.Fatal(err)
	}
}

// FuzzStoredError: for any stored text, the command reads the message,
// code and detail that the runtime reads.
func FuzzStoredError(f *testing.F) {
	for _, s := range storedTexts {
		f.Add(s)
	}
	for _, e := range permanentErrors() {
		f.Add(e.Error())
		f.Add(codeMark + "c " + strconv.Quote(e.Error()) + "] wrapped: " + e.Error())
	}
	mem := memstore.New(memstore.Options{})
	rt, err := idemrt.New(idemrt.Options{Store: mem, DisableCache: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { rt.Close(bg) })
	n := 0
	f.Fuzz(func(t *testing.T, text string) {
		n++
		key := fmt.Sprint("fuzz-", n)
		storeFailed(t, mem, key, text)
		msg, code, detail := runtimeState(t, rt, key)
		checkParse(t, text, msg, code, detail)
		if err := mem.Forget(bg, key); err != nil {
			t.Fatal(err)
		}
	})
}

// get and state show a stored permanent error's message and its code
// apart, as the runtime reads them, never the stored "[idem:<code>]" mark;
// -json has them as error, error_code and error_detail.
func TestPermanentErrorShown(t *testing.T) {
	registerErrors(t)
	f := single(t)
	rt := idemtest.Runtime(t, idemrt.Options{Store: f.s, DisableCache: true})
	run := func(key string, perr error) {
		t.Helper()
		if _, err := idemrt.Do(bg, rt, key, func(context.Context) (string, error) { return "", idemrt.Permanent(perr) }); err == nil {
			t.Fatal("Do succeeded")
		}
	}
	run("declined", fmt.Errorf("charge order-1: %w", errDeclined))
	run("limit", fmt.Errorf("payment: %w", &limitError{Limit: 500}))
	run("plain", errors.New("[idem:x] looks coded"))

	r := f.idem("get", "declined").want(t, exitOK)
	// The sentinel was wrapped: its own message is the detail.
	if want := "permanent error: charge order-1: card declined\nerror code: cmd-test.declined\nerror detail: card declined\n"; r.out != want {
		t.Errorf("get of a coded error: %q, want %q", r.out, want)
	}
	r = f.idem("state", "limit").want(t, exitOK)
	for _, want := range []string{"\nerror        payment: over the limit of 500\n", "\nerror code   cmd-test/limit\n",
		"\nerror detail over the limit of 500\n"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("state of a coded error lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, codeMark) {
		t.Errorf("state of a coded error:\n%s", r.out)
	}
	for _, key := range []string{"declined", "limit", "plain"} {
		msg, code, detail := runtimeState(t, rt, key)
		if detail == msg {
			detail = ""
		}
		for _, cmd := range []string{"get", "state"} {
			var rep keyReport
			f.idem("-json", cmd, key).want(t, exitOK).decode(t, &rep)
			if rep.State != "failed" || rep.Error != msg || rep.ErrorCode != code || rep.ErrorDetail != detail {
				t.Errorf("%s -json %s: error %q, code %q, detail %q; the runtime reads %q, %q, %q",
					cmd, key, rep.Error, rep.ErrorCode, rep.ErrorDetail, msg, code, detail)
			}
		}
	}
	if r := f.idem("get", "plain").want(t, exitOK); r.out != "permanent error: [idem:x] looks coded\n" {
		t.Errorf("get of an uncoded error that starts with the mark: %q", r.out)
	}
	// An empty message is still a permanent error (it used to reach the
	// value branch, which has no value to print).
	f.done("empty", store.Record{Failed: true}, time.Hour)
	if r := f.idem("get", "empty").want(t, exitOK); r.out != "permanent error: \n" {
		t.Errorf("get of an empty permanent error: %q", r.out)
	}
}
