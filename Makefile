# lanes build. Two commands matter on a fresh Debian machine, as root:
#   make demo   build everything and run the headline lab experiment
#   make test   run every test (unit, BPF, integration in fresh namespaces)
GO      := ./scripts/go
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
export CGO_ENABLED := 0

.PHONY: all build cross generate test test-short demo lint bench clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/lanes ./cmd/lanes
	@$(MAKE) --no-print-directory cross

# Device makers run lanes on phones and boards: cross-build with CGO off.
cross:
	GOOS=linux   GOARCH=arm64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/lanes-linux-arm64 ./cmd/lanes
	GOOS=android GOARCH=arm64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/lanes-android-arm64 ./cmd/lanes

# Rebuild the BPF objects from their C sources (needs clang); the results are
# committed so that a plain `go build` needs no clang.
generate:
	./scripts/deps.sh generate
	$(GO) generate ./...

test:
	./scripts/deps.sh test
	$(GO) vet ./...
	$(GO) test -count=1 -p 1 -timeout 50m ./...

test-short:
	$(GO) test -short -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

demo: build
	./scripts/deps.sh demo
	./bin/lanes lab demo

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

clean:
	rm -rf bin
