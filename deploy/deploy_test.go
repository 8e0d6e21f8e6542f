// Package deploy_test checks the deployment files: the image builds on this
// machine from a static binary and runs, and every YAML file parses and says
// what the rest of gohands expects.
package deploy_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gohands/gohands/app"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// testVersion is stamped into the test build, to see -ldflags -X work.
const testVersion = "v0.0.0-deploytest"

// mustBuildContext runs build-image.sh once per test run, without its docker
// build step, and returns the image build context it wrote.
func mustBuildContext(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "gohands-deploy-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("bash", "build-image.sh")
		cmd.Env = append(os.Environ(), "BUILD_DIR="+buildDir, "BUILD_ONLY=1", "VERSION="+testVersion)
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build-image.sh: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return buildDir
}

// requireDocker skips the test when no Docker engine answers, unless CI is
// "true": there a missing engine is a failure.
func requireDocker(tb testing.TB) {
	tb.Helper()
	out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("no Docker engine: %v: %s", err, bytes.TrimSpace(out))
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

func TestBinaryIsStatic(t *testing.T) {
	ctx := mustBuildContext(t)
	f, err := elf.Open(filepath.Join(ctx, "gohands"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %v program header: it is dynamically linked", p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("imported libraries %v (%v), want none", libs, err)
	}
	for _, name := range []string{"ca-certificates.crt", "config.yml", "tmp", "data"} {
		if _, err := os.Stat(filepath.Join(ctx, name)); err != nil {
			t.Errorf("build context: %v", err)
		}
	}
}

func TestImage(t *testing.T) {
	requireDocker(t)
	ctx := mustBuildContext(t)
	tag := fmt.Sprintf("gohands-deploytest:%d", time.Now().UnixNano())
	if out, err := exec.Command("docker", "build", "-q", "-f", "Dockerfile", "-t", tag, ctx).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })

	out, err := exec.Command("docker", "run", "--rm", tag, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("docker run %s version: %v\n%s", tag, err, out)
	}
	if got, want := string(out), "gohands "+testVersion+"\n"; got != want {
		t.Errorf("version printed %q, want %q", got, want)
	}

	out, err = exec.Command("docker", "image", "inspect", "--format", "{{json .Config}}", tag).Output()
	if err != nil {
		t.Fatalf("docker image inspect: %v", err)
	}
	var cfg struct {
		User         string
		Entrypoint   []string
		Cmd          []string
		ExposedPorts map[string]struct{}
		Volumes      map[string]struct{}
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("image config %s: %v", out, err)
	}
	if cfg.User != "65532:65532" || !slices.Equal(cfg.Entrypoint, []string{"/gohands"}) ||
		!slices.Equal(cfg.Cmd, []string{"serve", "-config", "/etc/gohands/config.yml"}) {
		t.Errorf("user %q, entrypoint %q, cmd %q", cfg.User, cfg.Entrypoint, cfg.Cmd)
	}
	if _, ok := cfg.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("exposed ports %v, want 8080/tcp", cfg.ExposedPorts)
	}
	if _, ok := cfg.Volumes["/var/lib/gohands"]; !ok {
		t.Errorf("volumes %v, want /var/lib/gohands", cfg.Volumes)
	}
}

// mustParseYAML decodes every document of a YAML file.
func mustParseYAML(tb testing.TB, path string) []map[string]any {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, d)
	}
	if len(docs) == 0 {
		tb.Fatalf("%s: no YAML document", path)
	}
	return docs
}

// get walks nested maps and lists: get(doc, "spec", "template", 0, "name").
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func TestYAMLFilesParse(t *testing.T) {
	files, err := filepath.Glob("k8s/*.y*ml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "compose.yml", "config.container.yml", "app-manifest.yml", "action/action.yml", "examples/gohands.yml")
	for _, f := range files {
		t.Run(f, func(t *testing.T) { mustParseYAML(t, f) })
	}
}

func TestContainerConfig(t *testing.T) {
	data, err := os.ReadFile("config.container.yml")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"GITHUB_APP_ID": "12345", "GITHUB_WEBHOOK_SECRET": "s", "OPENAI_API_KEY": "k",
		"GITHUB_APP_PRIVATE_KEY": mustKeyFile(t), "GOHANDS_PUBLIC_URL": "",
	} {
		t.Setenv(k, v)
	}
	cfg, err := app.ParseConfig(data)
	if err != nil {
		t.Fatalf("config.container.yml with the environment of compose.yml: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("config.container.yml does not validate: %v", err)
	}
	if cfg.GitHub.App.IntegrationID != 12345 || cfg.Server.Address != "0.0.0.0:8080" || cfg.Store.Path != "/var/lib/gohands" {
		t.Errorf("id %d, address %q, store %q", cfg.GitHub.App.IntegrationID, cfg.Server.Address, cfg.Store.Path)
	}
	// Every key of the annotated config.yml, and no other.
	want, got := mustKeys(t, "../config.yml"), mustKeys(t, "config.container.yml")
	if !slices.Equal(got, want) {
		t.Errorf("config.container.yml keys %v,\nconfig.yml keys %v", got, want)
	}
}

// mustKeyFile writes a throwaway RSA key in PEM, as a mounted key file.
func mustKeyFile(tb testing.TB) string {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(tb.TempDir(), "key.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(p, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// mustKeys lists the dotted paths of all keys of a YAML file, sorted.
func mustKeys(tb testing.TB, path string) []string {
	tb.Helper()
	var keys []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, c := range m {
			keys = append(keys, prefix+k)
			walk(prefix+k+".", c)
		}
	}
	walk("", mustParseYAML(tb, path)[0])
	slices.Sort(keys)
	return keys
}

func TestCompose(t *testing.T) {
	svc := get(mustParseYAML(t, "compose.yml")[0], "services", "gohands")
	env, _ := get(svc, "environment").(map[string]any)
	for _, k := range []string{"GITHUB_APP_ID", "GITHUB_WEBHOOK_SECRET", "GITHUB_APP_PRIVATE_KEY", "OPENAI_API_KEY"} {
		if _, ok := env[k]; !ok {
			t.Errorf("environment lacks %s", k)
		}
	}
	vols := fmt.Sprint(get(svc, "volumes"))
	for _, want := range []string{"/var/run/docker.sock:/var/run/docker.sock", "gohands-data:/var/lib/gohands"} {
		if !strings.Contains(vols, want) {
			t.Errorf("volumes %s lack %s", vols, want)
		}
	}
}

func TestKubernetes(t *testing.T) {
	kust := mustParseYAML(t, "k8s/kustomization.yaml")[0]
	kinds := map[string]map[string]any{}
	for _, r := range get(kust, "resources").([]any) {
		for _, d := range mustParseYAML(t, filepath.Join("k8s", r.(string))) {
			kinds[fmt.Sprint(d["kind"])] = d
		}
	}
	for _, k := range []string{"Deployment", "Service", "Secret", "PersistentVolumeClaim", "ConfigMap"} {
		if kinds[k] == nil {
			t.Errorf("no %s among the kustomization's resources", k)
		}
	}
	dep := kinds["Deployment"]
	if r := get(dep, "spec", "replicas"); r != 1 {
		t.Errorf("replicas = %v, want 1 (the store has one writer)", r)
	}
	if s := get(dep, "spec", "strategy", "type"); s != "Recreate" {
		t.Errorf("strategy = %v, want Recreate", s)
	}
	dind := get(dep, "spec", "template", "spec", "initContainers", 0)
	if get(dind, "securityContext", "privileged") != true || get(dind, "restartPolicy") != "Always" ||
		!slices.Contains(get(dind, "args").([]any), any("--host=tcp://127.0.0.1:2375")) {
		t.Errorf("dind sidecar = %v", dind)
	}
	c := get(dep, "spec", "template", "spec", "containers", 0)
	if get(c, "readinessProbe", "httpGet", "path") != app.HealthPath {
		t.Errorf("readiness probe = %v, want %s", get(c, "readinessProbe"), app.HealthPath)
	}
	if env := fmt.Sprint(get(c, "env")); !strings.Contains(env, "tcp://127.0.0.1:2375") {
		t.Errorf("env %s has no DOCKER_HOST to the sidecar", env)
	}
	want, err := os.ReadFile("config.container.yml")
	if err != nil {
		t.Fatal(err)
	}
	if got := get(kinds["ConfigMap"], "data", "config.yml"); got != string(want) {
		t.Errorf("the ConfigMap's config.yml differs from config.container.yml")
	}
}

func TestAction(t *testing.T) {
	a := mustParseYAML(t, "action/action.yml")[0]
	if get(a, "runs", "using") != "composite" {
		t.Errorf("runs.using = %v", get(a, "runs", "using"))
	}
	inputs, _ := get(a, "inputs").(map[string]any)
	for _, in := range []string{"config", "openai_api_key", "model", "llm_base_url"} {
		if inputs[in] == nil {
			t.Errorf("no input %s", in)
		}
	}
	// Each output the action declares comes from the step that runs
	// gohands, under the name `gohands action` writes to GITHUB_OUTPUT.
	outputs, _ := get(a, "outputs").(map[string]any)
	for _, out := range []string{"state", "job_id", "pull_request", "pull_request_url", "reason"} {
		if got, want := fmt.Sprint(get(outputs, out, "value")), "${{ steps.gohands.outputs."+out+" }}"; got != want {
			t.Errorf("output %s = %s, want %s", out, got, want)
		}
	}
	var ids []string
	var steps strings.Builder
	for _, s := range get(a, "runs", "steps").([]any) {
		if strings.Contains(fmt.Sprint(get(s, "run")), "gohands action") {
			ids = append(ids, fmt.Sprint(get(s, "id")))
		}
		fmt.Fprintln(&steps, get(s, "run"), get(s, "uses"))
		if run, ok := get(s, "run").(string); ok {
			if out, err := exec.Command("bash", "-n", "-c", run).CombinedOutput(); err != nil {
				t.Errorf("step %v: bash -n: %v\n%s", get(s, "name"), err, out)
			}
		}
	}
	if len(ids) != 1 || ids[0] != "gohands" {
		t.Errorf("the steps running gohands have ids %v, want one: gohands", ids)
	}
	for _, want := range []string{"actions/setup-go", "go install \"github.com/gohands/gohands/cmd/gohands@", "gohands action"} {
		if !strings.Contains(steps.String(), want) {
			t.Errorf("steps lack %q:\n%s", want, steps.String())
		}
	}

	w := mustParseYAML(t, "examples/gohands.yml")[0]
	on, _ := w["on"].(map[string]any)
	for ev, types := range map[string]string{"issues": "labeled", "issue_comment": "created",
		"pull_request_review_comment": "created", "pull_request_review": "submitted"} {
		if got := fmt.Sprint(get(on, ev, "types")); got != "["+types+"]" {
			t.Errorf("on.%s.types = %s, want [%s]", ev, got, types)
		}
	}
	inputs, _ = get(on, "workflow_dispatch", "inputs").(map[string]any)
	for _, in := range []string{"issue_number", "pr_number", "prompt"} {
		if inputs[in] == nil {
			t.Errorf("workflow_dispatch has no input %s", in)
		}
	}
	perms := map[string]any{"contents": "write", "pull-requests": "write", "issues": "write"}
	if !reflect.DeepEqual(w["permissions"], perms) {
		t.Errorf("permissions = %v, want %v", w["permissions"], perms)
	}
	job := get(w, "jobs", "gohands")
	cond := fmt.Sprint(get(job, "if"))
	for _, want := range []string{"github.event.label.name == 'gohands'", "contains(github.event.comment.body, '@gohands')"} {
		if !strings.Contains(cond, want) {
			t.Errorf("the job's if: lacks %s", want)
		}
	}
	if uses := fmt.Sprint(get(job, "steps", 0, "uses")); !strings.HasPrefix(uses, "gohands/gohands/deploy/action@") {
		t.Errorf("the job uses %s, want the action", uses)
	}
}

// make test runs exactly the README's test command.
func TestMakefileTestIsREADMECommand(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var recipe string
	lines := strings.Split(string(mk), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "test:") && i+1 < len(lines) {
			recipe = strings.TrimSpace(strings.ReplaceAll(lines[i+1], "$(GO)", "go"))
		}
	}
	if recipe == "" || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(recipe)+`\s`).Match(readme) {
		t.Errorf("make test runs %q, which is not the README's test command", recipe)
	}
}
