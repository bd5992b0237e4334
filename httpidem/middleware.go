package httpidem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
)

// Middleware makes requests with an Idempotency-Key header run once. Create
// it with [New], wrap handlers with [Middleware.Handler], and
// [Middleware.Close] it when done. It is safe for concurrent use.
type Middleware struct {
	o         Options
	rt        *idem.Runtime
	own       bool
	methods   map[string]bool
	opts      []idem.CallOption // the options shared by every call
	anonymous sync.Once         // the warning about the anonymous scope
	close     sync.Once
	closeErr  error
	// Request bodies being read, and the bytes they hold (BodyStats).
	reading, buffered atomic.Int64
}

// New returns a middleware. It fails with an error matching
// idem.ErrInvalidArgument on an invalid option (a negative duration or
// size, a blank method, a name that cannot be a header or cookie name) or on
// options that exclude each other (FailFast and Settle, Tenant and
// SharedScope, CredentialHeaders or CredentialCookies and either,
// Fingerprint and FingerprintHeaders).
func New(opts Options) (*Middleware, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	m := &Middleware{o: o, rt: o.Runtime, methods: make(map[string]bool, len(o.Methods))}
	for _, meth := range o.Methods {
		m.methods[meth] = true
	}
	m.opts = []idem.CallOption{
		// The middleware's policy: FailFast answers 409 at once; fields
		// left zero (TTL, Lease) are the runtime's.
		idem.WithPolicy(o.Policy),
		// Only what StoreStatus accepts is stored: the function returns no
		// other error to keep, and a runtime-wide classifier must not
		// promote one.
		idem.WithClassifier(func(error) bool { return false }),
		// The handler runs on the request's own goroutine, to the end, even
		// if the client leaves: routers keep per-request state in the
		// context (chi recycles it when ServeHTTP returns), so the request
		// must not return while its handler still reads it.
		idem.WithOwnerWaits(),
		// Header values may hold bytes that are not UTF-8 (obs-text): gob
		// keeps them as they are; JSON would not.
		idem.WithCodec(gobCodec{}),
	}
	if m.rt == nil {
		rt, err := idem.New(idem.Options{})
		if err != nil {
			return nil, fmt.Errorf("httpidem: start the idem runtime: %w", err)
		}
		m.rt, m.own = rt, true
	}
	// A response over the runtime's result limit would be stored as a
	// permanent ErrResultTooLarge, replayed as a 500: keep the body bound
	// under it, with room for the status and headers.
	room := headroom(m.rt.MaxResultBytes())
	most := max(0, m.rt.MaxResultBytes()-room)
	if opts.MaxStoredBody > most {
		if m.own {
			_ = m.rt.Close(context.Background())
		}
		return nil, invalid("MaxStoredBody is %d; it must be at most %d, the runtime's MaxResultBytes (%d) less %d for the status and headers",
			opts.MaxStoredBody, most, m.rt.MaxResultBytes(), room)
	}
	m.o.MaxStoredBody = min(m.o.MaxStoredBody, most)
	return m, nil
}

// storedHeadroom is the room a stored response keeps under the runtime's
// MaxResultBytes for its status and headers.
const storedHeadroom = 64 << 10

// headroom is the room kept for the status and headers under a result
// limit of most bytes: storedHeadroom, or a quarter of a limit under
// 256 KiB. A fixed 64 KiB would leave no body at all under a small
// MaxResultBytes, and every response with a body would be released.
func headroom(most int) int { return min(storedHeadroom, most/4) }

// Close closes the runtime the middleware owns (none when Options.Runtime
// was given): it waits, within ctx, for the handlers running to store their
// responses; requests that need a key are answered 503 after it. A runtime
// given in Options is the caller's to close. Close is idempotent.
func (m *Middleware) Close(ctx context.Context) error {
	m.close.Do(func() {
		if m.own {
			m.closeErr = m.rt.Close(ctx)
		}
	})
	return m.closeErr
}

// Handler wraps next; it has the shape routers take for middleware
// (func(http.Handler) http.Handler), so it works with net/http's ServeMux,
// chi's Use and the like. It panics if next is nil.
//
// For a request whose method is one of Options.Methods and that carries an
// Idempotency-Key header, next runs once per (scope, key): see the package
// documentation for what every other request with the key gets, and for
// wrapping a route or a whole router.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("httpidem: Handler(nil)")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key, echo, pass, err := m.keyOf(r)
	switch {
	case err != nil:
		m.fail(w, r, err)
		return
	case pass:
		next.ServeHTTP(w, r)
		return
	}
	// Every answer to a keyed request names its key, the problems
	// included, so that a client can match answers to operations.
	w.Header().Set(HeaderKey, echo)
	k := &keyed{key: key}
	var anonymous bool
	if err := m.guard("Tenant", r, func() { k.tenant, anonymous = m.scopeOf(r) }); err != nil {
		m.fail(w, r, err)
		return
	}
	if err := checkTenant(k.tenant); err != nil {
		// The scope is the service's, not the client's: it is logged, and
		// the client's answer does not show it.
		m.o.Logger.Error("httpidem: Options.Tenant returned a scope a key cannot have; the request is answered 500 and nothing ran",
			"key", key, "tenant", k.tenant, "method", r.Method, "path", r.URL.Path, "err", err)
		m.fail(w, r, errInvalidScope)
		return
	}
	k.scoped = store.BuildKey(key, store.Scope{Namespace: k.tenant, Version: m.o.Version})
	if held, _ := r.Context().Value(heldKey{}).(held); held.rt == m.rt && held.key == k.scoped {
		// Wrapped twice on one route: the outer layer holds the key and
		// handles it; this one only passes the request on.
		next.ServeHTTP(w, r)
		return
	}
	if anonymous {
		m.warnAnonymous(r)
	}
	if err := store.ValidateKey(k.scoped); err != nil {
		// The scope is the service's, not the client's: it is logged, and
		// the client's answer does not show it.
		m.o.Logger.Error("httpidem: the request's scope makes its key invalid; check Options.Tenant",
			"key", k.key, "tenant", k.tenant, "method", r.Method, "path", r.URL.Path, "err", err)
		m.fail(w, r, errInvalidScope)
		return
	}
	if k.body, err = m.readBody(w, r); err != nil {
		m.fail(w, r, err)
		return
	}
	if err := m.guard("Fingerprint", r, func() { k.fp, err = m.fingerprintOf(r, k.tenant, k.body) }); err != nil {
		m.fail(w, r, err)
		return
	}
	if err != nil {
		m.fail(w, r, err)
		return
	}
	m.once(w, r, next, k)
}

// errInvalidScope is the error of a request whose scope makes its key
// invalid (see checkTenant). Its message shows neither.
var errInvalidScope = fmt.Errorf("%w: the caller's scope makes the key invalid", ErrInvalidScope)

// MaxTenantLen is the longest scope Options.Tenant may return: with it,
// the longest Idempotency-Key (MaxKeyLen) and Version, a key stays within
// store.MaxKeyLen, so no key a client sends makes a scoped key invalid.
const MaxTenantLen = 512

// checkTenant refuses a scope that could make a key invalid, or that a log
// cannot show: over MaxTenantLen bytes, or holding a control character.
func checkTenant(tenant string) error {
	switch {
	case len(tenant) > MaxTenantLen:
		return fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrInvalidScope, len(tenant), MaxTenantLen)
	case strings.ContainsFunc(tenant, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return fmt.Errorf("%w: it holds a control character", ErrInvalidScope)
	}
	return nil
}

// guard calls f, a call of the Options function named name, and turns a
// panic of it into an error (answered 500), logged with its stack as a
// handler's panic is, instead of a dropped connection.
func (m *Middleware) guard(name string, r *http.Request, f func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			m.o.Logger.Error("httpidem: Options."+name+" panicked; the request is answered 500 and nothing ran",
				"method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("httpidem: Options.%s panicked: %v", name, p)
		}
	}()
	f()
	return nil
}

// keyed is a request that runs once per key: its Idempotency-Key, scope
// (tenant), scoped idem key, body and fingerprint.
type keyed struct {
	key, tenant, scoped string
	body, fp            []byte
}

// keyOf returns the request's Idempotency-Key, and the header's value to
// echo. pass is true for a request the middleware lets through untouched:
// one whose method it does not apply to, or one without a key when
// Options.Optional.
func (m *Middleware) keyOf(r *http.Request) (key, echo string, pass bool, err error) {
	if !m.methods[r.Method] {
		return "", "", true, nil
	}
	values := r.Header.Values(HeaderKey)
	switch {
	case len(values) == 0 && m.o.Optional:
		return "", "", true, nil
	case len(values) == 0:
		return "", "", false, ErrMissingKey
	case len(values) > 1:
		return "", "", false, fmt.Errorf("%w: %d Idempotency-Key headers; send one", ErrMalformedKey, len(values))
	}
	key, err = ParseKey(values[0])
	return key, strings.Trim(values[0], " \t"), false, err
}

// once runs next under idem.Do on the request's key and answers the
// request: with the response of its own run, the stored or awaited response
// of another, or an error.
func (m *Middleware) once(w http.ResponseWriter, r *http.Request, next http.Handler, k *keyed) {
	if err := r.Context().Err(); err != nil {
		// The request's context ended before it could run (a slow upload
		// outlasted a server timeout): nothing ran, and nothing holds the
		// key for it. idem.Do would refuse it with the same error, which
		// must not read as "in progress" below.
		m.fail(w, r, err)
		return
	}
	req := r.Clone(context.WithValue(r.Context(), heldKey{}, held{rt: m.rt, key: k.scoped}))
	// What outer middleware set: the handler sees it, the record does not.
	base := w.Header().Clone()
	base.Del(HeaderKey)
	var how idem.Outcome
	var a attempt
	opts := append(m.opts[:len(m.opts):len(m.opts)], idem.WithFingerprint(k.fp), idem.WithOutcome(&how))
	resp, err := idem.Do(req.Context(), m.rt, k.scoped, func(ctx context.Context) (*response, error) {
		rec := newRecorder(w, base)
		defer func() { a.streamed = rec.streaming }()
		return m.run(ctx, req, next, k, rec, &a)
	}, opts...)
	var pe *idem.PanicError
	switch {
	case a.streamed:
		// The response went to the client as the handler wrote it (the
		// function ran on this goroutine, so a is this run's). A panic
		// can only cut it short, as net/http would.
		if errors.As(err, &pe) || a.panicked {
			panic(http.ErrAbortHandler)
		}
		return
	case err == nil:
		resp.write(w, how != idem.Executed)
		return
	case how == idem.Executed && a.ran:
		m.ran(w, r, k, &a, err)
		return
	}
	if how != idem.Executed && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The request's context ended while it waited for the run in
		// flight (it was not done when the call began: see above).
		err = fmt.Errorf("%w: the request gave up waiting: %w", idem.ErrConflict, err)
	}
	m.fail(w, r, err)
}

// attempt is what became of this request's own run of the handler (the
// function runs on the request's goroutine: idem.WithOwnerWaits).
type attempt struct {
	ran      bool      // the handler was called
	own      *response // its response, once it returned without streaming
	keep     bool      // own is to be stored (StoreStatus and the rest accept it)
	streamed bool      // its response went straight to the client
	panicked bool      // it panicked
	panicVal any
}

// ran answers the request whose own run of the handler ended with err: the
// handler ran, so whatever err says, the client is not told that nothing
// did. It gets the handler's response when there is one (err then says
// that it was not stored, or that storing it did not finish), the panic's
// answer when the handler panicked, or err's.
func (m *Middleware) ran(w http.ResponseWriter, r *http.Request, k *keyed, a *attempt, err error) {
	var pe *idem.PanicError
	switch {
	case a.panicked || errors.As(err, &pe):
		// The panic was logged by run. (With Redis, the owner's context
		// ending may have answered before the runtime reported it.)
		if a.panicVal == http.ErrAbortHandler {
			panic(http.ErrAbortHandler) // abort the response, as the handler asked
		}
		if pe == nil {
			pe = &idem.PanicError{Key: k.scoped, Value: a.panicVal}
		}
		m.fail(w, r, pe)
	case a.own == nil:
		// No response of its own to send (a stream and a panic are
		// handled above): err is the answer.
		m.fail(w, r, err)
	case !a.keep:
		a.own.write(w, false) // this request's own response, not kept
	case errors.Is(err, idem.ErrLeaseLost):
		// Another run took the key over and will store its own response:
		// this one is not the key's, and the retry gets that one (500).
		m.fail(w, r, err)
	default:
		// A response to keep that the store did not acknowledge: its
		// request's context ended before the store answered (the runtime
		// goes on storing it), the store failed (the runtime retries while
		// the lease lasts), or the runtime closed. The handler ran, so its
		// client gets its response, not a 503 that says nothing ran.
		m.o.Logger.Warn("httpidem: the handler ran, but storing its response did not finish; "+
			"its client gets it all the same, and a retry with the key gets it if the store takes it, or runs the handler again",
			"key", k.key, "tenant", k.tenant, "method", r.Method, "path", r.URL.Path,
			"status", a.own.Status, "err", err)
		a.own.write(w, false)
	}
}

// heldKey marks the context of a request whose key a middleware holds.
type heldKey struct{}

type held struct {
	rt  *idem.Runtime
	key string
}

// run is idem.Do's function: it runs the handler against rec and says
// whether its response is to be stored. A response that is not (a stream,
// NoStore, a route miss, a status StoreStatus refuses, a body too large)
// comes back as an *unstored error, which releases the key. a records what
// became of the run.
func (m *Middleware) run(ctx context.Context, req *http.Request, next http.Handler, k *keyed, rec *recorder, a *attempt) (*response, error) {
	// A copy of its own: routers set its Pattern, which is read below.
	req = req.WithContext(ctx)
	req.Body, req.GetBody = bodyReader(k.body), func() (io.ReadCloser, error) { return bodyReader(k.body), nil }
	req.ContentLength, req.TransferEncoding = int64(len(k.body)), nil
	defer func() {
		// Logged here, by the run itself: once its client has left, its
		// own request's call may answer with the context's error instead.
		if p := recover(); p != nil {
			a.panicked, a.panicVal = true, p
			if p != http.ErrAbortHandler {
				m.o.Logger.Error("httpidem: handler panicked; the key is released",
					"key", k.key, "tenant", k.tenant, "method", req.Method, "path", req.URL.Path,
					"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			}
			panic(p)
		}
	}()
	a.ran = true
	next.ServeHTTP(rec, req)
	rec.finish()
	if rec.streaming {
		return nil, &unstored{status: rec.status, reason: "streamed to the client"}
	}
	resp := rec.result()
	a.own = resp
	switch {
	case rec.noStore:
		return nil, &unstored{status: resp.Status, reason: "the handler called NoStore"}
	case m.o.RouteMiss(resp.Status, req):
		return nil, &unstored{status: resp.Status, reason: "no route matched"}
	case !m.o.StoreStatus(resp.Status):
		return nil, &unstored{status: resp.Status, reason: "StoreStatus refuses it"}
	case len(resp.Body) > m.o.MaxStoredBody:
		m.o.Logger.Warn("httpidem: response body too large to store; the key is released, so a retry runs the handler again",
			"key", k.key, "tenant", k.tenant, "method", req.Method, "path", req.URL.Path,
			"status", resp.Status, "bytes", len(resp.Body), "limit", m.o.MaxStoredBody)
		return nil, &unstored{status: resp.Status,
			reason: fmt.Sprintf("body of %d bytes, over MaxStoredBody %d", len(resp.Body), m.o.MaxStoredBody)}
	case resp.storedSize() > m.rt.MaxResultBytes():
		// Headers over the room kept for them: stored, the response would
		// be a permanent "result too large", replayed as a 500.
		m.o.Logger.Warn("httpidem: response too large to store with its headers; the key is released, so a retry runs the handler again",
			"key", k.key, "tenant", k.tenant, "method", req.Method, "path", req.URL.Path,
			"status", resp.Status, "bytes", resp.storedSize(), "limit", m.rt.MaxResultBytes())
		return nil, &unstored{status: resp.Status,
			reason: fmt.Sprintf("%d bytes with its headers, over the runtime's MaxResultBytes %d", resp.storedSize(), m.rt.MaxResultBytes())}
	}
	a.keep = true
	return resp, nil
}

func bodyReader(body []byte) io.ReadCloser {
	if len(body) == 0 {
		return http.NoBody
	}
	return io.NopCloser(bytes.NewReader(body))
}

// readBody reads the whole request body, at most MaxRequestBody bytes,
// within BodyTimeout. The buffer grows with what the client sends, never
// with what its Content-Length announces beyond firstRead: a client that
// announces a gigabyte and sends ten bytes holds a few kilobytes, and one
// that stalls is cut off at the deadline.
func (m *Middleware) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	limit := m.o.MaxRequestBody
	tooLarge := fmt.Errorf("%w: over the %d-byte limit", ErrBodyTooLarge, limit)
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(m.o.BodyTimeout)); err == nil {
		// Cleared once read: the handler's own reads are the server's
		// business (it reads from the copy anyway).
		defer rc.SetReadDeadline(time.Time{}) //nolint:errcheck // set above, so supported
	}
	// Without deadline support (a writer that wraps the server's and does
	// not unwrap), the server's own ReadTimeout bounds a stalled upload.
	var buf bytes.Buffer
	buf.Grow(int(min(max(r.ContentLength, 0), firstRead)))
	body := http.MaxBytesReader(w, r.Body, limit)
	m.reading.Add(1)
	defer m.reading.Add(-1)
	chunk := make([]byte, 32<<10)
	for {
		n, err := body.Read(chunk)
		buf.Write(chunk[:n])
		m.buffered.Add(int64(n))
		if err == io.EOF {
			break
		}
		if err != nil {
			m.buffered.Add(-int64(buf.Len()))
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				return nil, tooLarge
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, fmt.Errorf("%w: not sent within %v (Options.BodyTimeout)", ErrBodyRead, m.o.BodyTimeout)
			}
			return nil, fmt.Errorf("%w: %v", ErrBodyRead, err)
		}
	}
	m.buffered.Add(-int64(buf.Len()))
	return buf.Bytes(), nil
}

// firstRead is the most a body's buffer is sized for before it arrives.
const firstRead = 64 << 10

// BodyStats are the middleware's own counts of request bodies being read.
type BodyStats struct {
	Reading  int   // requests whose body is being read now
	Buffered int64 // bytes those bodies hold so far
}

// BodyStats returns how many request bodies are being read now, and the
// bytes they hold: what stalled and slow uploads cost.
func (m *Middleware) BodyStats() BodyStats {
	return BodyStats{Reading: int(m.reading.Load()), Buffered: m.buffered.Load()}
}

// fail answers with the middleware's own error response. 409 and 503 get
// Retry-After before OnError runs, so a custom OnError sends it too.
func (m *Middleware) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := StatusFor(err)
	if status == http.StatusConflict || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter)
	}
	m.o.OnError(w, withDocs(r, m.o.DocsURL), status, err)
}
