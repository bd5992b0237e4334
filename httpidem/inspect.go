package httpidem

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
)

// Reading and forgetting what the middleware holds for a key, without
// running anything: by the key a client sent and its scope
// ([Middleware.Scope]).

// StoredResponse is the response stored for a key: what a request with the
// key gets replayed.
type StoredResponse struct {
	Status int
	// Header holds the headers the handler set or added. A replay sends
	// them on top of those its own request's outer middleware sets (see
	// docs/http.md, "What is stored").
	Header http.Header
	Body   []byte
}

// Response returns the response stored for key in scope, without running
// anything: what a request with the key would get replayed. key is the
// key as [ParseKey] returns it (`"abc"` and abc are the key abc); scope is
// the request's ([Middleware.Scope]).
//
// It fails with an error matching idem.ErrNotFound when no response is
// stored (the key never ran, its response was not kept, was forgotten, or
// expired) and idem.ErrInProgress while a request with the key runs, here
// or in another instance (see idem.Get for the stores that can tell the
// two apart), and with idem.ErrInvalidKey for a key and scope that cannot
// be a key.
func (m *Middleware) Response(ctx context.Context, key, scope string) (*StoredResponse, error) {
	resp, err := idem.Get[*response](ctx, m.rt, m.storeKey(key, scope), idem.WithCodec(gobCodec{}))
	if err != nil {
		return nil, fmt.Errorf("httpidem: %w", err)
	}
	return resp.stored(), nil
}

// stored returns a copy of resp (the runtime may share resp between
// callers) as a StoredResponse.
func (resp *response) stored() *StoredResponse {
	h := http.Header{}
	for k, vs := range resp.Header {
		if len(vs) > 0 {
			h[k] = slices.Clone(vs)
		}
	}
	for k, vs := range resp.Append {
		h[k] = slices.Concat(h[k], vs)
	}
	return &StoredResponse{Status: resp.Status, Header: h, Body: slices.Clone(resp.Body)}
}

// DecodeResponse reads the value of a record the middleware stored (the
// bytes a store keeps for its key: store.Record.Value) as the response a
// replay sends. It is for tools that read a store directly, such as the
// admin command cmd/idem; a service reads its responses with
// [Middleware.Response]. A value that is not a stored response (another
// front end's, or corrupt) is an error.
func DecodeResponse(value []byte) (*StoredResponse, error) {
	var resp response
	if err := (gobCodec{}).Unmarshal(value, &resp); err != nil {
		return nil, fmt.Errorf("httpidem: not a stored response: %w", err)
	}
	if resp.Status < 100 || resp.Status > 999 {
		return nil, fmt.Errorf("httpidem: not a stored response: status %d", resp.Status)
	}
	return resp.stored(), nil
}

// State returns the state of key in scope, as idem.Runtime.State reports
// it: absent, in progress (with the lease left and whether this process
// holds it), or completed (with the record's times and size). Its Key is
// the idem key the middleware uses (store.BuildKey of key, with scope as
// its namespace and Options.Version as its version).
func (m *Middleware) State(ctx context.Context, key, scope string) (idem.KeyState, error) {
	st, err := m.rt.State(ctx, m.storeKey(key, scope))
	if err != nil {
		return st, fmt.Errorf("httpidem: %w", err)
	}
	return st, nil
}

// Forget deletes the response stored for key in scope, so that the next
// request with the key runs the handler again. Forgetting a key that holds
// nothing is a no-op; while a request with the key runs, Forget fails with
// an error matching idem.ErrConflict. Other instances that share the store
// drop the response from their caches when the store announces the delete
// (memstore, redisstore and pgstore do; see idem.Runtime.Forget).
func (m *Middleware) Forget(ctx context.Context, key, scope string) error {
	if err := m.rt.Forget(ctx, m.storeKey(key, scope)); err != nil {
		return fmt.Errorf("httpidem: %w", err)
	}
	return nil
}

// storeKey returns the idem key of key in scope, as the middleware builds
// it for a request.
func (m *Middleware) storeKey(key, scope string) string {
	if key == "" {
		return "" // not a key: refused by the runtime as invalid
	}
	return store.BuildKey(key, store.Scope{Namespace: scope, Version: m.o.Version})
}
