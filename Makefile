# The tests: race detector on, every package, nothing skipped.
.PHONY: test vet fmt bench quickstart

test:
	./scripts/test

vet:
	go vet ./...

fmt:
	gofmt -l -w .

bench:
	go test -run '^$$' -bench . -benchmem ./...

quickstart:
	go run ./examples/quickstart
