package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/idemrt/idem/internal/keytext"
	"github.com/idemrt/idem/store"
)

// keyReport is what get, state and forget tell about a key, as JSON.
type keyReport struct {
	Key      string `json:"key"`
	RedisKey string `json:"redis_key,omitempty"` // Redis only
	// KeyBase64 and RedisKeyBase64 are Key and RedisKey in base64 when
	// they are not valid UTF-8 (a JSON string would replace their bad
	// bytes, and name no record).
	KeyBase64      string `json:"key_base64,omitempty"`
	RedisKeyBase64 string `json:"redis_key_base64,omitempty"`
	// State is absent, in-progress, completed or failed.
	State       string `json:"state"`
	Owner       string `json:"owner,omitempty"`
	Fence       uint64 `json:"fence,omitempty"`
	LeaseLeftMs *int64 `json:"lease_left_ms,omitempty"`
	// LeaseEndsAt is when a lease that has not ended ends; nil once it
	// has (the store does not say when it did).
	LeaseEndsAt *time.Time `json:"lease_ends_at,omitempty"`
	Fingerprint string     `json:"fingerprint,omitempty"` // hex
	CreatedAt   *time.Time `json:"created_at,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	TTLLeftMs   *int64     `json:"ttl_left_ms,omitempty"`
	ValueBytes  *int       `json:"value_bytes,omitempty"`
	// Value is the value as text when it is printable UTF-8, else
	// ValueBase64 holds it (get only).
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
	// HTTP is the value when it is an HTTP response stored by httpidem
	// (get only): Value and ValueBase64 are then left out.
	HTTP *httpReport `json:"http,omitempty"`
	// Consumer names the stream and consumer (or the scope) of a key a
	// consume front end built.
	Consumer *consumerReport `json:"consumer,omitempty"`
	// Error is the stored permanent error's message (failed), ErrorCode
	// the code its kind was registered under (idem.RegisterError), and
	// ErrorDetail the registered error's own message when it was wrapped
	// in another: the stored text's "[idem:<code> ...]" mark is read, not
	// shown (see errtext.go).
	Error       string `json:"error,omitempty"`
	ErrorCode   string `json:"error_code,omitempty"`
	ErrorDetail string `json:"error_detail,omitempty"`
	Forgotten   bool   `json:"forgotten,omitempty"`
	// DryRun marks forget -dry-run's report: the key would be forgotten.
	DryRun bool `json:"dry_run,omitempty"`
}

// resolve turns a KEY argument into the key the store holds.
func (c *conn) resolve(cfg *config, arg string) (string, error) {
	key := arg
	switch {
	case cfg.redisKey:
		k, ok := c.redis.KeyOf(arg)
		if !ok {
			return "", &exitError{exitNoRecord, fmt.Sprintf(
				"Redis key %s is not an idem record: idem's records are named %s (see -store-prefix)", keytext.Quote(arg), c.redis.RecordKey("<key>"))}
		}
		key = k
	case cfg.scoped:
		key = store.BuildKey(arg, store.Scope{Namespace: cfg.namespace, Version: cfg.version})
	}
	if err := store.ValidateKey(key); err != nil {
		return "", usagef("%s", unprefixed(err))
	}
	return key, nil
}

// inspect reads a key's entry; a Redis key that is not an idem record is
// exit code 3.
func (c *conn) inspect(ctx context.Context, key string) (store.Entry, error) {
	e, err := c.store.Inspect(ctx, key)
	switch ce := asCorrupt(err); {
	case ce != nil:
		return e, &exitError{exitNoRecord, fmt.Sprintf("%s (key %s) is not an idem record: %s", recordText(ce.RedisKey), keytext.Quote(key), ce.Reason)}
	case err != nil:
		return e, c.failed(err)
	}
	return e, nil
}

// lookup resolves and inspects a KEY argument.
func (c *conn) lookup(ctx context.Context, cfg *config) (keyReport, store.Entry, error) {
	key, err := c.resolve(cfg, cfg.args[0])
	if err != nil {
		return keyReport{}, store.Entry{}, err
	}
	e, err := c.inspect(ctx, key)
	if err != nil {
		return keyReport{}, e, err
	}
	return newKeyReport(key, c.recordName(key), e, time.Now()), e, nil
}

func newKeyReport(key, redisKey string, e store.Entry, now time.Time) keyReport {
	r := keyReport{Key: key, RedisKey: redisKey, State: stateName(e),
		KeyBase64: base64IfNotUTF8(key), RedisKeyBase64: base64IfNotUTF8(redisKey), Consumer: asConsumer(key)}
	switch e.State {
	case store.Held:
		left := e.LeaseLeft.Milliseconds()
		r.Owner, r.Fence, r.LeaseLeftMs = e.Token.Owner, e.Token.Fence, &left
		if e.LeaseLeft > 0 {
			// Under a millisecond left is not an ended lease.
			left = max(left, 1)
			ends := now.Add(e.LeaseLeft).UTC()
			r.LeaseEndsAt = &ends
		} // else: the store says it ended, not when
		r.Fingerprint = hex.EncodeToString(e.Fingerprint)
	case store.Done:
		rec := e.Record
		created, expires := rec.CreatedAt.UTC(), rec.ExpiresAt.UTC()
		ttl := max(rec.ExpiresAt.Sub(now), 0).Milliseconds()
		r.Owner, r.Fence, r.CreatedAt, r.ExpiresAt, r.TTLLeftMs = rec.Token.Owner, rec.Token.Fence, &created, &expires, &ttl
		r.Fingerprint = hex.EncodeToString(rec.Fingerprint)
		if rec.Failed {
			se := parseStoredError(rec.Error)
			r.Error, r.ErrorCode, r.ErrorDetail = se.Message, se.Code, se.Detail
		} else {
			n := len(rec.Value)
			r.ValueBytes = &n
		}
	}
	return r
}

// stateName names an entry's state: absent, in-progress, completed or
// failed (a permanent error).
func stateName(e store.Entry) string {
	if e.State == store.Done && e.Record.Failed {
		return "failed"
	}
	return e.State.String()
}

func noRecord(r keyReport) error {
	return &exitError{exitNoRecord, fmt.Sprintf(
		"no idem record for key %s%s: never stored, expired, forgotten or released; "+
			"if the service scopes its keys, pass -namespace and -version", keytext.Quote(r.Key), redisKeyNote(r.RedisKey))}
}

// redisKeyNote names a record's Redis key in a message, if it has one.
func redisKeyNote(name string) string {
	if name == "" {
		return ""
	}
	return " (Redis key " + name + ")"
}

func inProgress(r keyReport, what string) error {
	return &exitError{exitInProgress, fmt.Sprintf("key %s is in progress (owner %s, lease left %v): %s",
		keytext.Quote(r.Key), shown(r.Owner), time.Duration(*r.LeaseLeftMs)*time.Millisecond, what)}
}

// cmdGet prints the stored result of a key: its value, or its permanent
// error.
func cmdGet(ctx context.Context, c *conn, cfg *config, out *printer) error {
	r, e, err := c.lookup(ctx, cfg)
	if err != nil {
		return err
	}
	if e.State == store.Done && !e.Record.Failed {
		v := e.Record.Value
		r.HTTP = asHTTP(v, cfg.full)
		switch {
		case r.HTTP != nil:
		case printable(v):
			s := string(v)
			r.Value = &s
		default:
			s := base64.StdEncoding.EncodeToString(v)
			r.ValueBase64 = &s
		}
	}
	if out.json {
		out.encode(r)
	}
	switch {
	case e.State == store.Absent:
		return noRecord(r)
	case e.State == store.Held:
		return inProgress(r, "no result yet")
	case out.json:
	case r.State == "failed":
		out.printf("permanent error: %s\n", shown(r.Error))
		if r.ErrorCode != "" {
			out.printf("error code: %s\n", shown(r.ErrorCode))
		}
		if r.ErrorDetail != "" {
			out.printf("error detail: %s\n", shown(r.ErrorDetail))
		}
	case r.HTTP != nil:
		printHTTP(out, r.HTTP)
	case r.Value != nil:
		out.printf("%s\n", *r.Value)
	default:
		out.printf("%s\n", *r.ValueBase64)
		out.notef("the value (%s) is not printable UTF-8: shown as base64", bytesText(*r.ValueBytes))
	}
	return nil
}

// cmdState prints a key's state, without its value.
func cmdState(ctx context.Context, c *conn, cfg *config, out *printer) error {
	r, _, err := c.lookup(ctx, cfg)
	if err != nil {
		return err
	}
	if out.json {
		out.encode(r)
		return nil
	}
	printKey(out, r)
	return nil
}

func printKey(out *printer, r keyReport) {
	out.field("key", "%s", shown(r.Key))
	if r.RedisKey != "" {
		out.field("redis key", "%s", shown(r.RedisKey))
	}
	if r.Consumer != nil {
		out.field("consumer", "%s", shown(consumerText(r.Consumer)))
	}
	out.field("state", "%s", r.State)
	if r.State == "absent" {
		return
	}
	out.field("owner", "%s", shown(r.Owner))
	out.field("fence", "%d", r.Fence)
	if r.LeaseLeftMs != nil {
		if r.LeaseEndsAt == nil {
			out.field("lease left", "0s (ended): the next claim takes the key over")
		} else {
			out.field("lease left", "%v (ends %s)", time.Duration(*r.LeaseLeftMs)*time.Millisecond, stamp(*r.LeaseEndsAt))
		}
	}
	if r.CreatedAt != nil {
		out.field("created", "%s", stamp(*r.CreatedAt))
		out.field("expires", "%s (in %v)", stamp(*r.ExpiresAt), roundDuration(time.Duration(*r.TTLLeftMs)*time.Millisecond))
	}
	if r.ValueBytes != nil {
		out.field("value", "%s", bytesText(*r.ValueBytes))
	}
	if r.State == "failed" {
		out.field("error", "%s", shown(r.Error))
		if r.ErrorCode != "" {
			out.field("error code", "%s", shown(r.ErrorCode))
		}
		if r.ErrorDetail != "" {
			out.field("error detail", "%s", shown(r.ErrorDetail))
		}
	}
	fp := r.Fingerprint
	if fp == "" {
		fp = "(none)"
	}
	out.field("fingerprint", "%s", fp)
}

// cmdForget deletes a key's result. A key in progress is refused (by the
// store itself, if it was claimed after the check). With -dry-run it says
// what it would do, and deletes nothing: the exit code is the same.
func cmdForget(ctx context.Context, c *conn, cfg *config, out *printer) error {
	r, e, err := c.lookup(ctx, cfg)
	if err != nil {
		return err
	}
	switch e.State {
	case store.Absent:
		return noRecord(r)
	case store.Held:
		return inProgress(r, "not forgotten (forget it once it settles)")
	}
	if cfg.dryRun {
		r.DryRun = true
		if out.json {
			out.encode(r)
		} else {
			out.printf("would forget %s (%s); pass no -dry-run to forget it\n", shown(r.Key), r.State)
		}
		return nil
	}
	err = c.store.Forget(ctx, r.Key)
	if errors.Is(err, store.ErrInProgress) {
		return &exitError{exitInProgress, fmt.Sprintf("key %s was claimed again meanwhile: not forgotten", keytext.Quote(r.Key))}
	}
	if err != nil {
		return c.failed(err)
	}
	r.Forgotten = true
	if out.json {
		out.encode(r)
	} else {
		out.printf("forgot %s (%s)\n", shown(r.Key), r.State)
	}
	return nil
}

// base64IfNotUTF8 returns s in base64 when it is not valid UTF-8, else "".
func base64IfNotUTF8(s string) string {
	if utf8.ValidString(s) {
		return ""
	}
	return base64.StdEncoding.EncodeToString([]byte(s))
}

// shown is a key (or other text from outside) as a human report writes
// it: as it is when it is printable on one line, else Go-quoted, so that
// no escape sequence or newline of it reaches the terminal.
func shown(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return s
	}
	return strconv.Quote(s)
}

// printable reports whether v is UTF-8 text without control characters
// other than newlines and tabs.
func printable(v []byte) bool {
	if !utf8.Valid(v) {
		return false
	}
	for _, r := range string(v) {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// roundDuration keeps a duration readable: milliseconds under a minute,
// seconds above.
func roundDuration(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}

// bytesText writes a size in B, KiB or MiB.
func bytesText(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1024*1024))
}
