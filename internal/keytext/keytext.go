// Package keytext names keys in messages: every error of the module that
// quotes a key quotes it with Quote, so a long key never fills a log line.
package keytext

import (
	"strconv"
	"unicode/utf8"
)

const (
	// MaxWhole is the longest key quoted whole, in bytes.
	MaxWhole = 128
	// Head is how much of a longer key is quoted, in bytes (less when it
	// would cut a UTF-8 sequence).
	Head = 64
)

// Quote returns key Go-quoted when it is at most MaxWhole bytes, else its
// first Head bytes Go-quoted, then "..." and its length:
//
//	"ff:idemp:acme:v1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... (1041 bytes)
func Quote(key string) string {
	if len(key) <= MaxWhole {
		return strconv.Quote(key)
	}
	n := Head
	// Back up to the start of a rune, unless the bytes are not UTF-8
	// anyway (then any cut is as good).
	for i := n; i > n-utf8.UTFMax && i > 0; i-- {
		if utf8.RuneStart(key[i]) {
			n = i
			break
		}
	}
	return strconv.Quote(key[:n]) + "... (" + strconv.Itoa(len(key)) + " bytes)"
}

// Cut reads a key quoted by Quote at the start of s: the key (only its
// head when Quote cut it), whether it was cut, and the rest of s.
func Cut(s string) (key string, cut bool, rest string, ok bool) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", false, s, false
	}
	if key, err = strconv.Unquote(q); err != nil {
		return "", false, s, false
	}
	rest = s[len(q):]
	const open = "... ("
	if len(rest) < len(open) || rest[:len(open)] != open {
		return key, false, rest, true
	}
	r := rest[len(open):]
	i := 0
	for i < len(r) && '0' <= r[i] && r[i] <= '9' {
		i++
	}
	const close = " bytes)"
	if i == 0 || len(r[i:]) < len(close) || r[i:i+len(close)] != close {
		return key, false, rest, true
	}
	return key, true, r[i+len(close):], true
}
