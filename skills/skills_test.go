package skills

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Skill
		wantErr string
	}{
		{name: "no frontmatter", in: "# Hello\nbody\n", want: Skill{Name: "def", Content: "# Hello\nbody"}},
		{name: "full", in: "---\nname: deploy\ntype: knowledge\nversion: 1.0.0\nagent: CodeActAgent\ntriggers:\n- deploy\n- Ship It\ninputs:\n- name: ENV\n  description: target\n---\nDo it.\n",
			want: Skill{Name: "deploy", Type: "knowledge", Version: "1.0.0", Agent: "CodeActAgent", Triggers: []string{"deploy", "Ship It"}, Inputs: []Input{{Name: "ENV", Description: "target"}}, Content: "Do it."}},
		{name: "crlf and bom", in: "\ufeff---\r\nname: x\r\n---\r\nbody\r\n", want: Skill{Name: "x", Content: "body"}},
		{name: "empty frontmatter", in: "---\n---\nbody", want: Skill{Name: "def", Content: "body"}},
		{name: "closing at end", in: "---\nname: y\n---", wantErr: "no content"},
		{name: "unknown keys ignored", in: "---\nname: z\nmcp_tools: {a: 1}\n---\nbody", want: Skill{Name: "z", Content: "body"}},
		{name: "no closing", in: "---\nname: x\nbody", wantErr: "no closing '---'"},
		{name: "bad yaml", in: "---\nname: [x\n---\nbody", wantErr: "frontmatter"},
		{name: "triggers not a list", in: "---\ntriggers: {a: b}\n---\nbody", wantErr: "frontmatter"},
		{name: "empty trigger", in: "---\ntriggers: ['', a]\n---\nbody", wantErr: "trigger 1 is empty"},
		{name: "input without name", in: "---\ninputs:\n- description: d\n---\nbody", wantErr: "input 1 has no name"},
		{name: "empty body", in: "---\nname: x\n---\n  \n", wantErr: "no content"},
		{name: "invalid utf8", in: "\xff\xfe", wantErr: "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in), "def")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse = %+v\nwant    %+v", got, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("---\nname: a\ntriggers: [x]\n---\nbody"))
	f.Add([]byte("no frontmatter"))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sk, err := Parse(data, "fallback")
		if err != nil {
			return
		}
		if strings.TrimSpace(sk.Name) == "" || sk.Content == "" {
			t.Fatalf("Parse accepted a skill without name or content: %+v", sk)
		}
		for _, tr := range sk.Triggers {
			if strings.TrimSpace(tr) == "" {
				t.Fatalf("empty trigger accepted: %q", sk.Triggers)
			}
		}
	})
}

func TestContainsWord(t *testing.T) {
	tests := []struct {
		text, word string
		want       bool
	}{
		{"please use git here", "git", true},
		{"Git: broken", "git", true},
		{"see github.com", "git", false},
		{"digit", "git", false},
		{"git_hub", "git", false},
		{"run the tests.", "tests", true},
		{"ship it now", "ship it", true},
		{"x /deploy y", "/deploy", true},
		{"café git", "git", true},
		{"égit", "git", false},
		{"", "git", false},
		{"git", "", false},
		{"gitgit git", "git", true},
	}
	for _, tt := range tests {
		if got := containsWord(strings.ToLower(tt.text), tt.word); got != tt.want {
			t.Errorf("containsWord(%q, %q) = %v, want %v", tt.text, tt.word, got, tt.want)
		}
	}
}

func mustWrite(tb testing.TB, dir, rel, content string) {
	tb.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	mustWrite(t, outside, "secret.md", "---\nname: stolen\n---\nsecret")
	mustWrite(t, dir, "AGENTS.md", "Use make test.")
	mustWrite(t, dir, "agent.md", "never loaded: AGENTS.md comes first")
	mustWrite(t, dir, ".cursorrules", "Tabs, not spaces.")
	mustWrite(t, dir, ".openhands/skills/b/deploy.md", "---\nname: deploy\ntriggers: [deploy]\n---\nDeploy with make deploy.")
	mustWrite(t, dir, ".openhands/skills/a/style.md", "---\nname: style\n---\nRepo style.")
	mustWrite(t, dir, ".openhands/skills/broken.md", "---\nname: [\n---\nx")
	mustWrite(t, dir, ".openhands/skills/README.md", "not a skill")
	mustWrite(t, dir, ".openhands/microagents/deploy.md", "---\nname: deploy\ntriggers: [deploy]\n---\nLegacy: loses to the skill.")
	mustWrite(t, dir, ".openhands/microagents/legacy.md", "---\ntriggers: [legacy]\n---\nOld format.")
	mustWrite(t, dir, ".openhands/microagents/nested/deep.md", "---\nname: deep\n---\nmicroagents are not recursive")
	mustWrite(t, dir, ".openhands/skills/github.md", "---\nname: github\ntriggers: [github]\n---\nRepo overrides builtin.")
	if err := os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(dir, ".openhands/skills/escape.md")); err != nil {
		t.Fatal(err)
	}

	set, warnings := Load(dir)
	var warned []string
	for _, w := range warnings {
		warned = append(warned, w.Path)
	}
	wantWarned := []string{".openhands/skills/broken.md", ".openhands/skills/escape.md"}
	if !reflect.DeepEqual(warned, wantWarned) {
		t.Errorf("warnings for %q, want %q (%v)", warned, wantWarned, warnings)
	}
	wantNames := []string{"agents", "cursorrules", "style", "deploy", "github", "legacy", "security", "testing"}
	if got := set.Names(); !reflect.DeepEqual(got, wantNames) {
		t.Fatalf("names = %q, want %q", got, wantNames)
	}
	byName := map[string]Skill{}
	for _, sk := range set {
		byName[sk.Name] = sk
		if strings.Contains(sk.Content, "secret") && sk.Name == "stolen" {
			t.Fatal("a symlink escaped the repository")
		}
	}
	if got := byName["deploy"]; got.Path != ".openhands/skills/b/deploy.md" || got.Source != SourceRepo {
		t.Errorf("deploy came from %s (%s), want the skill, not the microagent", got.Path, got.Source)
	}
	if got := byName["github"].Content; got != "Repo overrides builtin." {
		t.Errorf("github skill = %q, want the repository's", got)
	}
	if got := byName["testing"].Source; got != SourceBuiltin {
		t.Errorf("testing source = %q, want builtin", got)
	}
	var always []string
	for _, sk := range set.AlwaysOn() {
		always = append(always, sk.Name)
	}
	if want := []string{"agents", "cursorrules", "style"}; !reflect.DeepEqual(always, want) {
		t.Errorf("AlwaysOn = %q, want %q", always, want)
	}
}

func TestTriggeredOncePerJob(t *testing.T) {
	set, warnings := Load("")
	if len(warnings) > 0 {
		t.Fatalf("builtin warnings: %v", warnings)
	}
	seen := map[string]bool{}
	if got := set.Triggered("Look at github.com/foo and fix it", seen); len(got) != 1 || got[0].Name != "github" {
		t.Fatalf("first message triggered %v, want github (by the word github)", names(got))
	}
	if got := set.Triggered("now also the git history and the Tests", seen); len(got) != 1 || got[0].Name != "testing" {
		t.Fatalf("second message triggered %v, want only testing (github already given)", names(got))
	}
	if got := set.Triggered("tests again, git again", seen); len(got) != 0 {
		t.Fatalf("third message triggered %v, want nothing", names(got))
	}
	seen = map[string]bool{}
	if got := set.Triggered("the digits of gitlab", seen); len(got) != 0 {
		t.Fatalf("substrings triggered %v", names(got))
	}
}

func TestLoadMissingDir(t *testing.T) {
	set, warnings := Load(filepath.Join(t.TempDir(), "nope"))
	if len(warnings) != 1 || !strings.Contains(warnings[0].String(), "open repository") {
		t.Fatalf("warnings = %v, want one about the repository", warnings)
	}
	if len(set) == 0 {
		t.Fatal("built-in skills missing")
	}
}

func names(s []Skill) []string { return Set(s).Names() }
