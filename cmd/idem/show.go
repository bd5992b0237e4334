package main

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/httpidem"
)

// bodyShown is how much of an HTTP response's body get shows without -full.
const bodyShown = 4 << 10

// httpReport is an HTTP response stored by httpidem, as get shows it.
type httpReport struct {
	Status int `json:"status"`
	// Header holds the stored headers; sensitive ones (credentials,
	// cookies, tokens) have their values replaced by "[redacted, N bytes]".
	Header http.Header `json:"header"`
	// Body is the body as text, or BodyBase64 when it is not printable
	// UTF-8; BodyBytes is its whole size, and BodyCut is set when only
	// its first 4 KiB are shown (-full shows all).
	Body       *string `json:"body,omitempty"`
	BodyBase64 *string `json:"body_base64,omitempty"`
	BodyBytes  int     `json:"body_bytes"`
	BodyCut    bool    `json:"body_cut,omitempty"`
}

// sensitiveHeaders are redacted whatever their value; a header whose name
// holds one of sensitiveWords is too.
var (
	sensitiveHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "Set-Cookie2",
		"X-Api-Key", "X-Auth-Token", "X-Csrf-Token", "X-Xsrf-Token", "X-Amz-Security-Token"}
	sensitiveWords = []string{"token", "secret", "password", "passwd", "api-key", "apikey", "session", "credential", "signature", "auth"}
)

func sensitive(name string) bool {
	if slices.Contains(sensitiveHeaders, http.CanonicalHeaderKey(name)) {
		return true
	}
	l := strings.ToLower(name)
	return slices.ContainsFunc(sensitiveWords, func(w string) bool { return strings.Contains(l, w) })
}

// asHTTP reads value as a response stored by httpidem, or returns nil.
func asHTTP(value []byte, full bool) *httpReport {
	resp, err := httpidem.DecodeResponse(value)
	if err != nil {
		return nil
	}
	h := http.Header{}
	for name, vs := range resp.Header {
		for _, v := range vs {
			if sensitive(name) {
				v = "[redacted, " + bytesText(len(v)) + "]"
			}
			h[name] = append(h[name], v)
		}
	}
	rep := &httpReport{Status: resp.Status, Header: h, BodyBytes: len(resp.Body)}
	body, text := resp.Body, resp.Body
	if !full && len(body) > bodyShown {
		body, rep.BodyCut = body[:bodyShown], true
		// The cut may fall inside a UTF-8 sequence: the text leaves out
		// that sequence's head, and only it (a bad byte before it makes
		// the body binary, as it is uncut).
		text = trimCutRune(body)
	}
	if printable(text) {
		s := string(text)
		rep.Body = &s
	} else {
		s := base64.StdEncoding.EncodeToString(body)
		rep.BodyBase64 = &s
	}
	return rep
}

// trimCutRune returns b without the head of a UTF-8 sequence that a cut
// left at its end.
func trimCutRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// printHTTP writes a stored response: status, headers sorted, a blank
// line, the body.
func printHTTP(out *printer, h *httpReport) {
	out.printf("HTTP response %d %s\n", h.Status, http.StatusText(h.Status))
	names := make([]string, 0, len(h.Header))
	for n := range h.Header {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		for _, v := range h.Header[n] {
			out.printf("%s: %s\n", n, v)
		}
	}
	out.printf("\n")
	switch {
	case h.Body != nil:
		out.printf("%s\n", *h.Body)
	default:
		out.printf("%s\n", *h.BodyBase64)
		out.notef("the body is not printable UTF-8: shown as base64")
	}
	if h.BodyCut {
		out.notef("the body is %s: its first %s shown; pass -full for all of it", bytesText(h.BodyBytes), bytesText(bodyShown))
	}
}

// consumerReport names the consumer of a key a consume front end built.
type consumerReport struct {
	// Stream and Consumer are set for a key whose scope is
	// "<stream>/<consumer>" (NATS JetStream) or "<topic>/<group>" (Kafka),
	// the front ends' defaults; Scope otherwise (an SQS queue's URL, a
	// River job kind, a scope of the user's).
	Stream   string `json:"stream,omitempty"`
	Consumer string `json:"consumer,omitempty"`
	Scope    string `json:"scope,omitempty"`
	// MessageKey is the message's key, or the hex SHA-256 standing for a
	// long one (Digest).
	MessageKey string `json:"message_key"`
	Digest     bool   `json:"digest,omitempty"`
}

// asConsumer reads key as a consumer's, or returns nil.
func asConsumer(key string) *consumerReport {
	if p, ok := natsjs.ParseKey(key); ok {
		return &consumerReport{Stream: p.Stream, Consumer: p.Consumer, MessageKey: p.Key, Digest: p.Digest}
	}
	if p, ok := consume.ParseKey(key); ok {
		return &consumerReport{Scope: p.Scope, MessageKey: p.Key, Digest: p.Digest}
	}
	return nil
}

// consumerText is a consumer report in one line.
func consumerText(c *consumerReport) string {
	var b strings.Builder
	if c.Stream != "" {
		b.WriteString("stream/topic " + c.Stream + ", consumer/group " + c.Consumer)
	} else {
		b.WriteString("scope " + c.Scope)
	}
	if c.Digest {
		b.WriteString(", message key SHA-256 " + c.MessageKey)
	} else {
		b.WriteString(", message key " + c.MessageKey)
	}
	return b.String()
}
