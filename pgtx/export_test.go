package pgtx

// SetAfterStatement sets a function that runs right after the completion
// statement, before COMMIT: the process tests stop a child there.
func SetAfterStatement(f func()) { afterStatement = f }
