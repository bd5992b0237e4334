// Package httpidem is net/http middleware for the Idempotency-Key header
// (IETF httpapi draft "The Idempotency-Key HTTP Header Field"): a request
// that carries a key runs its handler once, and every other request from
// the same caller with the key gets the first one's response back.
//
//	mw, err := httpidem.New(httpidem.Options{})
//	...
//	defer mw.Close(ctx)
//	mux.Handle("POST /payments", mw.Handler(payments))
//
// [Middleware.Handler] has the shape routers take for middleware
// (func(http.Handler) http.Handler), so it works with net/http's ServeMux and
// with routers such as chi. Wrap each route, as above: see "Routers" below
// for what changes when it wraps a whole router.
//
// # What a request gets
//
// The middleware applies to Options.Methods (POST and PATCH by default);
// other requests pass through. For a request it applies to:
//
//   - no Idempotency-Key header: 400 (unless Options.Optional, which lets it
//     pass through); an empty, oversized (over [MaxKeyLen] bytes), repeated
//     or malformed key: 400 (see [ParseKey]; quoted and bare keys are both
//     accepted);
//   - a body over Options.MaxRequestBody: 413;
//   - the first request with a key runs the handler; its response (status,
//     headers, body) is stored if it is a settled outcome: see
//     [DefaultStoreStatus] (Options.StoreStatus overrides it), and below;
//   - a later request with the key gets the stored response, marked with
//     the header Idempotent-Replayed: true, without running the handler;
//   - a request with the key while the first is in flight waits for its
//     response (marked as a replay), up to Options.Settle (10s by default)
//     and never past its own request's context; then it gets 409 with
//     Retry-After. With Options.FailFast it gets the 409 at once;
//   - a request with the key but a different fingerprint (method, path and
//     query, scope, SHA-256 of the body, by default; see
//     Options.Fingerprint) gets 422, whether the first is in flight or done,
//     whether its response comes from the cache or the store;
//   - a response that is not stored still goes to its own client, and the
//     key is released: the next request with it runs the handler again (a
//     waiting request is handed the key and runs it at once). A handler
//     panic releases the key too; its request, and the requests waiting for
//     it, get 500, and the panic is logged with its stack
//     (panic(http.ErrAbortHandler) aborts the response as net/http does);
//   - a request whose handler ran gets the handler's response even when
//     storing it did not finish (its context ended first, the store
//     failed, the runtime closed); a warning is logged, and the runtime
//     goes on storing it. A 503 always means the handler did not run: the
//     runtime is closed or overloaded, the store is down, or the request's
//     context ended before it could run.
//
// A response is not stored when StoreStatus refuses its status (5xx, 429,
// 400, 401, 404, 422... by default), when the handler called [NoStore],
// when it is a router's own 404 or 405 (a route miss, see
// Options.RouteMiss), when it streamed, or when its body is over
// Options.MaxStoredBody. The handler's headers are stored apart from those
// outer middleware set, which belong to each request: a replay gets its own
// request's outer headers, with the handler's added (or replacing them
// where the handler replaced them).
//
// Every response to a request with a parsed key carries the key back in an
// Idempotency-Key header. Errors of the middleware itself are answered by
// Options.OnError, [WriteProblem] by default: application/problem+json
// (RFC 9457) with a type URI per problem that links to its documentation
// (Options.DocsURL), with the status [StatusFor] gives.
//
// # Scopes
//
// A key belongs to a scope, and the same key in two scopes is two keys:
// the idem key is store.BuildKey(key, {Namespace: scope, Version}), that is
// ff:idemp:<scope>:<version>:<key>. The scope is Options.Tenant's answer
// when it is set (take it from the authenticated principal); by default it
// is a digest of the request's credentials (the headers named in
// Options.CredentialHeaders, Authorization and X-Api-Key by default, and
// the cookies named in Options.CredentialCookies), so that one caller never
// gets another's response. Options.SharedScope puts every request in one
// scope, for endpoints without credentials.
//
// Requests that carry none of the credentials share one anonymous scope,
// where anyone who sends a key gets the response stored for it; the
// middleware logs a warning the first time. Name the header or cookie your
// callers authenticate with (a gateway's identity header, a session
// cookie), or set Tenant; set Tenant too where credentials change from one
// attempt to the next (signed requests such as AWS SigV4, Digest, Hawk),
// or each retry would be a caller of its own.
//
// # Routers
//
// net/http's ServeMux and chi set Request.Pattern on the request they
// route when a route matches. The handler gets a request of its own; once
// it returns, Options.RouteMiss says whether the response is a route miss,
// never stored, so that the corrected request with the same key runs. The
// default, [DefaultRouteMiss], takes a 404 or 405 whose request has no
// Pattern for one. Wrapping per route (mux.Handle("POST /payments",
// mw.Handler(h))) is the recommended shape: misses and the router's
// redirects never reach the middleware, and a handler's own 404 (its
// route's pattern set) is stored if StoreStatus says so. Around a whole
// ServeMux, or in chi's Use (which hands the middleware the request chi
// then routes), misses are recognised. [DefaultRouteMiss] lists the shapes
// it gets wrong (no router, chi wrapped from outside or under a ServeMux
// route, http.StripPrefix in between); set RouteMiss for those, or mark
// misses with [NoStore] in the router's not-found handlers.
//
// # How the handler runs
//
// The handler runs inside idem.Do's function, on its request's goroutine,
// against a recorder: the response is buffered, then written to the client
// of every request with the key, the first included. The handler gets a
// copy of the request whose body is the buffered body and whose context
// keeps the request's values and deadline but not its cancellation: if the
// client goes away, the handler goes on and its response is stored for the
// retry.
//
// A handler that flushes (http.Flusher, or http.ResponseController), or
// sends Content-Type text/event-stream, streams instead: what it wrote so
// far and everything after goes straight to net/http's writer, which
// sends it when the handler flushes or its buffers (about 4 KiB) fill, as
// without the middleware: an event-stream handler must flush each event.
// A streamed response is never stored; the key is released when the
// handler returns. http.ResponseController's SetWriteDeadline,
// SetReadDeadline and EnableFullDuplex reach the real connection, and
// io.Copy to the writer uses its ReadFrom. Trailers, 1xx responses and
// hijacking are not supported behind the middleware.
//
// # Reading what is stored
//
// [Middleware.Response] returns the response stored for a key and scope
// without running anything (idem.ErrNotFound when there is none,
// idem.ErrInProgress while a request with the key runs),
// [Middleware.State] the key's state, and [Middleware.Forget] deletes the
// response so that the next request runs. [Middleware.Scope] gives the
// scope of a request, for a handler that sees the caller's request.
//
// With no runtime configured, the middleware owns an idem runtime on the
// in-memory store (close it with [Middleware.Close]); give it a runtime on
// the Redis store (store/redisstore) and every instance of a service shares
// the keys. See docs/http.md.
package httpidem
