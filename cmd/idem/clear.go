package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemrt/idem/internal/keytext"
	"github.com/idemrt/idem/store"
)

// clearReport is the outcome of clear, as JSON.
type clearReport struct {
	Prefix string `json:"prefix"`
	DryRun bool   `json:"dry_run"`
	// Keys are the keys deleted, or that would be with -dry-run, and
	// KeysBase64 those of them that are not valid UTF-8, in base64 (a
	// JSON string would replace their bad bytes); Deleted counts both.
	Keys       []string `json:"keys"`
	KeysBase64 []string `json:"keys_base64,omitempty"`
	Deleted    int      `json:"deleted"`
	// Skipped are the keys in progress, never deleted.
	Skipped []skippedKey `json:"skipped"`
	// NotIdem are Redis keys named like records that are not idem's.
	NotIdem []notIdemKey `json:"not_idem"`
	// Absent counts keys listed but without a record by the time they were
	// read (released, expired or deleted meanwhile).
	Absent int `json:"absent"`
	// Error, when set, is why the clear stopped before the end of the
	// scope: the report is what it did until then.
	Error string `json:"error,omitempty"`
}

// skippedKey is a key in progress. KeyBase64 is Key in base64 when it is
// not valid UTF-8.
type skippedKey struct {
	Key         string `json:"key"`
	KeyBase64   string `json:"key_base64,omitempty"`
	Owner       string `json:"owner,omitempty"`
	LeaseLeftMs int64  `json:"lease_left_ms"`
}

// notIdemKey is a Redis key named like a record that is not one. The
// base64 fields hold the keys that are not valid UTF-8.
type notIdemKey struct {
	Key            string `json:"key"`
	KeyBase64      string `json:"key_base64,omitempty"`
	RedisKey       string `json:"redis_key"`
	RedisKeyBase64 string `json:"redis_key_base64,omitempty"`
	Reason         string `json:"reason"`
}

// add lists key as deleted (or to be, with -dry-run).
func (rep *clearReport) add(key string) {
	if b := base64IfNotUTF8(key); b != "" {
		rep.KeysBase64 = append(rep.KeysBase64, b)
	} else {
		rep.Keys = append(rep.Keys, key)
	}
	rep.Deleted++
}

// cmdClear deletes, through the store's Forget, every completed or failed
// record of the scope; keys in progress are skipped and reported, never
// broken (Forget refuses them, even if claimed after they were read). When
// it fails part way it still prints what it did until then, marked as
// stopped, and returns the error.
func cmdClear(ctx context.Context, c *conn, cfg *config, out *printer) error {
	rep := clearReport{Prefix: cfg.scopePrefix(), DryRun: cfg.dryRun, Keys: []string{}, Skipped: []skippedKey{}, NotIdem: []notIdemKey{}}
	err := c.walk(ctx, rep.Prefix, cfg.page, func(f found) error {
		switch {
		case f.corrupt != nil:
			rep.NotIdem = append(rep.NotIdem, notIdemKey{Key: f.key, KeyBase64: base64IfNotUTF8(f.key),
				RedisKey: f.corrupt.RedisKey, RedisKeyBase64: base64IfNotUTF8(f.corrupt.RedisKey), Reason: f.corrupt.Reason})
		case f.entry.State == store.Absent:
			rep.Absent++
		case f.entry.State == store.Held:
			rep.Skipped = append(rep.Skipped, skippedKey{Key: f.key, KeyBase64: base64IfNotUTF8(f.key),
				Owner: f.entry.Token.Owner, LeaseLeftMs: f.entry.LeaseLeft.Milliseconds()})
		case cfg.dryRun:
			rep.add(f.key)
		default:
			err := c.store.Forget(ctx, f.key)
			if errors.Is(err, store.ErrInProgress) { // claimed since it was read
				rep.Skipped = append(rep.Skipped, skippedKey{Key: f.key, KeyBase64: base64IfNotUTF8(f.key), LeaseLeftMs: -1})
				return nil
			}
			if err != nil {
				return c.failed(fmt.Errorf("forget %s: %w", keytext.Quote(f.key), err))
			}
			rep.add(f.key)
		}
		return nil
	})
	// Each Forget announced its key to the runtimes sharing the store; the
	// scope goes too, for the results they cached of keys already gone
	// from the store. (any: whatever type the store has here.)
	if iv, ok := any(c.store).(store.Invalidator); ok && !cfg.dryRun && rep.Deleted > 0 {
		if perr := iv.InvalidatePrefix(ctx, rep.Prefix); perr != nil && err == nil {
			err = c.failed(fmt.Errorf("publish the cleared scope: %w", perr))
		}
	}
	if err != nil && !cfg.dryRun && rep.Deleted > 0 {
		err = fmt.Errorf("%w (after deleting %d records)", err, rep.Deleted)
	}
	if err != nil {
		rep.Error = err.Error()
	}
	if out.json {
		out.encode(rep)
	} else {
		printClear(out, rep)
	}
	return err
}

func printClear(out *printer, rep clearReport) {
	verb := "deleted"
	if rep.DryRun {
		verb = "would delete"
	}
	for _, k := range rep.Keys {
		out.printf("%s %s\n", verb, shown(k))
	}
	for _, k := range rep.KeysBase64 {
		out.printf("%s %s (base64: the key is not UTF-8)\n", verb, k)
	}
	for _, s := range rep.Skipped {
		if s.LeaseLeftMs < 0 {
			out.printf("skipped %s: claimed again during the clear\n", shown(s.Key))
			continue
		}
		out.printf("skipped %s: in progress (owner %s, lease left %v)\n", shown(s.Key), shown(s.Owner), time.Duration(s.LeaseLeftMs)*time.Millisecond)
	}
	for _, n := range rep.NotIdem {
		out.printf("left %s: %s is not an idem record: %s\n", shown(n.Key), recordText(shown(n.RedisKey)), n.Reason)
	}
	scope := fmt.Sprintf("keys starting with %q", rep.Prefix)
	if rep.Prefix == "" {
		scope = "every key of the store prefix"
	}
	out.printf("%s %d records; skipped %d in progress; %d not idem records (%s)\n",
		verb, rep.Deleted, len(rep.Skipped), len(rep.NotIdem), scope)
	if rep.Error != "" {
		out.printf("stopped by an error before the end of the scope: the counts above are partial\n")
		return
	}
	if rep.DryRun {
		out.printf("dry run: nothing was deleted; pass -yes instead of -dry-run to delete\n")
	}
}
