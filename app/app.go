// Package app is gohands' composition root: it loads the configuration,
// builds the GitHub clients, the store, the sandbox driver, the job queue
// and the webhook handlers, and serves HTTP.
package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/gohands/gohands/handlers"
	"github.com/gohands/gohands/runner"
	"github.com/gohands/gohands/sandbox"
)

// Version is gohands' version, set at build time with
// -ldflags "-X github.com/gohands/gohands/app.Version=v1.2.3".
var Version = "dev"

// MaxWebhookBytes is the largest webhook body accepted; GitHub caps
// payloads at 25 MB.
const MaxWebhookBytes = 25 << 20

// WebhookPath and HealthPath are the server's public endpoints.
const (
	WebhookPath = githubapp.DefaultWebhookRoute
	HealthPath  = "/healthz"
)

// maxCourtesyCalls bounds the reactions and replies in flight after their
// webhooks were answered.
const maxCourtesyCalls = 64

// Options are the parts of start-up that are not configuration.
type Options struct {
	// Logger receives all logs; a text logger on stderr when nil.
	Logger *slog.Logger
	// Transport carries GitHub API requests; http.DefaultTransport when nil.
	Transport http.RoundTripper
	// Instance names this gohands for sandbox labels, so a restart reaps
	// what the previous run left and nothing of another gohands on the same
	// Docker engine; derived from store.path when empty.
	Instance string
}

// App is a running gohands: the webhook server and the job queue.
type App struct {
	cfg     Config
	log     *slog.Logger
	bot     handlers.Bot
	store   *runner.Store
	queue   *runner.Queue
	driver  sandbox.Driver
	handler http.Handler
	// courtesy makes reactions and replies after webhooks are answered.
	courtesy *handlers.Courtesy

	readyMu sync.Mutex
	ready   bool
}

// New wires an App from cfg and fails fast, naming the key or the command
// that fixes what is wrong: a bad key, an unreachable GitHub API, a missing
// sandbox image.
func New(ctx context.Context, cfg Config, opts Options) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	log, base := opts.Logger, opts.Transport
	key, err := cfg.PrivateKey()
	if err != nil {
		return nil, err
	}
	secrets := []string{cfg.GitHub.App.WebhookSecret, string(key), cfg.LLM.APIKey, cfg.GitHub.OAuth.ClientSecret}
	log = runner.MaskLogger(log, secrets...)
	creds := newAppCredentials(cfg.GitHub.V3APIURL, cfg.GitHub.App.IntegrationID, key, base)
	bot, err := learnBot(ctx, creds)
	if err != nil {
		return nil, err
	}
	log.Info("github app", "slug", bot.Slug, "login", bot.Login, "api", cfg.GitHub.V3APIURL)
	c := components{cfg: cfg, log: log, creds: creds, bot: bot, instance: opts.Instance, secrets: secrets}
	a, err := c.build(ctx)
	if err != nil {
		return nil, err
	}
	dispatcher := githubapp.NewEventDispatcher(
		handlers.All(a.handlerBase(creds.Client)),
		cfg.GitHub.App.WebhookSecret,
		githubapp.WithErrorCallback(a.onError),
		githubapp.WithResponseCallback(onResponse),
	)
	mux := http.NewServeMux()
	mux.Handle("POST "+WebhookPath, limitBody(dispatcher))
	mux.HandleFunc("GET "+HealthPath, a.health)
	a.handler = mux
	return a, nil
}

// learnBot asks GitHub who the App is: slug S is login S[bot], mention @S.
func learnBot(ctx context.Context, creds *appCredentials) (handlers.Bot, error) {
	gh, err := creds.appClient()
	if err != nil {
		return handlers.Bot{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	app, _, err := gh.Apps.Get(ctx, "")
	if err != nil {
		return handlers.Bot{}, fmt.Errorf("GET %sapp (check github.v3_api_url, github.app.integration_id and github.app.private_key): %w", gh.BaseURL, err)
	}
	slug := app.GetSlug()
	if slug == "" {
		return handlers.Bot{}, fmt.Errorf("GET %sapp returned no slug", gh.BaseURL)
	}
	return handlers.Bot{Slug: slug, Login: slug + "[bot]"}, nil
}

// components builds the parts every mode shares: store, sandbox driver,
// pipeline and queue.
type components struct {
	cfg      Config
	log      *slog.Logger
	creds    runner.Credentials
	bot      handlers.Bot
	instance string
	secrets  []string
	notify   func(runner.Event) // optional: job state changes
}

func (c components) build(ctx context.Context) (*App, error) {
	cfg := c.cfg
	instance := c.instance
	if instance == "" {
		instance = instanceOf(cfg.Store.Path)
	}
	driver, err := newDriver(ctx, cfg.Sandbox, instance, c.log)
	if err != nil {
		return nil, err
	}
	if n, err := driver.Reap(ctx); err != nil {
		c.log.Warn("could not remove sandboxes left by an earlier run", "err", err)
	} else if n > 0 {
		c.log.Info("removed sandboxes left by an earlier run", "count", n)
	}
	store, err := runner.OpenStore(cfg.Store.Path)
	if err != nil {
		return nil, fmt.Errorf("store.path: %w", err)
	}
	mem, _ := ParseBytes(cfg.Sandbox.Memory)
	pipeline := runner.NewPipeline(runner.PipelineConfig{
		Credentials: c.creds,
		Driver:      driver,
		Sandbox: sandbox.Spec{
			Image:       cfg.Sandbox.Image,
			Env:         cfg.Sandbox.Env,
			Network:     cfg.Sandbox.Network,
			CPUs:        cfg.Sandbox.CPUs,
			MemoryBytes: mem,
			PidsLimit:   cfg.Sandbox.Pids,
			WallClock:   cfg.Runner.JobTimeout,
		},
		SetupTimeout: cfg.Sandbox.SetupTimeout,
		LLM: runner.LLMConfig{
			BaseURL:       cfg.LLM.BaseURL,
			APIKey:        cfg.LLM.APIKey,
			Model:         cfg.LLM.Model,
			MaxIterations: cfg.LLM.MaxIterations,
			MaxTokens:     cfg.LLM.MaxTokens,
			ContextWindow: cfg.LLM.ContextWindow,
		},
		Bot: runner.Bot{
			Slug:         c.bot.Slug,
			Login:        c.bot.Login,
			BranchPrefix: cfg.Bot.BranchPrefix,
			Draft:        *cfg.Bot.Draft,
			Label:        cfg.Bot.Label,
		},
		JobTimeout:   cfg.Runner.JobTimeout,
		PushInterval: cfg.Runner.PushInterval,
		ForkNewPR:    cfg.Runner.ForkPRs == ForkPRsNewPR,
		StoreDir:     cfg.Store.Path,
		Store:        store,
		Secrets:      c.secrets,
		Logger:       c.log,
	})
	queue := runner.NewQueue(store, pipeline, runner.QueueOptions{Workers: cfg.Runner.Workers, Logger: c.log, Notify: c.notify})
	return &App{cfg: cfg, log: c.log, bot: c.bot, store: store, queue: queue, driver: driver,
		courtesy: handlers.NewCourtesy(maxCourtesyCalls)}, nil
}

// newDriver starts the configured sandbox driver, checking that Docker
// answers and that the image exists.
func newDriver(ctx context.Context, cfg SandboxConfig, instance string, log *slog.Logger) (sandbox.Driver, error) {
	switch cfg.Driver {
	case "process":
		p, err := sandbox.NewProcess(sandbox.ProcessOptions{Instance: instance, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("sandbox.driver process: %w", err)
		}
		return p, nil
	default:
		d, err := sandbox.NewDocker(ctx, sandbox.DockerOptions{Instance: instance, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("sandbox.driver docker: %w", err)
		}
		if err := d.CheckImage(ctx, cfg.Image); err != nil {
			return nil, fmt.Errorf("sandbox.image: %w", err)
		}
		return d, nil
	}
}

// instanceOf names a gohands by its store: one store, one gohands.
func instanceOf(storePath string) string {
	abs, err := filepath.Abs(storePath)
	if err != nil {
		abs = storePath
	}
	sum := sha256.Sum256([]byte(abs))
	return "s" + hex.EncodeToString(sum[:6])
}

// withDefaults fills what opts leaves empty: a text logger on stderr and
// http.DefaultTransport.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport
	}
	return o
}

// jobQueue gives the handlers the queue and the store's once-markers.
type jobQueue struct {
	*runner.Queue
	store *runner.Store
}

func (q jobQueue) Once(ctx context.Context, name string) (bool, error) {
	return q.store.Once(ctx, name)
}

func (a *App) handlerBase(client func(context.Context, int64) (*github.Client, error)) handlers.Base {
	return handlers.Base{
		Client:   client,
		Queue:    jobQueue{Queue: a.queue, store: a.store},
		Bot:      a.bot,
		Label:    a.cfg.Bot.Label,
		Logger:   a.log,
		Courtesy: a.courtesy,
	}
}

// Handler is the HTTP handler: the webhook and the health check.
func (a *App) Handler() http.Handler { return a.handler }

// Bot is the App's identity as GitHub reported it.
func (a *App) Bot() handlers.Bot { return a.bot }

// Queue is the job queue.
func (a *App) Queue() *runner.Queue { return a.queue }

// Serve answers HTTP on ln and runs jobs until ctx is done. Then it stops
// accepting webhooks, lets running jobs reach a safe point (they go back in
// the queue and resume from their branch on the next start), closes the
// store and returns.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	queueCtx, stopQueue := context.WithCancel(ctx)
	defer stopQueue()
	queueDone := make(chan error, 1)
	go func() { queueDone <- a.queue.Run(queueCtx) }()
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	a.setReady(true)
	a.log.Info("serving", "address", ln.Addr().String(), "webhook", WebhookPath)

	var err error
	queueEnded := false
	select {
	case <-ctx.Done():
	case err = <-serveDone:
		err = fmt.Errorf("serve: %w", err)
	case err = <-queueDone:
		queueEnded = true
		err = fmt.Errorf("job queue: %w", err)
	}
	a.setReady(false)
	a.log.Info("shutting down: no new webhooks; running jobs go back to the queue")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.Server.ShutdownTimeout)
	defer cancel()
	if serr := srv.Shutdown(shutCtx); serr != nil && err == nil {
		err = fmt.Errorf("shutdown: %w", serr)
	}
	a.courtesy.Wait()
	// The store closes only after the queue has written every job's state.
	stopQueue()
	if !queueEnded {
		if qerr := <-queueDone; qerr != nil && !errors.Is(qerr, context.Canceled) && err == nil {
			err = fmt.Errorf("job queue: %w", qerr)
		}
	}
	if cerr := a.store.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// Close releases the store when Serve was never called.
func (a *App) Close() error {
	a.courtesy.Wait()
	return a.store.Close()
}

func (a *App) setReady(v bool) {
	a.readyMu.Lock()
	a.ready = v
	a.readyMu.Unlock()
}

func (a *App) health(w http.ResponseWriter, _ *http.Request) {
	a.readyMu.Lock()
	ready := a.ready
	a.readyMu.Unlock()
	if !ready {
		http.Error(w, "starting or stopping", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}
