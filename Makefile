# The tests: race detector on, every package, nothing skipped.
.PHONY: test vet fmt bench harness quickstart checkout webhooks

test:
	./scripts/test

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
