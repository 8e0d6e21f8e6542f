// Command gohands is a self-hosted GitHub App that writes code on issues and
// pull requests. See README.md; `gohands help` lists the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gohands/gohands/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
