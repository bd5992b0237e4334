package cqrs

import (
	"context"
	"net/http"
	"strings"
)

type ctxKey uint8

const (
	requestIDKey ctxKey = iota + 1
	tenantKey
	activeKey // the key of the command the idempotency behaviour is running
)

// WithRequestID returns a copy of ctx that carries the request id of the
// commands dispatched with it. The id identifies one logical request: a
// client retrying the request sends the same id again. An empty id is the
// same as none.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// RequestID returns the request id ctx carries; ok is false when it carries
// none (or an empty one).
func RequestID(ctx context.Context) (id string, ok bool) {
	id, _ = ctx.Value(requestIDKey).(string)
	return id, id != ""
}

// WithTenant returns a copy of ctx that carries a tenant: commands of
// different tenants never share a key, even with the same request id. An
// empty tenant is the same as none. Take the tenant from the caller's
// authentication, not from anything the caller could choose freely.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey, tenant)
}

// Tenant returns the tenant ctx carries; ok is false when it carries none
// (or an empty one).
func Tenant(ctx context.Context) (tenant string, ok bool) {
	tenant, _ = ctx.Value(tenantKey).(string)
	return tenant, tenant != ""
}

// Headers read by [ContextFromHeaders].
const (
	// HeaderRequestID carries the request id. It must be chosen by the
	// client and be the same on every retry of a request: not a per-hop id
	// that a proxy generates.
	HeaderRequestID = "X-Request-Id"
	// HeaderTenant carries the tenant. Set it from authentication (a
	// gateway that replaces whatever the client sent), since a client that
	// can choose it can replay another tenant's results.
	HeaderTenant = "X-Tenant-Id"
)

// ContextFromHeaders returns ctx with the request id from the X-Request-Id
// header and the tenant from the X-Tenant-Id header, where they are present
// and not blank (surrounding spaces are trimmed). It does not validate them:
// the idempotency behaviour does, and reports [ErrInvalidRequestID] or
// [ErrInvalidTenant].
func ContextFromHeaders(ctx context.Context, h http.Header) context.Context {
	if id := strings.TrimSpace(h.Get(HeaderRequestID)); id != "" {
		ctx = WithRequestID(ctx, id)
	}
	if t := strings.TrimSpace(h.Get(HeaderTenant)); t != "" {
		ctx = WithTenant(ctx, t)
	}
	return ctx
}
