package cqrs

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/idemrt/idem"
)

// Kind tells commands from queries.
type Kind uint8

const (
	// Command is a message that changes state: the idempotency behaviour
	// applies to it.
	Command Kind = iota + 1
	// Query is a message that only reads: behaviours see it, the
	// idempotency behaviour lets it pass.
	Query
)

func (k Kind) String() string {
	switch k {
	case Command:
		return "command"
	case Query:
		return "query"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Message is one command or query on its way through the pipeline.
// Behaviours read it; they should not change it.
type Message struct {
	// Kind is Command or Query, as the handler was registered.
	Kind Kind
	// Name is the message's Go type with its package path, for example
	// "example.com/shop/orders.PlaceOrder" (or "*example.com/shop/orders.PlaceOrder").
	Name string
	// Value is the message as dispatched.
	Value any

	// once runs the rest of the pipeline under idem.Do, typed with the
	// handler's result type (set by Dispatch).
	once onceFunc
}

// Next runs the rest of the pipeline: the next behaviour, or the handler.
type Next func(ctx context.Context) (any, error)

// Behaviour is a step of the pipeline around every message: logging,
// validation, transactions, idempotency. Handle does its work and calls next
// to go on (or returns without calling it, to short-circuit). Its result
// must be the handler's result type, or nil for the zero value.
type Behaviour interface {
	Handle(ctx context.Context, msg *Message, next Next) (any, error)
}

// BehaviourFunc is a function that is a [Behaviour].
type BehaviourFunc func(ctx context.Context, msg *Message, next Next) (any, error)

// Handle calls f.
func (f BehaviourFunc) Handle(ctx context.Context, msg *Message, next Next) (any, error) {
	return f(ctx, msg, next)
}

// Bus routes each message to the one handler registered for its type,
// through the behaviours. The zero Bus is ready to use; a Bus is safe for
// concurrent use, and must not be copied after first use.
type Bus struct {
	mu         sync.RWMutex
	handlers   map[reflect.Type]*handler
	behaviours []Behaviour // replaced, never changed in place
}

type handler struct {
	kind   Kind
	name   string
	result reflect.Type
	call   func(ctx context.Context, msg any) (any, error)
}

// Use adds behaviours around every message dispatched from now on. The
// first behaviour added is the outermost: it sees the message first and the
// result last.
func (b *Bus) Use(behaviours ...Behaviour) error {
	if b == nil {
		return fmt.Errorf("%w: cqrs: Use on a nil *Bus", idem.ErrInvalidArgument)
	}
	for i, bh := range behaviours {
		if bh == nil || isNilPointer(bh) {
			return fmt.Errorf("%w: cqrs: Use: behaviour %d is nil", idem.ErrInvalidArgument, i)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.behaviours = append(slices.Clip(b.behaviours), behaviours...)
	return nil
}

// isNilPointer reports a typed nil (a nil *Idempotency in the interface).
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Interface, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

// HandleCommand registers h as the handler of commands of type C, which
// return an R. Each type has one handler: registering a second one for C
// (as a command or a query) fails with [ErrDuplicateHandler]. C must be a
// concrete type, not an interface.
func HandleCommand[C, R any](b *Bus, h func(ctx context.Context, cmd C) (R, error)) error {
	return register(b, Command, h)
}

// HandleQuery registers h as the handler of queries of type Q, which return
// an R. Queries go through the behaviours like commands, but the
// idempotency behaviour lets them pass: they run every time.
func HandleQuery[Q, R any](b *Bus, h func(ctx context.Context, q Q) (R, error)) error {
	return register(b, Query, h)
}

func register[M, R any](b *Bus, kind Kind, h func(context.Context, M) (R, error)) error {
	typ := reflect.TypeFor[M]()
	name := typeName(typ)
	switch {
	case b == nil:
		return fmt.Errorf("%w: cqrs: registering %s on a nil *Bus", idem.ErrInvalidArgument, name)
	case h == nil:
		return fmt.Errorf("%w: cqrs: nil handler for %s", idem.ErrInvalidArgument, name)
	case typ.Kind() == reflect.Interface:
		return fmt.Errorf("%w: cqrs: %s is an interface; register a concrete message type", idem.ErrInvalidArgument, name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.handlers[typ]; old != nil {
		return fmt.Errorf("%w: %s already has a %s handler", ErrDuplicateHandler, name, old.kind)
	}
	for t, old := range b.handlers {
		if old.name == name {
			// Two types with one name (types declared in functions): the
			// name is what fingerprints a command, so they would be taken
			// for each other.
			return fmt.Errorf("%w: %s names two types (%v and %v); declare them at package level with distinct names",
				ErrDuplicateHandler, name, t, typ)
		}
	}
	if b.handlers == nil {
		b.handlers = make(map[reflect.Type]*handler)
	}
	b.handlers[typ] = &handler{
		kind:   kind,
		name:   name,
		result: reflect.TypeFor[R](),
		call: func(ctx context.Context, msg any) (any, error) {
			return h(ctx, msg.(M))
		},
	}
	return nil
}

// Dispatch sends msg through the bus's behaviours to its handler and
// returns the handler's result. R must be the result type the handler was
// registered with; M is inferred from msg:
//
//	order, err := cqrs.Dispatch[Order](ctx, bus, PlaceOrder{SKU: "book"})
//
// Errors: [ErrNoHandler] when no handler is registered for the message's
// type, [ErrResultType] when R is not its result type, ctx.Err() when ctx
// has ended before anything runs, and otherwise the error of a behaviour or
// of the handler.
func Dispatch[R, M any](ctx context.Context, b *Bus, msg M) (R, error) {
	var zero R
	typ := reflect.TypeFor[M]()
	if typ.Kind() == reflect.Interface {
		if any(msg) == nil {
			return zero, fmt.Errorf("%w: cqrs: Dispatch of a nil message", idem.ErrInvalidArgument)
		}
		typ = reflect.TypeOf(msg)
	}
	if b == nil {
		return zero, fmt.Errorf("%w: cqrs: Dispatch of %s on a nil *Bus", idem.ErrInvalidArgument, typeName(typ))
	}
	b.mu.RLock()
	h, behaviours := b.handlers[typ], b.behaviours
	b.mu.RUnlock()
	if h == nil {
		return zero, fmt.Errorf("%w: %s", ErrNoHandler, typeName(typ))
	}
	if want := reflect.TypeFor[R](); h.result != want {
		return zero, fmt.Errorf("%w: the handler of %s returns %s; Dispatch asked for %s", ErrResultType, h.name, h.result, want)
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	p := &pipeline{
		msg:        &Message{Kind: h.kind, Name: h.name, Value: msg, once: once[R]},
		h:          h,
		behaviours: behaviours,
	}
	res, err := p.next(0)(ctx)
	if err != nil {
		return zero, err
	}
	return asResult[R](h.name, res)
}

// pipeline is one dispatch's chain of behaviours and its handler.
type pipeline struct {
	msg        *Message
	h          *handler
	behaviours []Behaviour
}

func (p *pipeline) next(i int) Next {
	return func(ctx context.Context) (any, error) {
		if i == len(p.behaviours) {
			return p.h.call(ctx, p.msg.Value)
		}
		return p.behaviours[i].Handle(ctx, p.msg, p.next(i+1))
	}
}

// asResult turns a pipeline's result into an R; nil is the zero R.
func asResult[R any](name string, res any) (R, error) {
	var zero R
	if res == nil {
		return zero, nil
	}
	r, ok := res.(R)
	if !ok {
		return zero, fmt.Errorf("%w: the pipeline of %s returned a %T, not a %s", ErrResultType, name, res, reflect.TypeFor[R]())
	}
	return r, nil
}

// typeName names a message type with the package path of every named type
// in it, so that []*text/template.Template and []*html/template.Template
// differ.
func typeName(t reflect.Type) string {
	if t.Name() != "" {
		if t.PkgPath() != "" {
			return t.PkgPath() + "." + t.Name()
		}
		return t.Name()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + typeName(t.Elem())
	case reflect.Slice:
		return "[]" + typeName(t.Elem())
	case reflect.Array:
		return fmt.Sprintf("[%d]%s", t.Len(), typeName(t.Elem()))
	case reflect.Map:
		return "map[" + typeName(t.Key()) + "]" + typeName(t.Elem())
	case reflect.Chan:
		return t.ChanDir().String() + " " + typeName(t.Elem())
	}
	return t.String()
}
