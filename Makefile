# The tests: race detector on, every package, nothing skipped.
.PHONY: test postgresql vet fmt bench harness quickstart checkout webhooks orders ledger kafka

test: postgresql
	./scripts/test

# The PostgreSQL store's tests start their own servers from PostgreSQL's
# programs (initdb, postgres), found on PATH or under
# /usr/lib/postgresql/*/bin; install Debian's postgresql package when they
# are missing. (The package may start a server of its own on port 5432: the
# tests never use it.)
postgresql:
	@if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "make: PostgreSQL is missing; installing Debian's postgresql package" >&2; \
		command -v apt-get >/dev/null 2>&1 || { echo "make: no apt-get here; install PostgreSQL 14 or newer (initdb, postgres) and run again" >&2; exit 1; }; \
		sudo=""; if [ "$$(id -u)" != 0 ]; then sudo=sudo; fi; \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null && \
		ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "make: PostgreSQL still missing after the install" >&2; exit 1; }; \
	fi

vet:
	go vet ./...

fmt:
	gofmt -l -w .

bench:
	go test -run '^$$' -bench . -benchmem ./...

harness:
	go run ./bench

quickstart:
	go run ./examples/quickstart

checkout:
	go run ./examples/checkout

webhooks:
	go run ./examples/webhooks

orders:
	go run ./examples/orders

# An in-process Kafka cluster (kfake) inside the program.
kafka:
	go run ./examples/kafka

# Starts a PostgreSQL server of its own (hence the postgresql target) and
# a NATS server inside the program.
ledger: postgresql
	go run ./examples/ledger
