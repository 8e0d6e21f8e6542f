package app

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"gopkg.in/yaml.v3"
)

// Defaults applied where a configuration value is zero.
const (
	DefaultAddress         = "127.0.0.1:8080"
	DefaultWebURL          = "https://github.com"
	DefaultV3APIURL        = "https://api.github.com/"
	DefaultV4APIURL        = "https://api.github.com/graphql"
	DefaultLabel           = "gohands"
	DefaultBranchPrefix    = "gohands/"
	DefaultLLMBaseURL      = "https://api.openai.com/v1"
	DefaultModel           = "gpt-4o"
	DefaultMaxIterations   = 50
	DefaultMaxTokens       = 3_000_000
	DefaultContextWindow   = 128_000
	DefaultSandboxDriver   = "docker"
	DefaultSandboxImage    = "gohands-sandbox:latest"
	DefaultSandboxNetwork  = "bridge"
	DefaultSandboxCPUs     = 2.0
	DefaultSandboxMemory   = "4g"
	DefaultSandboxPids     = 1024
	DefaultSetupTimeout    = 10 * time.Minute
	DefaultWorkers         = 4
	DefaultJobTimeout      = 45 * time.Minute
	DefaultPushInterval    = 2 * time.Minute
	DefaultStorePath       = "./data"
	DefaultShutdownTimeout = 30 * time.Second
	DefaultForkPRs         = ForkPRsExplain
)

// How a follow-up on a pull request from a fork is handled (runner.fork_prs):
// gohands cannot push to a fork's branch.
const (
	// ForkPRsExplain answers that the fork's branch cannot be pushed to.
	ForkPRsExplain = "explain"
	// ForkPRsNewPR works on a bot branch made from the fork's head and opens
	// a new pull request from it.
	ForkPRsNewPR = "new_pr"
)

// Config is the whole configuration, read from YAML. Every key is documented
// in config.yml at the repository root.
type Config struct {
	Server  ServerConfig     `yaml:"server"`
	GitHub  githubapp.Config `yaml:"github"`
	Bot     BotConfig        `yaml:"bot"`
	LLM     LLMConfig        `yaml:"llm"`
	Sandbox SandboxConfig    `yaml:"sandbox"`
	Runner  RunnerConfig     `yaml:"runner"`
	Store   StoreConfig      `yaml:"store"`
}

// ServerConfig is the HTTP server's configuration.
type ServerConfig struct {
	Address         string        `yaml:"address"`
	PublicURL       string        `yaml:"public_url"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
}

// BotConfig says how the bot is triggered and how it names what it makes.
type BotConfig struct {
	Label        string `yaml:"label"`
	BranchPrefix string `yaml:"branch_prefix"`
	Draft        *bool  `yaml:"draft"`
}

// LLMConfig selects the model and bounds what a job may spend on it.
type LLMConfig struct {
	BaseURL       string `yaml:"base_url"`
	APIKey        string `yaml:"api_key"`
	Model         string `yaml:"model"`
	MaxIterations int    `yaml:"max_iterations"`
	MaxTokens     int    `yaml:"max_tokens"`
	ContextWindow int    `yaml:"context_window"`
}

// SandboxConfig describes where the agent's commands run.
type SandboxConfig struct {
	Driver       string            `yaml:"driver"`
	Image        string            `yaml:"image"`
	Network      string            `yaml:"network"`
	CPUs         float64           `yaml:"cpus"`
	Memory       string            `yaml:"memory"`
	Pids         int64             `yaml:"pids"`
	Env          map[string]string `yaml:"env"`
	SetupTimeout time.Duration     `yaml:"setup_timeout"`
}

// RunnerConfig bounds the job queue and each job.
type RunnerConfig struct {
	Workers      int           `yaml:"workers"`
	JobTimeout   time.Duration `yaml:"job_timeout"`
	PushInterval time.Duration `yaml:"push_interval"`
	ForkPRs      string        `yaml:"fork_prs"`
}

// StoreConfig says where gohands keeps its state.
type StoreConfig struct {
	Path string `yaml:"path"`
}

// ParseConfig reads a YAML configuration strictly: an unknown key is an
// error that names it, and ${VAR} in a value is replaced by that environment
// variable. Defaults are applied; Validate is not called.
func ParseConfig(data []byte) (Config, error) {
	var cfg Config
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("parse config: %w", err)
	}
	if len(root.Content) > 0 {
		doc := root.Content[0]
		if err := checkKeys(doc, reflect.TypeOf(cfg), ""); err != nil {
			return cfg, err
		}
		expandEnv(doc, reflect.TypeOf(cfg))
		if err := doc.Decode(&cfg); err != nil {
			return cfg, fmt.Errorf("parse config: %w", err)
		}
	}
	cfg.applyDefaults()
	return cfg, nil
}

// LoadConfig reads and validates the configuration file at path.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// checkKeys walks a mapping node against a struct type and reports the first
// key that the struct does not have, with its dotted path and line.
func checkKeys(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	switch t.Kind() {
	case reflect.Map:
		return nil
	case reflect.Struct:
	default:
		return nil
	}
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = f.Type
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if path != "" {
			key = path + "." + k.Value
		}
		ft, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("line %d: unknown key %q", k.Line, key)
		}
		if err := checkKeys(v, ft, key); err != nil {
			return err
		}
	}
	return nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${VAR} in scalar values after parsing, so that a value
// with newlines or quotes (a PEM key) cannot change the YAML's structure. t
// is the Go type the node decodes into: an expanded value meant for a string
// stays a string whatever it looks like ("null", "0123"), while one meant for
// a number, a bool or a duration is read from the expanded text.
func expandEnv(n *yaml.Node, t reflect.Type) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(m string) string {
			return os.Getenv(m[2 : len(m)-1])
		})
		if t == nil || t.Kind() == reflect.String || t.Kind() == reflect.Interface {
			n.Tag, n.Style = "!!str", yaml.DoubleQuotedStyle
		} else {
			n.Tag, n.Style = "", 0
		}
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			expandEnv(n.Content[i+1], fieldType(t, n.Content[i].Value))
		}
	default:
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for _, c := range n.Content {
			expandEnv(c, elem)
		}
	}
}

// fieldType is the type of a struct field by its YAML name, or a map's
// element type; nil when unknown.
func fieldType(t reflect.Type, key string) reflect.Type {
	switch {
	case t == nil:
		return nil
	case t.Kind() == reflect.Map:
		return t.Elem()
	case t.Kind() != reflect.Struct:
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key {
			return f.Type
		}
	}
	return nil
}

func (c *Config) applyDefaults() {
	setDefault(&c.Server.Address, DefaultAddress)
	setDefault(&c.Server.ShutdownTimeout, DefaultShutdownTimeout)
	setDefault(&c.GitHub.WebURL, DefaultWebURL)
	setDefault(&c.GitHub.V3APIURL, DefaultV3APIURL)
	setDefault(&c.GitHub.V4APIURL, DefaultV4APIURL)
	setDefault(&c.Bot.Label, DefaultLabel)
	setDefault(&c.Bot.BranchPrefix, DefaultBranchPrefix)
	if c.Bot.Draft == nil {
		draft := true
		c.Bot.Draft = &draft
	}
	setDefault(&c.LLM.BaseURL, DefaultLLMBaseURL)
	setDefault(&c.LLM.Model, DefaultModel)
	setDefault(&c.LLM.MaxIterations, DefaultMaxIterations)
	setDefault(&c.LLM.MaxTokens, DefaultMaxTokens)
	setDefault(&c.LLM.ContextWindow, DefaultContextWindow)
	setDefault(&c.Sandbox.Driver, DefaultSandboxDriver)
	setDefault(&c.Sandbox.Image, DefaultSandboxImage)
	setDefault(&c.Sandbox.Network, DefaultSandboxNetwork)
	setDefault(&c.Sandbox.CPUs, DefaultSandboxCPUs)
	setDefault(&c.Sandbox.Memory, DefaultSandboxMemory)
	setDefault(&c.Sandbox.Pids, DefaultSandboxPids)
	setDefault(&c.Sandbox.SetupTimeout, DefaultSetupTimeout)
	setDefault(&c.Runner.Workers, DefaultWorkers)
	setDefault(&c.Runner.JobTimeout, DefaultJobTimeout)
	setDefault(&c.Runner.PushInterval, DefaultPushInterval)
	setDefault(&c.Runner.ForkPRs, DefaultForkPRs)
	setDefault(&c.Store.Path, DefaultStorePath)
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate checks what the server needs to start and names the key at fault.
func (c *Config) Validate() error {
	var errs []error
	if c.GitHub.App.IntegrationID <= 0 {
		errs = append(errs, errors.New("github.app.integration_id must be the App's numeric id (Settings → Developer settings → GitHub Apps)"))
	}
	if c.GitHub.App.WebhookSecret == "" {
		errs = append(errs, errors.New("github.app.webhook_secret is empty: set it to the App's webhook secret (e.g. \"${GITHUB_WEBHOOK_SECRET}\")"))
	}
	if _, err := c.PrivateKey(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateCommon()...)
	return errors.Join(errs...)
}

// validateCommon checks the keys that every mode (serve, action, demo) uses.
func (c *Config) validateCommon() []error {
	var errs []error
	for _, u := range []struct{ key, val string }{
		{"github.web_url", c.GitHub.WebURL},
		{"github.v3_api_url", c.GitHub.V3APIURL},
		{"llm.base_url", c.LLM.BaseURL},
	} {
		if err := checkURL(u.val); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.key, err))
		}
	}
	if c.Server.PublicURL != "" {
		if err := checkURL(c.Server.PublicURL); err != nil {
			errs = append(errs, fmt.Errorf("server.public_url: %w", err))
		}
	}
	switch c.Sandbox.Driver {
	case "docker", "process":
	default:
		errs = append(errs, fmt.Errorf("sandbox.driver: unknown driver %q (want docker or process)", c.Sandbox.Driver))
	}
	switch c.Sandbox.Network {
	case "bridge", "none":
	default:
		errs = append(errs, fmt.Errorf("sandbox.network: unknown network %q (want bridge or none)", c.Sandbox.Network))
	}
	if _, err := ParseBytes(c.Sandbox.Memory); err != nil {
		errs = append(errs, fmt.Errorf("sandbox.memory: %w", err))
	}
	if c.Sandbox.CPUs < 0 {
		errs = append(errs, fmt.Errorf("sandbox.cpus: %v is negative", c.Sandbox.CPUs))
	}
	if c.Runner.Workers < 1 {
		errs = append(errs, fmt.Errorf("runner.workers: %d, want at least 1", c.Runner.Workers))
	}
	if c.Runner.ForkPRs != ForkPRsExplain && c.Runner.ForkPRs != ForkPRsNewPR {
		errs = append(errs, fmt.Errorf("runner.fork_prs: unknown value %q (want %s or %s)", c.Runner.ForkPRs, ForkPRsExplain, ForkPRsNewPR))
	}
	if c.LLM.MaxIterations < 1 {
		errs = append(errs, fmt.Errorf("llm.max_iterations: %d, want at least 1", c.LLM.MaxIterations))
	}
	if c.LLM.Model == "" {
		errs = append(errs, errors.New("llm.model is empty"))
	}
	if strings.ContainsAny(c.Bot.BranchPrefix, " ~^:?*[\\") {
		errs = append(errs, fmt.Errorf("bot.branch_prefix: %q is not usable in a git branch name", c.Bot.BranchPrefix))
	}
	return errs
}

// PrivateKey returns the App's private key as PEM bytes. The key is given
// inline (PEM text) or as the path of a PEM file.
func (c *Config) PrivateKey() ([]byte, error) {
	v := strings.TrimSpace(c.GitHub.App.PrivateKey)
	if v == "" {
		return nil, errors.New("github.app.private_key is empty: give the App's private key as PEM text or the path of its .pem file")
	}
	data := []byte(v)
	if !strings.HasPrefix(v, "-----BEGIN") {
		b, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("github.app.private_key: not PEM text, and not a readable file: %w", err)
		}
		data = b
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("github.app.private_key: no PEM block found")
	}
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
		// GitHub signs App JWTs with RS256 only: a PKCS#8 key must hold RSA.
		k, err8 := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err8 != nil {
			return nil, fmt.Errorf("github.app.private_key: not an RSA private key: %w", err)
		}
		if _, ok := k.(*rsa.PrivateKey); !ok {
			return nil, fmt.Errorf("github.app.private_key: a %T, want an RSA private key (GitHub Apps sign with RS256)", k)
		}
	}
	return data, nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("malformed URL %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("malformed URL %q: want http:// or https://", s)
	}
	if u.Host == "" {
		return fmt.Errorf("malformed URL %q: no host", s)
	}
	return nil
}

// ParseBytes reads a size such as "512m" or "4g" (powers of 1024); a plain
// number is bytes. Empty or "0" means no limit.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" {
		return 0, nil
	}
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k"):
		mult = 1 << 10
	case strings.HasSuffix(s, "m"):
		mult = 1 << 20
	case strings.HasSuffix(s, "g"):
		mult = 1 << 30
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size like 512m or 4g", s)
	}
	return n * mult, nil
}
