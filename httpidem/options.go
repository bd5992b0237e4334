package httpidem

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
)

// Options configures a [Middleware]. The zero value is valid: every field
// has a documented default, used when it is left zero. Negative values are
// errors, never "no limit".
type Options struct {
	// Runtime runs each request once per key. Give every instance of a
	// service a runtime on one shared store (store/redisstore) to share the
	// guarantee between them.
	// Default: a runtime of the middleware's own on the in-memory store,
	// closed by Close.
	Runtime *idem.Runtime

	// Policy is the middleware's idem policy. Its fields left zero are the
	// runtime's (idem.Options.Policy), but for Settle:
	//
	//   - Settle is how long a request waits for a request with the same
	//     key that is in flight; it gets that request's response, marked
	//     as a replay. It never waits past its own request's context. Past
	//     Settle it is answered 409 with Retry-After. Keep it under the
	//     server's http.Server.WriteTimeout, which runs from the end of the
	//     request's headers: an answer written after it is lost, and the
	//     client sees the connection close instead of the 409.
	//     Default: 10s, not the runtime's: long enough for a retrying
	//     client that timed out to get the first attempt's response, short
	//     enough to answer before the usual proxy and gateway timeouts
	//     (30s to 60s) give up on the retry.
	//   - FailFast answers a request whose key is in flight with 409 (and
	//     Retry-After) at once, instead of waiting; a client must then
	//     retry until the first request is done. Setting Settle too is an
	//     error.
	//   - TTL is how long a response is kept and replayed (the runtime's,
	//     24h by default).
	//   - Lease is how long a request holds its key without renewal; it
	//     is renewed while the handler runs (unless NoRenewal), so it
	//     only matters when a process dies mid-request: its key is taken
	//     over after this long (the runtime's, 60s by default).
	//   - Classifier must be nil: StoreStatus decides what is kept.
	idem.Policy

	// Methods are the request methods the middleware applies to; others
	// pass through untouched.
	// Default: POST and PATCH (the methods that are not idempotent by
	// themselves).
	Methods []string

	// Optional lets requests without an Idempotency-Key header pass through
	// untouched (without idempotency).
	// Default: false: they are answered 400.
	Optional bool

	// Tenant returns the scope of a request's keys: take it from the
	// authenticated principal (a user or account ID), never from a header
	// the client picks. The same key in two tenants is two keys. Set it
	// wherever the credentials a request carries change from one attempt
	// to the next: signed requests (AWS SigV4, HTTP Digest, Hawk) and
	// short-lived tokens would put each retry in a scope of its own. With
	// Tenant set, CredentialHeaders, CredentialCookies and SharedScope are
	// not used (setting them too is an error).
	// Default: nil: keys are scoped by the request's credentials (see
	// CredentialHeaders).
	Tenant func(r *http.Request) string

	// CredentialHeaders names the request headers that identify a caller.
	// Without Tenant, a key's scope is a SHA-256 digest of the values of
	// these headers and of CredentialCookies, so two callers never see
	// each other's responses. (The scheme of an Authorization or
	// Proxy-Authorization value is case-insensitive: "Bearer t" and
	// "bearer t" are one caller.) A rotated token is a new scope: a retry
	// sent with it runs again; APIs whose credentials change within a
	// retry's lifetime should set Tenant instead.
	//
	// Name every header your callers authenticate with: a gateway's
	// identity header (X-Consumer-ID, X-Forwarded-User, X-Client-Cert
	// behind a TLS-terminating proxy), an API-key header of another name.
	// Requests that carry none of the credentials share one anonymous
	// scope, where any caller who sends a key gets the response stored for
	// it; the middleware logs a warning the first time that happens.
	// Setting it replaces the default: list Authorization too if callers
	// send it.
	// Default: Authorization and X-Api-Key.
	CredentialHeaders []string

	// CredentialCookies names the cookies that identify a caller (a session
	// cookie); they are digested into the scope with CredentialHeaders.
	// Default: none.
	CredentialCookies []string

	// SharedScope puts every request in one scope: anyone who sends a key
	// gets the response stored for it. Use it only where requests carry no
	// credentials (a public webhook receiver), or where keys are
	// unguessable and responses hold nothing private to a caller. It also
	// silences the warning about requests without credentials.
	// Default: false: keys are scoped per caller (Tenant, or credentials).
	SharedScope bool

	// Version is the version segment of every key (store.BuildKey), to keep
	// the keys of two APIs, or of two incompatible versions of one, apart
	// when they share a runtime.
	// Default: "http".
	Version string

	// MaxRequestBody bounds the request body, which is read into memory
	// for the fingerprint and handed to the handler from there. A larger
	// body is answered 413 and the handler does not run. The body is read
	// as it arrives: memory follows what the client sent, never what its
	// Content-Length announces. Whatever is set, a body is never read past
	// [MaxRequestBodyCeiling] (a larger value, math.MaxInt64 for "no
	// limit" included, means the ceiling).
	// Default: 1 MiB.
	MaxRequestBody int64

	// BodyTimeout bounds the time to read a request's body, through the
	// server's read deadline (http.ResponseController): an upload that
	// stalls is answered 400 and its memory freed. Where the writer
	// cannot set a deadline (a wrapper that does not unwrap to the
	// server's), the server's own ReadTimeout is the bound.
	// Default: 30s. At most store.MaxDuration.
	BodyTimeout time.Duration

	// MaxStoredBody bounds the response body that is stored. A larger
	// response still goes to its client, but it is not stored: the key is
	// released (a retry runs the handler again) and a warning is logged.
	// It must leave 64 KiB (a quarter of a limit under 256 KiB) for the
	// status and headers under the runtime's result limit
	// (idem.Runtime.MaxResultBytes), which the default gives way to.
	// Default: 1 MiB.
	MaxStoredBody int

	// StoreStatus says which response statuses are stored and replayed;
	// the key of any other response is released, so a retry runs the
	// handler again. Whatever it says, a route miss (see RouteMiss), a
	// streamed response and one marked with [NoStore] are not stored.
	// Default: [DefaultStoreStatus]: 2xx, 3xx and 4xx outcomes, without
	// the statuses a retry can change (5xx, 429, 401, 422, ...).
	StoreStatus func(status int) bool

	// RouteMiss reports whether a response is a router's own answer to a
	// request that matched no route (a mistyped path, a wrong method),
	// which is never stored: the corrected request with the same key must
	// run. status is the response's status, r the request the handler got,
	// after it returned (routers set r.Pattern on it). See [DefaultRouteMiss]
	// for the router shapes the default recognises, and docs/http.md for
	// the others.
	// Default: [DefaultRouteMiss]: a 404 or 405 whose request has no
	// Pattern.
	RouteMiss func(status int, r *http.Request) bool

	// Fingerprint replaces the default fingerprint: what tells two requests
	// with one key apart (a request with a used key and another fingerprint
	// gets 422). Make it canonical where clients vary the spelling of one
	// request: sorted query parameters, JSON re-serialised. r is the
	// request as it reached the middleware, its Body already read: the
	// body is in body. An error is answered 400 ([ErrFingerprint]).
	// Default: a SHA-256 of the method, path, query, scope, body and
	// FingerprintHeaders, byte for byte.
	Fingerprint func(r *http.Request, body []byte) ([]byte, error)

	// FingerprintHeaders are request headers added to the default
	// fingerprint (Content-Type, say, where one body means two things under
	// two types). Setting Fingerprint too is an error: a custom fingerprint
	// reads the headers it needs itself.
	// Default: none.
	FingerprintHeaders []string

	// DocsURL is the base of the type URI of every problem the middleware
	// answers with: the URI is DocsURL followed by the problem's name (see
	// [ProblemMissingKey] and the others), and is sent in the body's "type"
	// and in a Link header (rel="describedby"). End it with '#' for one
	// page with an anchor per problem, or '/' for a page per problem.
	// Default: [DefaultDocsURL], this package's docs/http.md.
	DocsURL string

	// OnError writes the middleware's own error responses (400, 409, 413,
	// 422, 500, 503). status is StatusFor(err). When it is called, the
	// response already carries Idempotency-Key (once the key is parsed)
	// and, on 409 and 503, Retry-After.
	// Default: WriteProblem (application/problem+json).
	OnError func(w http.ResponseWriter, r *http.Request, status int, err error)

	// Logger receives, at error level, panics of the handler and of
	// Tenant and Fingerprint (with their stack), and at warn level:
	// responses too large to store, responses sent whose storing did not
	// finish, scopes that make a key invalid, and (once) a keyed request
	// without credentials in the anonymous scope.
	// Default: slog.Default(). Pass slog.New(slog.DiscardHandler) to drop
	// them.
	Logger *slog.Logger
}

const (
	defaultMaxBody     = 1 << 20
	defaultVersion     = "http"
	defaultBodyTimeout = 30 * time.Second
	// maxVersion is the longest Version: keys must fit store.MaxKeyLen
	// with the longest idempotency key and scope.
	maxVersion    = 64
	defaultSettle = 10 * time.Second
)

// resolve rejects invalid values and fills in the defaults.
func (o Options) resolve() (Options, error) {
	if err := o.validate(); err != nil {
		return o, err
	}
	return o.withDefaults(), nil
}

// validate rejects negative or too long durations, negative sizes, methods
// that cannot match, names that cannot be headers or cookies, and options
// that contradict each other.
func (o Options) validate() error {
	if err := o.Policy.Validate("httpidem: Options"); err != nil {
		return err
	}
	if o.Classifier != nil {
		return invalid("Classifier is set; StoreStatus decides which responses are kept, and the handler returns no error to classify")
	}
	if o.MaxRequestBody < 0 {
		return invalid("MaxRequestBody is %d; it must not be negative (zero means the default)", o.MaxRequestBody)
	}
	if o.BodyTimeout < 0 || o.BodyTimeout > store.MaxDuration {
		return invalid("BodyTimeout is %v; it must be between 0 (the default) and %v", o.BodyTimeout, store.MaxDuration)
	}
	if err := checkVersion(o.Version); err != nil {
		return err
	}
	if o.MaxStoredBody < 0 {
		return invalid("MaxStoredBody is %d; it must not be negative (zero means the default)", o.MaxStoredBody)
	}
	for _, m := range o.Methods {
		if err := checkMethod(m); err != nil {
			return err
		}
	}
	return o.validateChoices()
}

// validateChoices rejects the options that are set together but exclude
// each other, and names that cannot be what they name.
func (o Options) validateChoices() error {
	switch {
	case o.Tenant != nil && o.SharedScope:
		return invalid("Tenant and SharedScope are both set; set one of them")
	case len(o.CredentialCookies) > 0 && (o.Tenant != nil || o.SharedScope):
		return invalid("CredentialCookies is set, but so is Tenant or SharedScope, which do not use credentials")
	case len(o.CredentialHeaders) > 0 && (o.Tenant != nil || o.SharedScope):
		return invalid("CredentialHeaders is set, but so is Tenant or SharedScope, which do not use credentials")
	case o.Fingerprint != nil && len(o.FingerprintHeaders) > 0:
		return invalid("FingerprintHeaders is set, but Fingerprint replaces the default fingerprint it adds to")
	}
	for _, h := range o.CredentialHeaders {
		switch {
		case !isToken(h):
			return invalid("CredentialHeaders holds %q, which is not a header name", h)
		case http.CanonicalHeaderKey(h) == "Cookie":
			// Every cookie would count, a theme or a tracking ID included.
			return invalid("CredentialHeaders holds %q; name the session cookie in CredentialCookies instead", h)
		}
	}
	for _, c := range o.CredentialCookies {
		if !isToken(c) {
			return invalid("CredentialCookies holds %q, which is not a cookie name", c)
		}
	}
	for _, h := range o.FingerprintHeaders {
		if !isToken(h) {
			return invalid("FingerprintHeaders holds %q, which is not a header name", h)
		}
	}
	// The base goes into a Link header between < and >: nothing there may
	// end the field or the URI.
	if strings.ContainsFunc(o.DocsURL, func(r rune) bool { return r <= ' ' || r > '~' || strings.ContainsRune(`<>"`, r) }) {
		return invalid("DocsURL is %q; it must be a URI, without spaces, quotes or angle brackets", o.DocsURL)
	}
	return nil
}

// MaxRequestBodyCeiling is the largest request body the middleware reads,
// whatever Options.MaxRequestBody says: 256 MiB. The body is held in memory
// whole (for the fingerprint, and to hand to the handler), so a body of
// that size costs that much per request in flight; an API that takes more
// should stream it to storage and send a reference, which a retry can
// repeat.
const MaxRequestBodyCeiling = 256 << 20

// checkVersion refuses a Version that would make every key invalid, or
// that a log cannot show: at most maxVersion bytes of printable UTF-8.
func checkVersion(v string) error {
	switch {
	case len(v) > maxVersion:
		return invalid("Version is %d bytes; it must be at most %d", len(v), maxVersion)
	case !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return invalid("Version is %q; it must be printable text, without control characters", v)
	}
	return nil
}

// checkMethod rejects a method that is not a token, and a standard method
// in the wrong case.
func checkMethod(m string) error {
	if !isToken(m) {
		return invalid("Methods holds %q, which is not a method", m)
	}
	switch up := strings.ToUpper(m); up {
	case http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete, http.MethodGet:
		if up != m {
			// Methods are case-sensitive: "post" would never match.
			return invalid("Methods holds %q; methods are case-sensitive (did you mean %q?)", m, up)
		}
	}
	return nil
}

// isToken reports whether s is a non-empty run of visible ASCII without
// the separators of RFC 9110's token.
func isToken(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return r <= ' ' || r > '~' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	})
}

// invalid is the error of an invalid option.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: httpidem: Options.%s", idem.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// withDefaults fills in the default of every field left zero.
func (o Options) withDefaults() Options {
	if len(o.Methods) == 0 {
		o.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if o.Version == "" {
		o.Version = defaultVersion
	}
	o.Policy = o.Policy.Inherit(idem.Policy{Settle: defaultSettle})
	if o.MaxRequestBody == 0 {
		o.MaxRequestBody = defaultMaxBody
	}
	o.MaxRequestBody = min(o.MaxRequestBody, MaxRequestBodyCeiling)
	if o.BodyTimeout == 0 {
		o.BodyTimeout = defaultBodyTimeout
	}
	if o.MaxStoredBody == 0 {
		o.MaxStoredBody = defaultMaxBody
	}
	if o.StoreStatus == nil {
		o.StoreStatus = DefaultStoreStatus
	}
	if o.RouteMiss == nil {
		o.RouteMiss = DefaultRouteMiss
	}
	if o.DocsURL == "" {
		o.DocsURL = DefaultDocsURL
	}
	if o.OnError == nil {
		o.OnError = WriteProblem
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.FingerprintHeaders = canonical(o.FingerprintHeaders)
	if len(o.CredentialHeaders) == 0 {
		o.CredentialHeaders = defaultCredentialHeaders
	}
	o.CredentialHeaders = canonical(o.CredentialHeaders)
	return o
}

// defaultCredentialHeaders is the default Options.CredentialHeaders.
var defaultCredentialHeaders = []string{"Authorization", "X-Api-Key"}

// canonical returns a copy of names in canonical header form (the
// caller's slice stays theirs).
func canonical(names []string) []string {
	out := make([]string, len(names))
	for i, h := range names {
		out[i] = http.CanonicalHeaderKey(h)
	}
	return out
}
