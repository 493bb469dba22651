# mscclgo build targets. `make test` is the test command of README.md.

GO ?= go

.PHONY: build test golden bench check validate-modules

build:
	$(GO) build -o bin/mscclgo .

test:
	$(GO) test ./...

# Rewrite the project's golden plans (tests/**/*.plan.json).
golden:
	$(GO) test ./tests/... -run TestGoldenPlans -update

bench:
	$(GO) test ./tests/ -run XXX -bench . -benchmem

check: validate-modules
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

validate-modules:
	$(GO) mod tidy
	git diff --exit-code go.mod go.sum
