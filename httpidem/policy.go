package httpidem

import "net/http"

// What is stored: a response is replayed for the key's TTL only if it is
// the operation's settled outcome. Anything a retry could change (a fault,
// a limit, credentials, the request's shape, the route) releases the key,
// so that the next attempt runs.

// DefaultStoreStatus is the default Options.StoreStatus. It stores 2xx,
// 3xx and 4xx outcomes (201 created, 402 declined, 409 or 422 refused by
// the business rules) and refuses the statuses that say the operation did
// not settle, so that a retry with the same key runs:
//
//   - 1xx and 5xx: not a final outcome, or a fault to retry;
//   - 307, 308: the client repeats the request, key included, at another
//     URL, where a stored redirect would make it a 422;
//   - 400, 411, 413, 414, 415, 417, 431: the request was malformed or
//     framed wrongly; the corrected request must run, not get 422 or the
//     old answer;
//   - 401, 403: the credentials were missing, stale or short of a
//     permission that can be granted;
//   - 404, 405: the route or resource is not there (yet);
//   - 408, 421, 425, 429: timing and routing of this attempt (timed out,
//     wrong server, too early, rate limited), not the operation.
//
// Wrap it to change one entry:
//
//	StoreStatus: func(s int) bool { return s == http.StatusNotFound || httpidem.DefaultStoreStatus(s) }
func DefaultStoreStatus(status int) bool {
	if status < 200 || status >= 500 {
		return false
	}
	switch status {
	case http.StatusTemporaryRedirect, http.StatusPermanentRedirect,
		http.StatusBadRequest, http.StatusLengthRequired, http.StatusRequestEntityTooLarge,
		http.StatusRequestURITooLong, http.StatusUnsupportedMediaType, http.StatusExpectationFailed,
		http.StatusRequestHeaderFieldsTooLarge,
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

// routeMiss reports whether a response is a router's own 404 or 405 for a
// request it matched no route for: net/http's ServeMux (Go 1.22 and later)
// and chi set Request.Pattern on the request they route when a route
// matches, and a ServeMux clears it on a miss. req is the request the
// handler got, after it returned.
func routeMiss(status int, req *http.Request) bool {
	return (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) && req.Pattern == ""
}
