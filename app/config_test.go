package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	testKeyOnce sync.Once
	testKeyPEM  []byte
)

// mustKeyPEM returns a PKCS#1 RSA private key in PEM, made once per run.
func mustKeyPEM(tb testing.TB) []byte {
	tb.Helper()
	testKeyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			tb.Fatal(err)
		}
		testKeyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	})
	return testKeyPEM
}

// mustFile writes data to a new file and returns its path.
func mustFile(tb testing.TB, name string, data []byte, mode os.FileMode) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, data, mode); err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestParseConfig(t *testing.T) {
	key := mustKeyPEM(t)
	tests := []struct {
		name    string
		yaml    string
		env     map[string]string
		wantErr []string // substrings of the error; none: no error
		check   func(t *testing.T, c Config)
	}{
		{name: "empty file gives the defaults", yaml: "", check: func(t *testing.T, c Config) {
			if c.Server.Address != DefaultAddress || c.Sandbox.Driver != DefaultSandboxDriver || c.Runner.Workers != DefaultWorkers ||
				c.Bot.Label != DefaultLabel || !*c.Bot.Draft || c.GitHub.V3APIURL != DefaultV3APIURL || c.Server.ShutdownTimeout != DefaultShutdownTimeout {
				t.Errorf("defaults not applied: %+v", c)
			}
		}},
		{name: "values and durations", yaml: "server:\n  address: 0.0.0.0:9000\n  shutdown_timeout: 5s\nbot:\n  draft: false\nrunner:\n  workers: 2\n  job_timeout: 10m\n",
			check: func(t *testing.T, c Config) {
				if c.Server.Address != "0.0.0.0:9000" || c.Server.ShutdownTimeout != 5*time.Second || *c.Bot.Draft ||
					c.Runner.Workers != 2 || c.Runner.JobTimeout != 10*time.Minute {
					t.Errorf("got %+v", c)
				}
			}},
		{name: "unknown top-level key", yaml: "servr:\n  address: x\n", wantErr: []string{`unknown key "servr"`, "line 1"}},
		{name: "unknown nested key with its path", yaml: "server:\n  address: x\n  adress: y\n", wantErr: []string{`unknown key "server.adress"`, "line 3"}},
		{name: "unknown key under github.app", yaml: "github:\n  app:\n    integration_id: 1\n    secret: s\n", wantErr: []string{`"github.app.secret"`, "line 4"}},
		{name: "sandbox.env takes any names", yaml: "sandbox:\n  env:\n    GOFLAGS: -mod=mod\n    ANYTHING: x\n", check: func(t *testing.T, c Config) {
			if c.Sandbox.Env["GOFLAGS"] != "-mod=mod" || c.Sandbox.Env["ANYTHING"] != "x" {
				t.Errorf("env = %v", c.Sandbox.Env)
			}
		}},
		{name: "${VAR} expansion", yaml: "github:\n  app:\n    webhook_secret: \"${T_SECRET}\"\nllm:\n  base_url: https://${T_HOST}/v1\n",
			env: map[string]string{"T_SECRET": "s3cr3t", "T_HOST": "llm.example.com"},
			check: func(t *testing.T, c Config) {
				if c.GitHub.App.WebhookSecret != "s3cr3t" || c.LLM.BaseURL != "https://llm.example.com/v1" {
					t.Errorf("got secret %q, base_url %q", c.GitHub.App.WebhookSecret, c.LLM.BaseURL)
				}
			}},
		{name: "multi-line PEM from the environment", yaml: "github:\n  app:\n    private_key: \"${T_KEY}\"\n    integration_id: 7\n",
			env: map[string]string{"T_KEY": string(key)},
			check: func(t *testing.T, c Config) {
				got, err := c.PrivateKey()
				if err != nil {
					t.Fatal(err)
				}
				if strings.TrimSpace(string(got)) != strings.TrimSpace(string(key)) {
					t.Errorf("key changed on the way:\n%s", got)
				}
			}},
		{name: "an expanded value cannot change the structure", yaml: "llm:\n  api_key: ${T_EVIL}\n  model: m\n",
			env: map[string]string{"T_EVIL": "x\nmodel: evil\nserver: {address: 1}"},
			check: func(t *testing.T, c Config) {
				if c.LLM.Model != "m" || c.Server.Address != DefaultAddress || !strings.HasPrefix(c.LLM.APIKey, "x\nmodel: evil") {
					t.Errorf("got model %q, address %q, key %q", c.LLM.Model, c.Server.Address, c.LLM.APIKey)
				}
			}},
		{name: "an expanded string stays a string", yaml: "github:\n  app:\n    webhook_secret: ${T_NULL}\nllm:\n  api_key: ${T_NUM}\n",
			env: map[string]string{"T_NULL": "null", "T_NUM": "0123"},
			check: func(t *testing.T, c Config) {
				if c.GitHub.App.WebhookSecret != "null" || c.LLM.APIKey != "0123" {
					t.Errorf("got %q and %q", c.GitHub.App.WebhookSecret, c.LLM.APIKey)
				}
			}},
		{name: "expanded numbers, bools and durations", yaml: "github:\n  app:\n    integration_id: ${T_ID}\nbot:\n  draft: ${T_DRAFT}\nserver:\n  shutdown_timeout: ${T_DUR}\nrunner:\n  workers: \"${T_WORKERS}\"\n",
			env: map[string]string{"T_ID": "12345", "T_DRAFT": "false", "T_DUR": "45s", "T_WORKERS": "3"},
			check: func(t *testing.T, c Config) {
				if c.GitHub.App.IntegrationID != 12345 || *c.Bot.Draft || c.Server.ShutdownTimeout != 45*time.Second || c.Runner.Workers != 3 {
					t.Errorf("got id %d, draft %v, timeout %v, workers %d", c.GitHub.App.IntegrationID, *c.Bot.Draft, c.Server.ShutdownTimeout, c.Runner.Workers)
				}
			}},
		{name: "an unset variable is empty", yaml: "github:\n  app:\n    webhook_secret: \"${T_UNSET_FOR_SURE}\"\n", check: func(t *testing.T, c Config) {
			if c.GitHub.App.WebhookSecret != "" {
				t.Errorf("secret = %q", c.GitHub.App.WebhookSecret)
			}
		}},
		{name: "malformed YAML", yaml: "server:\n  address: [\n", wantErr: []string{"parse config"}},
		{name: "wrong type", yaml: "runner:\n  workers: many\n", wantErr: []string{"parse config", "many"}},
		{name: "expanded value of the wrong type", yaml: "runner:\n  workers: ${T_BAD}\n", env: map[string]string{"T_BAD": "lots"}, wantErr: []string{"lots"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c, err := ParseConfig([]byte(tt.yaml))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error; want one containing %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	key := mustKeyPEM(t)
	keyFile := mustFile(t, "app.pem", key, 0o600)
	unreadable := t.TempDir() // a directory: the tests run as root, where mode 000 does not stop reads
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ec8, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	ecPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ec8}))
	valid := func() Config {
		c, err := ParseConfig(nil)
		if err != nil {
			t.Fatal(err)
		}
		c.GitHub.App.IntegrationID = 42
		c.GitHub.App.WebhookSecret = "s3cr3t"
		c.GitHub.App.PrivateKey = string(key)
		return c
	}
	tests := []struct {
		name    string
		edit    func(c *Config)
		wantErr []string
	}{
		{"valid", func(c *Config) {}, nil},
		{"key as a file path", func(c *Config) { c.GitHub.App.PrivateKey = keyFile }, nil},
		{"process driver", func(c *Config) { c.Sandbox.Driver = "process" }, nil},
		{"no integration id", func(c *Config) { c.GitHub.App.IntegrationID = 0 }, []string{"github.app.integration_id"}},
		{"empty webhook secret", func(c *Config) { c.GitHub.App.WebhookSecret = "" }, []string{"github.app.webhook_secret is empty"}},
		{"empty private key", func(c *Config) { c.GitHub.App.PrivateKey = " \n" }, []string{"github.app.private_key is empty"}},
		{"missing private key file", func(c *Config) { c.GitHub.App.PrivateKey = "/nonexistent/app.pem" }, []string{"github.app.private_key", "not a readable file", "/nonexistent/app.pem"}},
		{"unreadable private key file", func(c *Config) { c.GitHub.App.PrivateKey = unreadable }, []string{"github.app.private_key", "not a readable file"}},
		{"private key file without PEM", func(c *Config) { c.GitHub.App.PrivateKey = mustFile(t, "junk.pem", []byte("junk"), 0o600) }, []string{"github.app.private_key: no PEM block"}},
		{"EC private key", func(c *Config) { c.GitHub.App.PrivateKey = ecPEM }, []string{"github.app.private_key", "want an RSA private key"}},
		{"garbage in a PEM block", func(c *Config) {
			c.GitHub.App.PrivateKey = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte("nope")}))
		}, []string{"github.app.private_key: not an RSA private key"}},
		{"API URL without scheme", func(c *Config) { c.GitHub.V3APIURL = "api.github.com" }, []string{"github.v3_api_url", "malformed URL"}},
		{"web URL unparsable", func(c *Config) { c.GitHub.WebURL = "https://exa mple.com/%zz" }, []string{"github.web_url", "malformed URL"}},
		{"LLM URL without host", func(c *Config) { c.LLM.BaseURL = "http://" }, []string{"llm.base_url", "no host"}},
		{"public URL ftp", func(c *Config) { c.Server.PublicURL = "ftp://example.com" }, []string{"server.public_url"}},
		{"unknown sandbox driver", func(c *Config) { c.Sandbox.Driver = "podman" }, []string{"sandbox.driver", `"podman"`}},
		{"unknown network", func(c *Config) { c.Sandbox.Network = "host" }, []string{"sandbox.network", `"host"`}},
		{"bad memory", func(c *Config) { c.Sandbox.Memory = "lots" }, []string{"sandbox.memory"}},
		{"negative cpus", func(c *Config) { c.Sandbox.CPUs = -1 }, []string{"sandbox.cpus"}},
		{"no workers", func(c *Config) { c.Runner.Workers = -1 }, []string{"runner.workers"}},
		{"no iterations", func(c *Config) { c.LLM.MaxIterations = 0 }, []string{"llm.max_iterations"}},
		{"no model", func(c *Config) { c.LLM.Model = "" }, []string{"llm.model"}},
		{"branch prefix with a space", func(c *Config) { c.Bot.BranchPrefix = "my bot/" }, []string{"bot.branch_prefix"}},
		{"every error at once", func(c *Config) {
			c.GitHub.App.WebhookSecret = ""
			c.Sandbox.Driver = "lxc"
			c.GitHub.V3APIURL = "nope"
		}, []string{"github.app.webhook_secret", "sandbox.driver", "github.v3_api_url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.edit(&c)
			err := c.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want one naming %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	key := mustKeyPEM(t)
	t.Setenv("T_LOAD_KEY", string(key))
	good := "github:\n  app:\n    integration_id: 3\n    webhook_secret: s\n    private_key: ${T_LOAD_KEY}\nsandbox:\n  driver: process\n"
	p := mustFile(t, "config.yml", []byte(good), 0o600)
	c, err := LoadConfig(p)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if c.GitHub.App.IntegrationID != 3 || c.Sandbox.Driver != "process" {
		t.Errorf("got %+v", c)
	}

	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", good + "  imagee: x\n", []string{"config.yml", `unknown key "sandbox.imagee"`}},
		{"invalid", strings.Replace(good, "webhook_secret: s", "webhook_secret: \"\"", 1), []string{"config.yml", "github.app.webhook_secret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(mustFile(t, "config.yml", []byte(tt.yaml), 0o600))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.yml")); err == nil || !strings.Contains(err.Error(), "read config") {
		t.Errorf("missing file: error %v, want read config", err)
	}
}

// TestExampleConfigParses keeps the annotated config.yml at the root in
// step with Config: every key it documents is known.
func TestExampleConfigParses(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "config.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseConfig(data); err != nil {
		t.Fatalf("config.yml: %v", err)
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"", 0, false},
		{"0", 0, false},
		{"100", 100, false},
		{"1k", 1 << 10, false},
		{"512m", 512 << 20, false},
		{"4g", 4 << 30, false},
		{"4G", 4 << 30, false},
		{" 2g ", 2 << 30, false},
		{"lots", 0, true},
		{"-1", 0, true},
		{"1.5g", 0, true},
		{"g", 0, true},
		{"4gb", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
