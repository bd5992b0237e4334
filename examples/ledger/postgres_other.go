//go:build !linux

package main

import "errors"

// postgres is the PostgreSQL server the example starts: only on Linux,
// whose process controls (a child killed with its parent) the server's
// helper needs.
type postgres struct{}

func startPostgres() (*postgres, error) {
	return nil, errors.New("this example starts a PostgreSQL server of its own, which it can do on Linux only")
}

func (*postgres) dsn(string) string { return "" }
func (*postgres) addr() string      { return "" }
func (*postgres) stop()             {}
