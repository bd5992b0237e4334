package httpidem

import "net/http"

// What is stored: a response is replayed for the key's TTL only if it is
// the operation's settled outcome. Anything a retry could change (a fault,
// a limit, credentials, the request's shape, the route) releases the key,
// so that the next attempt runs.

// DefaultStoreStatus is the default Options.StoreStatus. It stores 2xx,
// 3xx and 4xx outcomes (201 created, 402 declined, 409 or 410 refused by
// the business rules) and refuses the statuses that say the operation did
// not settle, so that a retry with the same key runs:
//
//   - 1xx and 5xx: not a final outcome, or a fault to retry;
//   - 307, 308: the client repeats the request, key included, at another
//     URL, where a stored redirect would make it a 422;
//   - 400, 411, 413, 414, 415, 417, 431: the request was malformed or
//     framed wrongly; the corrected request must run, not get 422 or the
//     old answer;
//   - 422: most often a validation error (many frameworks answer invalid
//     input with 422), which the corrected request, with another body,
//     would get as the middleware's own 422 (key reused); a refusal has no
//     side effect, so running the same request again is harmless;
//   - 406, 412, 428: the answer turns on a request header the fingerprint
//     does not cover (Accept, If-Match, If-None-Match); the retry with
//     the header fixed must run, not get the old answer;
//   - 401, 403: the credentials were missing, stale or short of a
//     permission that can be granted;
//   - 404, 405: the route or resource is not there (yet);
//   - 408, 421, 425, 429: timing and routing of this attempt (timed out,
//     wrong server, too early, rate limited), not the operation.
//
// Wrap it to change one entry (a 422 that is a business outcome, here):
//
//	StoreStatus: func(s int) bool { return s == http.StatusUnprocessableEntity || httpidem.DefaultStoreStatus(s) }
func DefaultStoreStatus(status int) bool {
	if status < 200 || status >= 500 {
		return false
	}
	switch status {
	case http.StatusTemporaryRedirect, http.StatusPermanentRedirect,
		http.StatusBadRequest, http.StatusLengthRequired, http.StatusRequestEntityTooLarge,
		http.StatusRequestURITooLong, http.StatusUnsupportedMediaType, http.StatusExpectationFailed,
		http.StatusRequestHeaderFieldsTooLarge, http.StatusUnprocessableEntity,
		http.StatusNotAcceptable, http.StatusPreconditionFailed, http.StatusPreconditionRequired,
		http.StatusUnauthorized, http.StatusForbidden,
		http.StatusNotFound, http.StatusMethodNotAllowed,
		http.StatusRequestTimeout, http.StatusMisdirectedRequest, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return true
}

// NoStore marks the response being written to w as not to be stored,
// whatever its status: it still goes to its client, the key is released
// and the next request with the key runs the handler again (one request
// waiting for this one is handed the key at once). Call it from a handler
// behind the middleware, before or after writing the response, for an
// answer a retry may change (a dependency was down, an upstream said "try
// later" with a 200).
//
// NoStore finds the middleware's writer through writers that wrap it and
// have an Unwrap() http.ResponseWriter method (as http.ResponseController
// expects of them). It reports whether it did: on any other writer (no
// middleware in front of the handler, or a wrapper without Unwrap) it does
// nothing and returns false.
func NoStore(w http.ResponseWriter) bool {
	// Bounded, in case a chain of Unwraps loops.
	for range 64 {
		switch v := w.(type) {
		case *recorder:
			v.noStore = true
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return false
		}
	}
	return false
}

// DefaultRouteMiss is the default Options.RouteMiss: a 404 or 405 whose
// request has no Pattern is a router's answer to a request it matched no
// route for. net/http's ServeMux (Go 1.22 and later) and chi set
// Request.Pattern on the request they route when a route matches, and a
// ServeMux clears it on a miss. r is the request the handler got, after it
// returned.
//
// It tells a miss from a handler's own 404 or 405 in these shapes:
//
//   - the middleware per route, mux.Handle("POST /payments", mw.Handler(h)):
//     misses never reach it; a handler's 404 has its route's Pattern;
//   - around a whole ServeMux, mw.Handler(mux), also one mounted under a
//     route of another mux, or inside http.StripPrefix:
//     http.StripPrefix("/api", mw.Handler(mux));
//   - in chi's Use, on a router that serves the request itself (not under a
//     route of another router).
//
// In other shapes it errs one way or the other; set Options.RouteMiss, or
// mark misses with [NoStore] in the router's not-found handlers:
//
//   - no router, or one that does not set Pattern (gorilla/mux,
//     httprouter), and chi wrapped from outside, mw.Handler(chiRouter):
//     every 404 and 405 counts as a miss, so a handler's own is never
//     stored, whatever StoreStatus says;
//   - chi's Use on a router mounted under a ServeMux route, and
//     http.StripPrefix (or any handler that routes a copy of the request)
//     between the middleware and a ServeMux, and a miss inside a chi
//     sub-router (Mount, Route): the request keeps the outer Pattern, so a
//     miss counts as the handler's answer and StoreStatus decides (the
//     default stores no 404 or 405).
func DefaultRouteMiss(status int, r *http.Request) bool {
	return (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) && r.Pattern == ""
}
