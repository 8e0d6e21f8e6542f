# gohands: common tasks. `make help` lists them.
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/gohands/gohands/app.Version=$(VERSION)
IMAGE ?= gohands:latest

.PHONY: help demo test build image sandbox-image

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

demo: ## the whole flow offline, on this machine
	$(GO) run ./cmd/gohands demo

test: ## the tests (the README's command)
	$(GO) test -race -count=1 -timeout 20m ./...

build: ## the static binary ./gohands
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o gohands ./cmd/gohands

image: ## the gohands image (FROM scratch, built without a registry)
	VERSION=$(VERSION) deploy/build-image.sh $(IMAGE)

sandbox-image: ## the sandbox image the jobs run in
	deploy/sandbox/build.sh
