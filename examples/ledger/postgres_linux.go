package main

import (
	"strconv"

	"github.com/idemrt/idem/internal/pgtest"
)

// postgres is a PostgreSQL server of the example's own: initdb into a
// temporary directory, then postgres on a free loopback port, a child of
// this process (killed with it), removed by stop. The project's test
// helper does it; it never uses a server already running on the machine.
type postgres struct{ srv *pgtest.Server }

// startPostgres starts the server, or says how to install PostgreSQL.
func startPostgres() (*postgres, error) {
	srv, err := pgtest.New(pgtest.Options{})
	if err != nil {
		return nil, err
	}
	return &postgres{srv: srv}, nil
}

// dsn returns the connection string of database on the server.
func (p *postgres) dsn(database string) string { return p.srv.DSN(database) }

// addr returns the server's address.
func (p *postgres) addr() string { return p.srv.Host + ":" + strconv.Itoa(p.srv.Port) }

func (p *postgres) stop() { p.srv.Close() }
