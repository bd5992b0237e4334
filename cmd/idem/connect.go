package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
	"github.com/idemrt/idem/store/redisstore"
)

// adminStore is what the commands need of a store: read a key's entry,
// list keys, forget one. The Redis and PostgreSQL stores both have it.
type adminStore interface {
	store.Inspector
	store.Scanner
	Forget(ctx context.Context, key string) error
}

// conn is the store a command works on, and what it runs on.
type conn struct {
	store adminStore
	redis *redisstore.Store // nil on PostgreSQL
	close func()
	kind  string // "Redis" or "PostgreSQL", for messages
	addr  string // the server, the cluster's seed nodes, or the table
}

// storeError is a store that could not be reached (connecting), or whose
// request failed: exit 1.
type storeError struct {
	kind, addr string
	connecting bool
	err        error
}

func (e *storeError) Error() string {
	if e.connecting {
		return fmt.Sprintf("cannot reach %s at %s: %s", e.kind, e.addr, unprefixed(e.err))
	}
	return fmt.Sprintf("%s at %s: %s", e.kind, e.addr, unprefixed(e.err))
}

// unprefixed is err's text without the module's "idem: ", which the
// command's own prefix already says.
func unprefixed(err error) string {
	return strings.TrimPrefix(err.Error(), "idem: ")
}

func (e *storeError) Unwrap() error { return e.err }

// newClient returns the client of -redis or -cluster, each request bounded
// by -timeout, and the address to name in messages. -redis takes a URL or
// host:port.
func newClient(cfg *config) (redis.UniversalClient, string, error) {
	if cfg.cluster != "" {
		var opts *redis.ClusterOptions
		if strings.Contains(cfg.cluster, "://") {
			var err error
			if opts, err = redis.ParseClusterURL(cfg.cluster); err != nil {
				return nil, "", badURL("-cluster", cfg.cluster, err)
			}
		} else {
			opts = &redis.ClusterOptions{}
			for _, a := range strings.Split(cfg.cluster, ",") {
				if a = strings.TrimSpace(a); a != "" {
					if err := checkHostPort("-cluster", a); err != nil {
						return nil, "", err
					}
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
	var opts *redis.Options
	if strings.Contains(cfg.redisURL, "://") {
		var err error
		if opts, err = redis.ParseURL(cfg.redisURL); err != nil {
			return nil, "", badURL("-redis", cfg.redisURL, err)
		}
	} else {
		addr := strings.TrimSpace(cfg.redisURL)
		if err := checkHostPort("-redis", addr); err != nil {
			return nil, "", err
		}
		opts = &redis.Options{Addr: addr}
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = cfg.timeout, cfg.timeout, cfg.timeout
	opts.DialerRetries = 1
	return redis.NewClient(opts), opts.Addr, nil
}

// checkHostPort refuses an address of -redis or -cluster that is not
// host:port ([host]:port for IPv6). One with a user or password, which
// goes in a URL, is not echoed.
func checkHostPort(flag, addr string) error {
	if strings.Contains(addr, "@") {
		return usagef("%s: a user or password goes in a URL (redis://user:password@host:port), not in host:port", flag)
	}
	if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" {
		return usagef("%s %q: want host:port or a redis:// URL ([host]:port for IPv6)", flag, addr)
	}
	return nil
}

// badURL is the usage error of a URL flag that does not parse. It names
// the URL, and the error (which may quote it) with its password hidden.
func badURL(flag, raw string, err error) error {
	shown := hidePassword(raw)
	return usagef("%s %q: %s", flag, shown, strings.ReplaceAll(err.Error(), raw, shown))
}

// hidePassword returns a URL with the password of its user info, if any,
// replaced by "xxxxx".
func hidePassword(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	start := i + len("://")
	auth := raw[start:]
	if end := strings.IndexAny(auth, "/?#"); end >= 0 {
		auth = auth[:end]
	}
	at := strings.LastIndexByte(auth, '@')
	if at < 0 {
		return raw
	}
	colon := strings.IndexByte(auth[:at], ':')
	if colon < 0 {
		return raw
	}
	return raw[:start+colon+1] + "xxxxx" + raw[start+at:]
}

// connect reaches the store (within -timeout) and opens it.
func connect(ctx context.Context, cfg *config) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if cfg.postgres != "" {
		return connectPostgres(ctx, cfg)
	}
	client, addr, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	st, err := redisstore.New(ctx, client, redisstore.Options{KeyPrefix: cfg.storePrefix, Timeout: cfg.timeout})
	if err != nil {
		client.Close()
		return nil, &storeError{kind: "Redis", addr: addr, connecting: true, err: err}
	}
	return &conn{store: st, redis: st, kind: "Redis", addr: addr,
		close: func() { st.Close(); client.Close() }}, nil
}

// connectPostgres opens the store of -postgres, on -table (in -schema).
func connectPostgres(ctx context.Context, cfg *config) (*conn, error) {
	pc, err := pgxpool.ParseConfig(cfg.postgres)
	if err != nil {
		return nil, usagef("-postgres: %v", err)
	}
	pc.ConnConfig.ConnectTimeout = cfg.timeout
	pc.MaxConns = inspectors + 1
	addr := fmt.Sprintf("%s:%d/%s", pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, &storeError{kind: "PostgreSQL", addr: addr, connecting: true, err: err}
	}
	st, err := pgstore.New(ctx, pool, pgstore.Options{Schema: cfg.schema, Table: cfg.table, Timeout: cfg.timeout, DisableCleanup: true})
	if err != nil {
		pool.Close()
		if errors.Is(err, store.ErrInvalidArgument) {
			return nil, usagef("%v", err)
		}
		return nil, &storeError{kind: "PostgreSQL", addr: addr, connecting: true, err: err}
	}
	return &conn{store: st, kind: "PostgreSQL", addr: addr + " table " + st.Table(),
		close: func() { st.Close(); pool.Close() }}, nil
}

// failed wraps an error of a request to the store with its address.
func (c *conn) failed(err error) error {
	return &storeError{kind: c.kind, addr: c.addr, err: err}
}

// recordName is where key's record lives, for messages and reports: its
// Redis key, or "" on PostgreSQL (the row of the key in the table).
func (c *conn) recordName(key string) string {
	if c.redis == nil {
		return ""
	}
	return c.redis.RecordKey(key)
}

// corruptRecord is a key whose record the store cannot read as idem's.
type corruptRecord struct {
	RedisKey string // the Redis key, or the table on PostgreSQL
	Reason   string
}

// asCorrupt returns the corrupt record err reports, or nil.
func asCorrupt(err error) *corruptRecord {
	var rc *redisstore.CorruptError
	var pc *pgstore.CorruptError
	switch {
	case errors.As(err, &rc):
		return &corruptRecord{RedisKey: rc.RedisKey, Reason: rc.Reason}
	case errors.As(err, &pc):
		return &corruptRecord{RedisKey: "table " + pc.Table, Reason: pc.Reason}
	}
	return nil
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

// recordText names a corrupt record's place in a message: its Redis key,
// or its row's table on PostgreSQL.
func recordText(name string) string {
	if table, ok := strings.CutPrefix(name, "table "); ok {
		return "its row in table " + table
	}
	return "Redis key " + name
}
