package cqrs

// Reading and forgetting what the idempotency behaviour keeps for a
// command, by tenant and request id, on the behaviour's runtime (its own
// private one too).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemrt/idem"
)

// Processed reports whether the command with request id requestID in
// tenant was processed: its handler succeeded and its result is kept, so
// a dispatch with the same request id gets it back without running the
// handler (until ProcessedTTL ends). A command whose result could not be
// encoded (an *idem.CodecError, kept like a result since its handler ran)
// is processed too, on every instance.
//
// A command in progress, never dispatched, failed (failures are never
// kept), forgotten or expired is not processed: false and a nil error. Use
// Payload to tell a command in progress apart (idem.ErrInProgress).
func (p *Idempotency) Processed(ctx context.Context, tenant, requestID string) (bool, error) {
	_, err := p.Payload(ctx, tenant, requestID)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, idem.ErrNotFound) || errors.Is(err, idem.ErrInProgress):
		return false, nil
	case idem.IsPermanent(err):
		return true, nil
	}
	return false, err
}

// Payload returns the stored result of the command with request id
// requestID in tenant, as the JSON its handler's result was stored as
// (decode it into the handler's result type). It runs nothing.
//
// It fails with an error matching idem.ErrNotFound when the command was
// not processed (see Processed), idem.ErrInProgress while it runs here or
// on another instance, and, for a result that could not be encoded, with
// the kept error: permanent (idem.IsPermanent), with an *idem.CodecError
// that errors.As finds, on the instance that ran the command as on any
// other. A request id or tenant that cannot be part of a key fails as in
// [Key].
func (p *Idempotency) Payload(ctx context.Context, tenant, requestID string) ([]byte, error) {
	key, err := Key(tenant, requestID)
	if err != nil {
		return nil, err
	}
	raw, err := idem.Get[json.RawMessage](ctx, p.rt, key)
	if err != nil {
		return nil, fmt.Errorf("cqrs: %w", err)
	}
	return raw, nil
}

// Forget deletes what is kept of the command with request id requestID in
// tenant, so that the next dispatch with that request id runs its handler
// again. Forgetting a command that was not processed is a no-op; while the
// command runs, Forget fails with an error matching idem.ErrConflict.
// Other instances that share the store drop the result from their caches
// when the store announces the delete (memstore, redisstore and pgstore
// do; see idem.Runtime.Forget).
func (p *Idempotency) Forget(ctx context.Context, tenant, requestID string) error {
	key, err := Key(tenant, requestID)
	if err != nil {
		return err
	}
	if err := p.rt.Forget(ctx, key); err != nil {
		return fmt.Errorf("cqrs: %w", err)
	}
	return nil
}
