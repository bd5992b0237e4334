// Command idem reads and cleans up the records that idem keeps in Redis,
// Redis Cluster or PostgreSQL: a key's result and state (an HTTP response
// stored by httpidem as status, headers and body; a consumer's key by its
// stream and consumer), forgetting a key, listing a scope's keys by state,
// clearing a namespace/version scope, and statistics of a scope.
//
//	go install github.com/idemrt/idem/cmd/idem@latest
//	idem -redis 127.0.0.1:6379 state order-1
//	idem -postgres postgres://idem@db:5432/app -namespace tenant-a -version v1 list -state expired-lease
//	idem -cluster 10.0.0.1:6379,10.0.0.2:6379 -namespace tenant-a -version v1 clear -dry-run
//
// It works through the store (package store/redisstore or store/pgstore),
// so it sees keys as the runtime gave them to the store, and it deletes
// only through the store's Forget, which refuses a key in progress. Run idem -h for the
// commands and flags; docs/operations.md describes them with examples and
// the exit codes.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/redis/go-redis/v9"
)

// quiet drops go-redis's log lines.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quiet{}) // errors reach the user through the commands
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
