package consume

import (
	"context"

	"github.com/idemrt/idem"
)

// Runner makes one call of a handler for its key, in place of idem.Do:
// [HandleWith] takes one, and adapters take one in their options
// (natsjs.Options.Run). It is how a handler's work runs in a form this
// package knows nothing of. The one it was made for is pgtx.Do, which runs
// the handler in a PostgreSQL transaction and completes the key's record
// in that same transaction, so that a consumer killed after the handler's
// work and before its acknowledgement leaves both committed (the
// redelivery replays) or neither (the redelivery runs the handler again):
// the gap of a plain handler, whose effect and stored result are two
// writes, is closed. Package consume/natsjs/natstx is that runner for
// NATS JetStream; consume itself imports no database driver.
//
// A runner must answer as idem.Do does for rt, key and opts: call idem.Do
// with them, or a function built on it that passes them through (pgtx.Do
// does), since the verdict is decided from that call's error and from the
// outcome the options report (idem.WithOutcome is among them). It may wrap
// fn (to hand it a transaction, say) but must run fn's work only through
// that call, and return fn's value and error as the call gives them. An
// error of its own, before the call (a misconfigured pool, say), is a
// Retry with the backoff, as a store failure is.
//
// idem.Do[T] is a Runner[T]; so is a closure over pgtx.Do and a pool.
type Runner[T any] func(ctx context.Context, rt *idem.Runtime, key string,
	fn func(context.Context) (T, error), opts ...idem.CallOption) (T, error)
