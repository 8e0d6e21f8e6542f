package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
)

const usage = `gohands: an AI coding agent as a self-hosted GitHub App.

Usage:
  gohands serve -config config.yml   run the GitHub App server
  gohands action [-config FILE]      run one job inside GitHub Actions
  gohands demo                       run the whole flow offline, on this machine
  gohands setup -config FILE         create the GitHub App from its manifest
  gohands version                    print the version
`

// Main runs the gohands command line with args (without the program name)
// and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = runServe(ctx, args[1:], stderr)
	case "action":
		err = runAction(ctx, args[1:], stdout, stderr)
	case "demo":
		err = runDemo(ctx, args[1:], stdout, stderr)
	case "setup":
		err = runSetup(ctx, args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintf(stdout, "gohands %s\n", Version)
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "gohands: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "gohands %s: %v\n", args[0], err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError is a command line mistake (exit code 2).
type usageError struct{ error }

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gohands "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	return nil
}

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	path := fs.String("config", "config.yml", "the configuration file")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return usageError{err}
	}
	cfg, err := LoadConfig(*path)
	if err != nil {
		return err
	}
	a, err := New(ctx, cfg, Options{Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Server.Address)
	if err != nil {
		a.Close()
		return fmt.Errorf("server.address: %w", err)
	}
	return a.Serve(ctx, ln)
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
