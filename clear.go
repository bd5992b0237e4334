package idem

// Clearing the results of a whole scope: this runtime's cache of the scope
// first, then a scan of the store, a page at a time, each page's keys let
// through by their shards and forgotten in one batch.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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

	// All must be set to clear the zero store.Scope, every key of the
	// store: a Scope built from empty variables is refused otherwise.
	// Default: false.
	All bool

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
	// permanent errors. With a store that does not say whether a forget
	// deleted anything (store.Op), a key that expired or was forgotten
	// between the scan and the delete counts too.
	Deleted int
	// Corrupt is how many keys the store could not read as its records
	// (store.ErrCorrupt: another application's key under a record's name,
	// say), or listed but refused (store.ErrInvalidKey); they are left as
	// they were.
	Corrupt int
	// Skipped is how many keys were in progress (in flight on this
	// runtime, or held in the store by a run), and left as they were.
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
// key is in scope, so that the next call of each key runs again. It first
// drops every result of the scope from this runtime's cache (also those the
// store no longer has: another instance may have forgotten them), then
// scans the store a page at a time and forgets each page's keys in one
// store batch; it never blocks the store as a whole (Redis: SCAN with a
// match on the scope's prefix, never KEYS).
//
// The scope selects keys built by store.BuildKey: with a Namespace and a
// Version, the keys of that version; with a Namespace alone, those of every
// version of it (a Version without a Namespace: that version's keys in the
// empty namespace). The zero Scope selects every key of the store, whatever
// its form (keys not built by BuildKey too): it empties the store of
// results, for every service that shares it, and is refused with an error
// matching [ErrInvalidArgument] unless ClearOptions.All is set (a Scope
// built from empty variables must not wipe the store).
//
// Keys in progress are never broken: a key this runtime has calls of in
// flight (a run, the storing or release of its outcome, or callers waiting
// for another instance) and a key the store has held by a run are skipped,
// counted and listed (ClearResult.Skipped, SkippedKeys); their runs go on
// and their results are kept.
//
// Each page's keys go through their shards, as [Runtime.Forget] does,
// before the store deletes them: a shard drops from the cache each key it
// lets Clear delete, and a call of such a key that comes while the delete
// is under way caches nothing. That call is concurrent with Clear: it may
// get the result being deleted (it read it before the delete) or run again
// (after it). Either way, once Clear returns, also early, this runtime
// replays none of the results it deleted, and the next call of each such
// key runs again.
//
// ctx is checked between pages and while the shards answer: when it ends,
// Clear returns what it did so far with ctx's error (a page whose delete
// was sent counts what the store did). A store failure stops it with a
// [*StoreError], and what it did so far.
//
// With a store that implements [store.Invalidator], each deleted key and,
// when Clear returns, the scope itself are published to every runtime
// that shares the store, which drop them from their caches (see
// [Runtime.Forget]). With any other store, other instances may keep
// replaying a result from their own caches until it is evicted or expires
// there.
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
	if scope == (store.Scope{}) && !opts.All {
		return res, fmt.Errorf("%w: Clear of the zero store.Scope (every key of the store) needs ClearOptions.All", ErrInvalidArgument)
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
	if rt.closed.Load() {
		return res, errClearClosed
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	prefix := scopePrefix(scope)
	// What this runtime caches of the scope goes first: the scan cannot
	// find the keys the store no longer has.
	if err := rt.set.DropCached(ctx, prefix); err != nil {
		return res, clearErr(err)
	}
	// Whatever happens next, the other instances drop the scope from
	// their caches once the deletes done here are over.
	defer rt.invalidatePrefix(ctx, prefix)
	cursor := ""
	for {
		if rt.closed.Load() {
			return res, errClearClosed
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

// invalidatePrefix tells the runtimes that share the store, when it
// implements store.Invalidator, that the keys of prefix were deleted. It
// is sent also when ctx has ended (a Clear stopped part way deleted keys
// too), within StoreTimeout; a failure is logged: the keys deleted were
// published one by one already.
func (rt *Runtime) invalidatePrefix(ctx context.Context, prefix string) {
	iv, ok := rt.store.(store.Invalidator)
	if !ok {
		return
	}
	sctx, cancel := rt.storeContext(context.WithoutCancel(ctx))
	defer cancel()
	if err := iv.InvalidatePrefix(sctx, prefix); err != nil {
		rt.opts.Logger.Warn("idem: Clear could not publish its scope to the other instances; the keys it deleted were published one by one",
			"prefix", prefix, "err", err)
	}
}

var errClearClosed = fmt.Errorf("idem: Clear: %w", ErrClosed)

// clearErr is Clear's error for an error of the shards: closed, or ctx's.
func clearErr(err error) error {
	if errors.Is(err, store.ErrClosed) {
		return errClearClosed
	}
	return err
}

// clearPage scans one page from cursor and forgets its keys, adding to
// res; it returns the cursor of the next page.
//
// The keys go through their shards first (actors.ClearPage): a key in
// flight here is skipped; the others leave the cache and are not cached
// again until the store's answer is in, so no result deleted here comes
// back into the cache. Then one store batch forgets them.
func (rt *Runtime) clearPage(ctx context.Context, sc store.Scanner, prefix, cursor string, opts *ClearOptions, res *ClearResult) (string, error) {
	sctx, cancel := rt.storeContext(ctx)
	keys, next, err := sc.Scan(sctx, prefix, cursor, opts.PageSize)
	cancel()
	if err != nil {
		return "", rt.storeErr(ctx, prefix, "scan", err)
	}
	keys = keysInScope(keys, prefix)
	res.Scanned += len(keys)
	if len(keys) == 0 {
		return next, nil
	}
	ops := make([]*store.Op, len(keys)) // nil for a key in flight here
	err = rt.set.Clear(ctx, keys, func(busy []bool) {
		batch := make([]*store.Op, 0, len(keys))
		for i, key := range keys {
			if !busy[i] {
				// Status Completed: "a result was deleted", unless the store
				// says otherwise (see store.Op).
				ops[i] = &store.Op{Kind: store.OpForget, Key: key, Result: store.ClaimResult{Status: store.Completed}}
				batch = append(batch, ops[i])
			}
		}
		if len(batch) > 0 {
			bctx, cancel := rt.storeContext(ctx)
			store.Run(bctx, rt.store, batch)
			cancel()
		}
	})
	if err != nil {
		return "", clearErr(err)
	}
	return next, rt.countPage(ctx, keys, ops, opts, res)
}

// keysInScope keeps the keys that start with prefix, each once: a store
// that returned a key out of the scope must not have it deleted, and a key
// returned twice in a page is deleted once.
func keysInScope(keys []string, prefix string) []string {
	inScope := make([]string, 0, len(keys))
	seen := make(map[string]bool, len(keys))
	for _, key := range keys {
		if !strings.HasPrefix(key, prefix) || seen[key] {
			continue
		}
		seen[key] = true
		inScope = append(inScope, key)
	}
	return inScope
}

// countPage adds a page's outcome to res: ops[i] is the forget of keys[i],
// nil for a key in flight here. It returns the first store failure.
func (rt *Runtime) countPage(ctx context.Context, keys []string, ops []*store.Op, opts *ClearOptions, res *ClearResult) error {
	var failed error
	for i, op := range ops {
		switch {
		case op == nil || errors.Is(op.Err, store.ErrInProgress):
			res.Skipped++
			if len(res.SkippedKeys) < opts.MaxSkippedKeys && !slices.Contains(res.SkippedKeys, keys[i]) {
				res.SkippedKeys = append(res.SkippedKeys, keys[i])
			}
		case op.Err == nil && op.Result.Status == store.Completed:
			res.Deleted++
		case op.Err == nil, errors.Is(op.Err, store.ErrNotFound):
			// Nothing to delete: gone already, or released.
		case errors.Is(op.Err, store.ErrCorrupt), errors.Is(op.Err, store.ErrInvalidKey):
			// A key the store cannot read as its record, or listed but
			// refuses (stored by an older version under a key longer than
			// the limit): left as it is, and the scan goes on.
			res.Corrupt++
		case failed == nil:
			failed = rt.storeErr(ctx, op.Key, store.OpForget.String(), op.Err)
		}
	}
	return failed
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
