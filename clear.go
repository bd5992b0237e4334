package idem

// Clearing the results of a whole scope: a scan of the store, a page at a
// time, each page's records forgotten in one batch.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/idemrt/idem/actors"
	"github.com/idemrt/idem/store"
)

// ClearOptions adjust [Runtime.Clear]. The zero value is valid: every field
// has a documented default, used when it is left zero. Negative values are
// errors.
type ClearOptions struct {
	// PageSize is how many keys one page of the scan asks the store for;
	// each page's records are then deleted in one store batch.
	// Default: 256.
	PageSize int

	// MaxSkippedKeys bounds ClearResult.SkippedKeys; Skipped counts them
	// all.
	// Default: 100.
	MaxSkippedKeys int

	// Progress, when set, is called after each page with the totals so far,
	// on Clear's goroutine (it must not keep the SkippedKeys slice).
	// Default: nil.
	Progress func(ClearResult)
}

// ClearResult counts what [Runtime.Clear] did. A store may return a key on
// two pages (see store.Scanner; Redis's SCAN does while its tables are
// resized): the counts then count it twice.
type ClearResult struct {
	// Scanned is how many keys of the scope the scan returned.
	Scanned int
	// Deleted is how many keys were forgotten: completed results and
	// permanent errors (a key that expired or was forgotten between the
	// scan and the delete counts too).
	Deleted int
	// Skipped is how many keys were in progress, and left as they were.
	Skipped int
	// SkippedKeys are the first of the skipped keys (at most
	// ClearOptions.MaxSkippedKeys), in the order the scan met them, each
	// once.
	SkippedKeys []string
}

const (
	defaultClearPage    = 256
	defaultClearSkipped = 100
)

// Clear deletes every stored result (completed, or a permanent error) whose
// key is in scope, so that the next call of each key runs again. It
// scans the store a page at a time and forgets each page's keys in one
// store batch; it never blocks the store as a whole (Redis: SCAN with a
// match on the scope's prefix, never KEYS).
//
// The scope selects keys built by store.BuildKey: with a Namespace and a
// Version, the keys of that version; with a Namespace alone, those of every
// version of it (a Version without a Namespace: that version's keys in the
// empty namespace). The zero Scope selects every key of the store, whatever
// its form (keys not built by BuildKey too): it empties the store of
// results, for every service that shares it. Use it with care.
//
// Keys in progress are never broken: they are skipped, counted and listed
// (ClearResult.Skipped, SkippedKeys), and their runs go on. ctx is checked
// between pages: when it ends, Clear returns what it did so far with
// ctx's error. A store failure stops it with a [*StoreError], and what it
// did so far.
//
// Clear drops the keys it deletes from this runtime's cache. Other
// instances that share the store may keep replaying a result from their
// own caches until it is evicted or expires there, as after
// [Runtime.Forget]; a call of one of the keys in flight as Clear runs may
// also keep its result.
//
// It needs a store that implements [store.Scanner] (memstore and
// redisstore do); with any other store it returns an error matching
// errors.ErrUnsupported.
func (rt *Runtime) Clear(ctx context.Context, scope store.Scope, opts ClearOptions) (ClearResult, error) {
	var res ClearResult
	if opts.PageSize < 0 || opts.MaxSkippedKeys < 0 {
		return res, fmt.Errorf("%w: ClearOptions: PageSize %d and MaxSkippedKeys %d must not be negative (zero means the default)",
			ErrInvalidArgument, opts.PageSize, opts.MaxSkippedKeys)
	}
	if opts.PageSize == 0 {
		opts.PageSize = defaultClearPage
	}
	if opts.MaxSkippedKeys == 0 {
		opts.MaxSkippedKeys = defaultClearSkipped
	}
	sc, ok := rt.store.(store.Scanner)
	if !ok {
		return res, fmt.Errorf("idem: Clear: the store (%T) does not implement store.Scanner: %w", rt.store, errors.ErrUnsupported)
	}
	prefix := scopePrefix(scope)
	cursor := ""
	for {
		if rt.closed.Load() {
			return res, fmt.Errorf("idem: Clear: %w", ErrClosed)
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		next, err := rt.clearPage(ctx, sc, prefix, cursor, &opts, &res)
		if err != nil {
			return res, err
		}
		if opts.Progress != nil {
			opts.Progress(res)
		}
		if next == "" {
			return res, nil
		}
		cursor = next
	}
}

// clearPage scans one page from cursor and forgets its keys, adding to
// res; it returns the cursor of the next page.
func (rt *Runtime) clearPage(ctx context.Context, sc store.Scanner, prefix, cursor string, opts *ClearOptions, res *ClearResult) (string, error) {
	sctx, cancel := rt.storeContext(ctx)
	keys, next, err := sc.Scan(sctx, prefix, cursor, opts.PageSize)
	cancel()
	if err != nil {
		return "", rt.storeErr(ctx, prefix, "scan", err)
	}
	ops := make([]*store.Op, 0, len(keys))
	seen := make(map[string]bool, len(keys))
	for _, key := range keys {
		// A store that returned a key out of the scope must not have it
		// deleted; a key returned twice in a page is deleted once.
		if len(key) < len(prefix) || key[:len(prefix)] != prefix || seen[key] {
			continue
		}
		seen[key] = true
		ops = append(ops, &store.Op{Kind: store.OpForget, Key: key})
	}
	res.Scanned += len(ops)
	if len(ops) == 0 {
		return next, nil
	}
	bctx, cancel := rt.storeContext(ctx)
	store.Run(bctx, rt.store, ops)
	cancel()
	evict := make(map[*actors.Shard][]string)
	var failed error
	for _, op := range ops {
		switch {
		case op.Err == nil:
			res.Deleted++
			sh := rt.set.For(op.Key)
			evict[sh] = append(evict[sh], op.Key)
		case errors.Is(op.Err, store.ErrInProgress):
			res.Skipped++
			if len(res.SkippedKeys) < opts.MaxSkippedKeys && !slices.Contains(res.SkippedKeys, op.Key) {
				res.SkippedKeys = append(res.SkippedKeys, op.Key)
			}
		case errors.Is(op.Err, store.ErrNotFound):
			// Gone already: nothing to delete.
		case failed == nil:
			failed = rt.storeErr(ctx, op.Key, store.OpForget.String(), op.Err)
		}
	}
	// Deleted keys leave the cache even when others failed.
	for sh, keys := range evict {
		if err := sh.Evict(ctx, keys); err != nil {
			return "", err
		}
	}
	return next, failed
}

// scopePrefix is the prefix of the keys store.BuildKey builds in s: of one
// version, or (without a Version) of every version of the namespace, or
// (the zero Scope) of every key.
func scopePrefix(s store.Scope) string {
	switch {
	case s == store.Scope{}:
		return ""
	case s.Version == "":
		return store.KeyPrefix + store.EscapeSegment(s.Namespace) + ":"
	}
	return store.BuildKey("", s)
}
