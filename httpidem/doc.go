// Package httpidem is net/http middleware for the Idempotency-Key header
// (IETF httpapi draft "The Idempotency-Key HTTP Header Field"): a request
// that carries a key runs its handler once, and every other request with the
// key gets the first one's response back.
//
//	mw, err := httpidem.New(httpidem.Options{})
//	...
//	defer mw.Close(ctx)
//	mux.Handle("POST /payments", mw.Handler(payments))
//
// [Middleware.Handler] has the shape routers take for middleware
// (func(http.Handler) http.Handler), so it works with net/http's ServeMux and
// with routers such as chi.
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
//     headers, body) is stored, if Options.StoreStatus accepts the status
//     (2xx–4xx by default) and the body fits Options.MaxStoredBody;
//   - a later request with the key gets the stored response, marked with
//     the header Idempotent-Replayed: true, without running the handler;
//   - a request with the key while the first is in flight waits up to
//     Options.Settle for its response (marked as a replay), then gets 409;
//     with Settle 0, the default, it gets 409 at once;
//   - a request with the key but a different fingerprint (method, path and
//     query, tenant, SHA-256 of the body) gets 422, whether the first is in
//     flight or done, whether its response comes from the cache or the
//     store;
//   - a response that is not stored (a 5xx, a body too large) still goes to
//     its own client, and the key is released: the next request with it
//     runs the handler again (a waiting request is handed the key and runs
//     it at once). A handler panic releases the key too; its request, and
//     the requests waiting for it, get 500, and the panic is logged with its
//     stack (panic(http.ErrAbortHandler) aborts the response as net/http
//     does).
//
// Errors of the middleware itself are answered by Options.OnError,
// [WriteProblem] (application/problem+json) by default, with the status
// [StatusFor] gives.
//
// # Keys and tenants
//
// A key is scoped per tenant (Options.Tenant) with store.BuildKey:
// ff:idemp:<tenant>:<version>:<key>, the tenant and version escaped, so the
// same key in two tenants is two keys.
//
// # How the handler runs
//
// The handler runs inside idem.Do's function, against a recorder: the
// response is buffered, then written to the client of every request with
// the key, the first included. The handler gets a copy of the request whose
// body is the buffered body and whose context keeps the request's values and
// deadline but not its cancellation: if the client goes away, the handler
// goes on and its response is stored for the retry. Streaming, trailers,
// 1xx responses and hijacking are not supported behind the middleware.
//
// With no runtime configured, the middleware owns an idem runtime on the
// in-memory store (close it with [Middleware.Close]); give it a runtime on
// the Redis store (store/redisstore) and every instance of a service shares
// the keys. See docs/http.md.
package httpidem
