package pgstore

import (
	"fmt"
	"time"

	"github.com/idemrt/idem/store"
)

// Options configures a Store. The zero value is valid.
type Options struct {
	// Schema holds the table, created by Migrate if missing. Any name
	// is quoted, so it keeps its case and may hold any character but NUL.
	// Default: none, the table name alone, resolved by the connection's
	// search_path.
	Schema string
	// Table is the table's name, quoted as Schema is. It must be at most
	// 52 bytes, so that the name of its index (the table's name and
	// "_expires_at") fits PostgreSQL's 63-byte limit.
	// Default: "idem".
	Table string
	// Timeout bounds each batch (one round trip, and the repeats of its
	// lost replies) when the caller's context has no earlier deadline,
	// and New's first contact with the server.
	// Default: 0, the caller's context alone (New: 10s).
	Timeout time.Duration
	// CleanupInterval is how often the background loop deletes the rows
	// that have ended. Default: one minute.
	CleanupInterval time.Duration
	// CleanupBatch is how many rows one DELETE of a cleanup removes at
	// most. Default: 1000.
	CleanupBatch int
	// LockTimeout bounds how long one of the store's statements waits for
	// a key's row that another transaction holds: chiefly a completion
	// made inside the caller's own transaction (package pgtx), which
	// holds the row from its completion statement to its COMMIT. Past it,
	// a claim of that key answers that the key is in progress (its waiters
	// claim it again LockTimeout later: the claim could not list them for
	// the commit's wake-up), and the key's other operations fail with a
	// retryable error; the batch's other keys are sent again at once,
	// without it. So a held row delays its own key, and its batch by
	// LockTimeout. Default: 500ms.
	LockTimeout time.Duration
	// DisableCleanup turns the background loop off: call Cleanup yourself
	// (from one instance, or a scheduled job), or rows that have ended
	// stay in the table. Default: false.
	DisableCleanup bool
}

// The defaults of Options.
const (
	defaultTable           = "idem"
	defaultCleanupInterval = time.Minute
	defaultCleanupBatch    = 1000
	defaultNewTimeout      = 10 * time.Second
	defaultLockTimeout     = 500 * time.Millisecond
)

// maxTimeout is the longest lock_timeout (and statement_timeout,
// idle_in_transaction_session_timeout) PostgreSQL takes: INT_MAX
// milliseconds, about 24.8 days.
const maxTimeout = (1<<31 - 1) * time.Millisecond

func (o Options) validate() error {
	switch {
	case o.Timeout < 0:
		return fmt.Errorf("%w: pgstore: Timeout %v must not be negative", store.ErrInvalidArgument, o.Timeout)
	case o.CleanupInterval < 0:
		return fmt.Errorf("%w: pgstore: CleanupInterval %v must not be negative", store.ErrInvalidArgument, o.CleanupInterval)
	case o.LockTimeout < 0:
		return fmt.Errorf("%w: pgstore: LockTimeout %v must not be negative", store.ErrInvalidArgument, o.LockTimeout)
	case o.LockTimeout > maxTimeout:
		return fmt.Errorf("%w: pgstore: LockTimeout %v is longer than PostgreSQL's longest, %v", store.ErrInvalidArgument, o.LockTimeout, maxTimeout)
	case o.CleanupBatch < 0:
		return fmt.Errorf("%w: pgstore: CleanupBatch %d must not be negative", store.ErrInvalidArgument, o.CleanupBatch)
	}
	return nil
}
