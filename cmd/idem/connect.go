package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
)

// conn is the Redis client and store a command works on.
type conn struct {
	client redis.UniversalClient
	store  *redisstore.Store
	addr   string // for messages: the server, or the cluster's seed nodes
}

// redisError is a Redis that could not be reached (connecting), or whose
// request failed: exit 1.
type redisError struct {
	addr       string
	connecting bool
	err        error
}

func (e *redisError) Error() string {
	if e.connecting {
		return fmt.Sprintf("cannot reach Redis at %s: %v", e.addr, e.err)
	}
	return fmt.Sprintf("Redis at %s: %v", e.addr, e.err)
}

func (e *redisError) Unwrap() error { return e.err }

// newClient returns the client of -redis or -cluster, each request bounded
// by -timeout, and the address to name in messages.
func newClient(cfg *config) (redis.UniversalClient, string, error) {
	if cfg.cluster != "" {
		var opts *redis.ClusterOptions
		if strings.Contains(cfg.cluster, "://") {
			var err error
			if opts, err = redis.ParseClusterURL(cfg.cluster); err != nil {
				return nil, "", usagef("-cluster %q: %v", cfg.cluster, err)
			}
		} else {
			opts = &redis.ClusterOptions{}
			for _, a := range strings.Split(cfg.cluster, ",") {
				if a = strings.TrimSpace(a); a != "" {
					opts.Addrs = append(opts.Addrs, a)
				}
			}
			if len(opts.Addrs) == 0 {
				return nil, "", usagef("-cluster %q names no node", cfg.cluster)
			}
		}
		opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = cfg.timeout, cfg.timeout, cfg.timeout
		opts.DialerRetries = 1 // a refused dial fails the call at once, with its own error
		return redis.NewClusterClient(opts), "cluster " + strings.Join(opts.Addrs, ","), nil
	}
	opts, err := redis.ParseURL(cfg.redisURL)
	if err != nil {
		return nil, "", usagef("-redis %q: %v", cfg.redisURL, err)
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = cfg.timeout, cfg.timeout, cfg.timeout
	opts.DialerRetries = 1
	return redis.NewClient(opts), opts.Addr, nil
}

// connect reaches Redis (within -timeout) and opens the store on it.
func connect(ctx context.Context, cfg *config) (*conn, error) {
	client, addr, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	st, err := redisstore.New(ctx, client, redisstore.Options{KeyPrefix: cfg.storePrefix, Timeout: cfg.timeout})
	if err != nil {
		client.Close()
		return nil, &redisError{addr: addr, connecting: true, err: err}
	}
	return &conn{client: client, store: st, addr: addr}, nil
}

func (c *conn) close() {
	c.store.Close()
	c.client.Close()
}

// failed wraps an error of a request to Redis with the server's address.
func (c *conn) failed(err error) error {
	return &redisError{addr: c.addr, err: err}
}

// scopePrefix returns the key prefix that clear and stats cover.
func (cfg *config) scopePrefix() string {
	switch {
	case cfg.allVersions:
		return store.KeyPrefix + store.EscapeSegment(cfg.namespace) + ":" + cfg.keyPrefix
	case cfg.scoped:
		return store.BuildKey(cfg.keyPrefix, store.Scope{Namespace: cfg.namespace, Version: cfg.version})
	}
	return cfg.keyPrefix
}
