package flows

import "context"

// ReduceDef is a step built by [Reduce].
type ReduceDef[S, I any] struct {
	name   string
	items  func(S) []I
	fn     func(context.Context, S, I) (S, error)
	key    func(S, I) string
	keyNil bool
	opts   StepOptions
	before []func(context.Context, S, I) error
	after  []func(context.Context, S, I) error
}

// Reduce returns a step that folds fn over the items of a slice in the
// state: the state after each item is the input of the next. With
// Idempotent, each item runs once per key, so a retry of the flow replays
// the items that completed and runs only the rest. An item whose key
// another item of the same fold already used is skipped.
func Reduce[S, I any](name string, items func(S) []I, fn func(ctx context.Context, s S, item I) (S, error)) *ReduceDef[S, I] {
	return &ReduceDef[S, I]{name: name, items: items, fn: fn}
}

// Idempotent gives each item its own idempotency key, computed from the
// state before the item and the item (for example "refund:"+item.ID).
func (d *ReduceDef[S, I]) Idempotent(key func(S, I) string, opts StepOptions) *ReduceDef[S, I] {
	d.key, d.opts, d.keyNil = key, opts, key == nil
	return d
}

// OnBefore adds a hook that runs before fn for each item that executes.
func (d *ReduceDef[S, I]) OnBefore(h func(context.Context, S, I) error) *ReduceDef[S, I] {
	d.before = append(d.before, h)
	return d
}

// OnAfter adds a hook that runs after fn for each item that executes; the
// item's result is stored only once every OnAfter hook has passed.
func (d *ReduceDef[S, I]) OnAfter(h func(context.Context, S, I) error) *ReduceDef[S, I] {
	d.after = append(d.after, h)
	return d
}

func (d *ReduceDef[S, I]) stepName() string { return d.name }

func (d *ReduceDef[S, I]) isNil() bool { return d == nil }

func (d *ReduceDef[S, I]) snapshot() Stepper[S] {
	c := *d
	c.before = append([]func(context.Context, S, I) error(nil), d.before...)
	c.after = append([]func(context.Context, S, I) error(nil), d.after...)
	return &c
}

func (d *ReduceDef[S, I]) check() error {
	switch {
	case d.items == nil:
		return errorf("reduce step %q has a nil items function", d.name)
	case d.fn == nil:
		return errorf("reduce step %q has a nil function", d.name)
	case d.keyNil:
		return errorf("reduce step %q: Idempotent with a nil key function", d.name)
	}
	for _, h := range append(append([]func(context.Context, S, I) error{}, d.before...), d.after...) {
		if h == nil {
			return errorf("reduce step %q has a nil hook", d.name)
		}
	}
	return checkStepOptions(d.name, d.opts)
}

// body runs the hooks and the function for one item: what executes when
// the item runs.
func (d *ReduceDef[S, I]) body(ctx context.Context, s S, item I) (S, error) {
	for _, h := range d.before {
		if err := h(ctx, s, item); err != nil {
			return s, err
		}
	}
	out, err := d.fn(ctx, s, item)
	if err != nil {
		return out, err
	}
	for _, h := range d.after {
		if err := h(ctx, out, item); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (d *ReduceDef[S, I]) run(ctx context.Context, x *exec[S], s S) (S, error) {
	var done map[string]bool // keys handled in this run
	for i, item := range d.items(s) {
		if err := ctx.Err(); err != nil {
			return s, itemError(d.name, i, err)
		}
		body := func(ctx context.Context, s S) (S, error) { return d.body(ctx, s, item) }
		var err error
		if d.key == nil {
			s, err = body(ctx, s)
		} else {
			key := d.key(s, item)
			if done[key] {
				// The same key twice in one fold: its side effect is done,
				// and replaying its state would undo the items since.
				continue
			}
			if s, err = x.once(ctx, d.name, key, d.opts, s, body); err == nil {
				if done == nil {
					done = map[string]bool{}
				}
				done[key] = true
			}
		}
		if err != nil {
			return s, itemError(d.name, i, err)
		}
	}
	return s, nil
}
