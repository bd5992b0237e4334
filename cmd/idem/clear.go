package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemrt/idem/store"
)

// clearReport is the outcome of clear, as JSON.
type clearReport struct {
	Prefix string `json:"prefix"`
	DryRun bool   `json:"dry_run"`
	// Keys are the keys deleted, or that would be with -dry-run; Deleted
	// counts them.
	Keys    []string `json:"keys"`
	Deleted int      `json:"deleted"`
	// Skipped are the keys in progress, never deleted.
	Skipped []skippedKey `json:"skipped"`
	// NotIdem are Redis keys named like records that are not idem's.
	NotIdem []notIdemKey `json:"not_idem"`
	// Absent counts keys listed but without a record by the time they were
	// read (released, expired or deleted meanwhile).
	Absent int `json:"absent"`
}

type skippedKey struct {
	Key         string `json:"key"`
	Owner       string `json:"owner,omitempty"`
	LeaseLeftMs int64  `json:"lease_left_ms"`
}

type notIdemKey struct {
	Key      string `json:"key"`
	RedisKey string `json:"redis_key"`
	Reason   string `json:"reason"`
}

// cmdClear deletes, through the store's Forget, every completed or failed
// record of the scope; keys in progress are skipped and reported, never
// broken (Forget refuses them, even if claimed after they were read).
func cmdClear(ctx context.Context, c *conn, cfg *config, out *printer) error {
	rep := clearReport{Prefix: cfg.scopePrefix(), DryRun: cfg.dryRun, Keys: []string{}, Skipped: []skippedKey{}, NotIdem: []notIdemKey{}}
	err := c.walk(ctx, rep.Prefix, cfg.page, func(f found) error {
		switch {
		case f.corrupt != nil:
			rep.NotIdem = append(rep.NotIdem, notIdemKey{Key: f.key, RedisKey: f.corrupt.RedisKey, Reason: f.corrupt.Reason})
		case f.entry.State == store.Absent:
			rep.Absent++
		case f.entry.State == store.Held:
			rep.Skipped = append(rep.Skipped, skippedKey{Key: f.key, Owner: f.entry.Token.Owner, LeaseLeftMs: f.entry.LeaseLeft.Milliseconds()})
		case cfg.dryRun:
			rep.Keys = append(rep.Keys, f.key)
		default:
			err := c.store.Forget(ctx, f.key)
			if errors.Is(err, store.ErrInProgress) { // claimed since it was read
				rep.Skipped = append(rep.Skipped, skippedKey{Key: f.key, LeaseLeftMs: -1})
				return nil
			}
			if err != nil {
				return c.failed(err)
			}
			rep.Keys = append(rep.Keys, f.key)
		}
		return nil
	})
	rep.Deleted = len(rep.Keys)
	if err != nil && !cfg.dryRun && rep.Deleted > 0 {
		err = fmt.Errorf("%w (after deleting %d records)", err, rep.Deleted)
	}
	if err != nil {
		return err
	}
	if out.json {
		out.encode(rep)
		return nil
	}
	printClear(out, rep)
	return nil
}

func printClear(out *printer, rep clearReport) {
	verb := "deleted"
	if rep.DryRun {
		verb = "would delete"
	}
	for _, k := range rep.Keys {
		out.printf("%s %s\n", verb, k)
	}
	for _, s := range rep.Skipped {
		if s.LeaseLeftMs < 0 {
			out.printf("skipped %s: claimed again during the clear\n", s.Key)
			continue
		}
		out.printf("skipped %s: in progress (owner %s, lease left %v)\n", s.Key, s.Owner, time.Duration(s.LeaseLeftMs)*time.Millisecond)
	}
	for _, n := range rep.NotIdem {
		out.printf("left %s: Redis key %s is not an idem record: %s\n", n.Key, n.RedisKey, n.Reason)
	}
	scope := fmt.Sprintf("keys starting with %q", rep.Prefix)
	if rep.Prefix == "" {
		scope = "every key of the store prefix"
	}
	out.printf("%s %d records; skipped %d in progress; %d not idem records (%s)\n",
		verb, rep.Deleted, len(rep.Skipped), len(rep.NotIdem), scope)
	if rep.DryRun {
		out.printf("dry run: nothing was deleted; pass -yes instead of -dry-run to delete\n")
	}
}
