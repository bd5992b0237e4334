package pgtx

import "github.com/idemrt/idem"

// KeepWork marks err, returned by a function run by [Do] or [Join], as a
// permanent error whose work in the transaction commits with it: the key's
// record stores err (replayed to later calls, as [idem.Permanent] errors
// are) in the same transaction as the rows the function wrote. Without it,
// a permanent error rolls the function's work back and is stored alone.
// A transaction a failed statement aborted (the function's INSERT met a
// unique violation, say) has no work to keep: err is stored alone then,
// and still replayed. KeepWork(nil) is nil.
func KeepWork(err error) error {
	if err == nil {
		return nil
	}
	return idem.Permanent(&keptError{err: err})
}

// keptError marks an error whose work is kept.
type keptError struct{ err error }

func (e *keptError) Error() string { return e.err.Error() }
func (e *keptError) Unwrap() error { return e.err }
