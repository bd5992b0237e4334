package main

import (
	"strconv"
	"strings"
)

// The stored text of a permanent error (store.Record.Error), as package
// idem writes it (errcode.go): the error's message alone when its kind has
// no registered code, else
//
//	[idem:<code>] <message>
//	[idem:<code> "<the registered error's own message, Go-quoted>"] <message>
//
// the second when the registered error was wrapped in another whose
// message differs. A message with no code that starts with "[idem:" is
// stored as "[idem:] <message>". Text that does not follow the form is all
// message. This is the rule of idem's parseStoredError, kept in step by
// TestStoredErrorAsTheRuntimeReadsIt and FuzzStoredError, which compare it
// with what the runtime reads from the same record.

// codeMark starts the stored text of a permanent error that carries a code.
const codeMark = "[idem:"

// storedError is a stored permanent error, read.
type storedError struct {
	// Message is the error's message, what a caller's err.Error() returns.
	Message string
	// Code is the code its kind was registered under; "" for none.
	Code string
	// Detail is the registered error's own message, when it differs from
	// Message (the registered error was wrapped); "" otherwise.
	Detail string
}

// parseStoredError splits the stored text of a permanent error into its
// message, code and detail.
func parseStoredError(s string) storedError {
	all := storedError{Message: s}
	rest, ok := strings.CutPrefix(s, codeMark)
	if !ok {
		return all
	}
	end := strings.IndexAny(rest, " ]")
	if end < 0 {
		return all
	}
	code, rest := rest[:end], rest[end:]
	if code != "" && !validCode(code) {
		return all
	}
	detail, quoted := "", false
	if rest[0] == ' ' {
		q, err := strconv.QuotedPrefix(rest[1:])
		if err != nil {
			return all
		}
		detail, _ = strconv.Unquote(q)
		rest, quoted = rest[1+len(q):], true
	}
	msg, ok := strings.CutPrefix(rest, "] ")
	if !ok || (code == "" && quoted) {
		return all
	}
	if detail == msg {
		detail = ""
	}
	return storedError{Message: msg, Code: code, Detail: detail}
}

// validCode reports whether code is one idem.RegisterError accepts: 1 to 64
// letters, digits and "._-/".
func validCode(code string) bool {
	if code == "" || len(code) > 64 {
		return false
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._-/", c) >= 0) {
			return false
		}
	}
	return true
}
