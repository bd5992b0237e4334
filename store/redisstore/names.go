package redisstore

import (
	"strings"
)

// The Redis key of a record is <prefix>v3{<name>}, where <name> is the
// (scoped) key with '%' written as "%25", '{' as "%7B" and '}' as "%7D".
// The braces make the whole name the cluster hash tag, and the escaping
// keeps any brace of the key out of it, so the record and its waiter set
// (<prefix>v3{<name>}:w) share one slot. The name keeps the key readable,
// and the escaping preserves prefixes (a key starts with p exactly when its
// name starts with p's name), so SCAN can MATCH a scope's records by name
// (see Scan).
//
// "v3" is the version of the record's format: of its name and of its
// value (packed.go), which starts with its layout ('3', or '4' for a claim
// that keeps its attempt: the store reads both, so records written before
// attempts were counted are read as they are). The first format named
// records <prefix>{<SHA-256 of the key, unpadded base64url>}, with no
// version; v2 named them <prefix>v2{<name>} and kept each in a hash; v3
// keeps each in one string. A later format that changes the name, or a
// value in a way this version cannot read, takes the next version (v4).
// A store reads, lists and writes records of its own version only, so it
// never misreads a record of another one: it finds no record there (see
// docs/redis.md, Upgrading); and a value of another format found at a v3
// name is corrupt, never read.
const formatVersion = "v3"

// RecordKey returns the Redis key of key's record: the prefix, the
// format version v3, then the key (after Options.Scope, if set, is applied
// with store.BuildKey) with '%', '{' and '}' escaped, as the cluster hash
// tag in braces.
func (s *Store) RecordKey(key string) string {
	var b strings.Builder
	b.Grow(len(s.prefix) + len(formatVersion) + len(s.scope) + len(key) + 2)
	b.WriteString(s.prefix)
	b.WriteString(formatVersion)
	b.WriteByte('{')
	writeName(&b, s.scope)
	writeName(&b, key)
	b.WriteByte('}')
	return b.String()
}

// KeyOf returns the key whose record is the Redis key redisKey (as
// RecordKey made it, without Options.Scope when the store has one), and
// false for a Redis key that is not the name of one of this store's
// records: another prefix, another scope, another format version, a waiter
// set, or not idem's.
func (s *Store) KeyOf(redisKey string) (string, bool) {
	rest, ok := strings.CutPrefix(redisKey, s.prefix+formatVersion+"{")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "}")
	if !ok {
		return "", false
	}
	key, ok := readName(name)
	if !ok {
		return "", false
	}
	if key, ok = strings.CutPrefix(key, s.scope); !ok {
		return "", false
	}
	return key, true
}

func (s *Store) keys(key string) []string {
	rk := s.RecordKey(key)
	return []string{rk, rk + ":w"}
}

func writeName(b *strings.Builder, key string) {
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
}

// readName undoes writeName; it reports false for a string writeName
// cannot have made (a raw brace, an unknown escape).
func readName(name string) (string, bool) {
	if !strings.ContainsAny(name, "%{}") {
		return name, true
	}
	var b strings.Builder
	b.Grow(len(name))
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '{' || c == '}':
			return "", false
		case c != '%':
			b.WriteByte(c)
		case strings.HasPrefix(name[i:], "%25"):
			b.WriteByte('%')
			i += 2
		case strings.HasPrefix(name[i:], "%7B"):
			b.WriteByte('{')
			i += 2
		case strings.HasPrefix(name[i:], "%7D"):
			b.WriteByte('}')
			i += 2
		default:
			return "", false
		}
	}
	return b.String(), true
}

// globEscape returns s with the characters that SCAN's MATCH reads as a
// pattern (*, ?, [, ] and \) escaped by a backslash, so that it matches
// itself only.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// matchPattern returns the MATCH pattern of the records whose key starts
// with prefix: <prefix>v3{<name of scope+prefix>*}. A waiter set's name
// ends in ":w", not '}', so it never matches.
func (s *Store) matchPattern(prefix string) string {
	var b strings.Builder
	writeName(&b, s.scope)
	writeName(&b, prefix)
	return globEscape(s.prefix) + formatVersion + "{" + globEscape(b.String()) + "*}"
}
