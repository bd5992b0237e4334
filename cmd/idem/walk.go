package main

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/idemrt/idem/store"
)

// inspectors bounds the Inspect calls in flight during a walk.
const inspectors = 8

// found is one key of a walk: its entry, or why it is not an idem record.
type found struct {
	key     string
	entry   store.Entry
	corrupt *corruptRecord
}

// walk scans the keys that start with prefix, page by page, inspects each
// (a few at a time) and calls fn with each key once, in the scan's order.
// It stops at the first error of Redis or of fn.
func (c *conn) walk(ctx context.Context, prefix string, page int, fn func(found) error) error {
	seen := make(map[string]struct{})
	cursor := ""
	for {
		keys, next, err := c.store.Scan(ctx, prefix, cursor, page)
		if err != nil {
			return c.failed(err)
		}
		fresh := keys[:0]
		for _, k := range keys {
			if _, dup := seen[k]; !dup { // SCAN may return a key twice
				seen[k] = struct{}{}
				fresh = append(fresh, k)
			}
		}
		res, err := c.inspectAll(ctx, fresh)
		if err != nil {
			return err
		}
		for _, f := range res {
			if err := fn(f); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}

// inspectAll inspects keys, inspectors at a time.
func (c *conn) inspectAll(ctx context.Context, keys []string) ([]found, error) {
	res := make([]found, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(inspectors)
	for i, k := range keys {
		g.Go(func() error {
			e, err := c.store.Inspect(gctx, k)
			res[i] = found{key: k, entry: e, corrupt: asCorrupt(err)}
			switch {
			case res[i].corrupt != nil:
			case errors.Is(err, store.ErrInvalidKey) && len(k) > store.MaxKeyLen:
				// Listed, but longer than any store reads: a scoped Redis
				// store of an older version wrote it. Left alone, and the
				// walk goes on.
				res[i].corrupt = &corruptRecord{RedisKey: c.recordName(k), Reason: fmt.Sprintf(
					"its key is %d bytes, over the %d-byte limit (an older version stored it with a scope): Runtime.Clear deletes it, or it expires",
					len(k), store.MaxKeyLen)}
			case err != nil:
				return c.failed(err)
			}
			return nil
		})
	}
	return res, g.Wait()
}
