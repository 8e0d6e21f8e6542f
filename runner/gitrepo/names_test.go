package gitrepo

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestParseCloneURL(t *testing.T) {
	tests := []struct {
		url     string
		want    repoID
		wantErr string
	}{
		{url: "https://github.com/acme/calc.git", want: repoID{"github.com", "acme", "calc"}},
		{url: "https://github.com/acme/calc", want: repoID{"github.com", "acme", "calc"}},
		{url: "http://127.0.0.1:8080/a-b/c_d.e.git", want: repoID{"127.0.0.1:8080", "a-b", "c_d.e"}},
		{url: "https://GitHub.com/Acme/Calc.git", want: repoID{"github.com", "Acme", "Calc"}},
		{url: "https://x-access-token:s3cret@github.com/acme/calc.git", wantErr: "must not carry credentials"},
		{url: "ssh://git@github.com/acme/calc.git", wantErr: "must not carry credentials"},
		{url: "file:///etc/calc.git", wantErr: "scheme must be https"},
		{url: "git@github.com:acme/calc.git", wantErr: "clone URL"},
		{url: "https://github.com/acme/../calc.git", wantErr: "path must be /owner/name"},
		{url: "https://github.com/../../etc", wantErr: "path must be /owner/name"},
		{url: "https://github.com/.hidden/calc", wantErr: "path must be /owner/name"},
		{url: "https://github.com/acme/calc/extra", wantErr: "path must be /owner/name"},
		{url: "https://github.com/acme", wantErr: "path must be /owner/name"},
		{url: "https://github.com/acme/calc.git?x=1", wantErr: "query"},
		{url: "https://gi/thub.com@/acme/calc", wantErr: "clone URL"},
		{url: "", wantErr: "scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got, err := parseCloneURL(tt.url)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("error leaks the password: %v", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestMirrorPath(t *testing.T) {
	id, err := parseCloneURL("http://127.0.0.1:8080/Acme/Calc.git")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := id.mirrorPath("/cache"), filepath.FromSlash("/cache/127.0.0.1_8080/acme/calc.git"); got != want {
		t.Errorf("mirrorPath = %s, want %s", got, want)
	}
}

func TestCheckBranch(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"main", true},
		{"gohands/issue-5", true},
		{"feature/a.b_c", true},
		{"", false},
		{"a..b", false},
		{"../x", false},
		{"-x", false},
		{"a b", false},
		{"a~1", false},
		{"a:b", false},
		{"a/", false},
		{"a.lock", false},
		{"x@{1}", false},
	}
	for _, tt := range tests {
		err := checkBranch("branch", tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("checkBranch(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}
