// Package prompts renders the agent's prompts from embedded text/template
// files: the system prompt, the task for an issue, and the task for a pull
// request follow-up. It knows nothing of GitHub clients or the model.
package prompts

import (
	"embed"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"text/template"
	"time"
)

//go:embed templates/*.tmpl
var files embed.FS

var tmpl = template.Must(template.New("prompts").Funcs(template.FuncMap{"join": strings.Join, "fence": fence}).ParseFS(files, "templates/*.tmpl"))

// closingTags are the tags the task prompt wraps people's text in.
var closingTags = regexp.MustCompile(`(?i)<\s*/\s*(title|body|labels|issue|pull_request|comment|review_comment|diff_hunk|request|resume)\s*>`)

// fence keeps text that people wrote inside the tag that wraps it: a
// closing tag of the prompt's own in it, such as "</issue>" in an issue
// body meant to end the issue early and pose as gohands' instructions, is
// written "<\/issue>". Nothing else changes.
func fence(text string) string {
	return closingTags.ReplaceAllStringFunc(text, func(tag string) string {
		return `<\/` + strings.TrimLeft(tag[1:], " \t\r\n/")
	})
}

// SystemData is what the system prompt says about the sandbox.
type SystemData struct {
	// Repository is owner/name.
	Repository string
	// WorkDir is the repository's path inside the sandbox.
	WorkDir string
	// Branch is the branch checked out, if known.
	Branch string
	// Isolated is set for a container sandbox, Image names its image.
	Isolated bool
	Image    string
	// Network tells whether commands can reach the network.
	Network bool
}

// Comment is a comment of a person on an issue or pull request.
type Comment struct {
	Author    string
	Body      string
	CreatedAt time.Time
}

// Resume describes the work an earlier run left on the branch.
type Resume struct {
	// Branch is the work branch, Base the branch it started from.
	Branch string
	Base   string
	// Commits are the subjects of the branch's commits, oldest first.
	Commits []string
	// DiffStat is `git diff --stat` of the branch against its base.
	DiffStat string
}

// IssueData is an issue to resolve. Comments must already be filtered to
// people with write access.
type IssueData struct {
	Repository string
	Number     int
	Title      string
	Body       string
	// Author opened the issue; Outsider is set when the author has no write
	// access, and the prompt then frames the title and body as a report to
	// read, not instructions to follow.
	Author   string
	Outsider bool
	Labels   []string
	Comments []Comment
	// Requester is who asked, Instruction the text of the ask (may be empty).
	Requester   string
	Instruction string
	// Resume is set when the branch already has commits from an earlier run.
	Resume *Resume
}

// Kind names what IssueData describes, for the templates.
func (IssueData) Kind() string { return "issue" }

// ReviewComment is an inline review comment on a pull request.
type ReviewComment struct {
	Author   string
	Body     string
	Path     string
	Line     int
	DiffHunk string
}

// PRData is a follow-up request on a pull request.
type PRData struct {
	Repository string
	Number     int
	Title      string
	Body       string
	// Author opened the pull request; Outsider as in IssueData.
	Author     string
	Outsider   bool
	HeadBranch string
	BaseBranch string
	// Trigger is the comment that asked for this round of work.
	Trigger Comment
	// ReviewComments are the inline comments with their file, line and hunk.
	ReviewComments []ReviewComment
	// Thread is the pull request's conversation, filtered to people with write access.
	Thread    []Comment
	Requester string
	Resume    *Resume
}

// Kind names what PRData describes, for the templates.
func (PRData) Kind() string { return "pull request" }

// System renders the system prompt.
func System(d SystemData) (string, error) {
	if d.Repository == "" || d.WorkDir == "" {
		return "", errors.New("prompts: system prompt needs the repository and the work directory")
	}
	return render("system.tmpl", d)
}

// Issue renders the task for an issue.
func Issue(d IssueData) (string, error) {
	if d.Repository == "" || d.Number <= 0 {
		return "", fmt.Errorf("prompts: issue needs a repository and a positive number, got %q #%d", d.Repository, d.Number)
	}
	if strings.TrimSpace(d.Title) == "" {
		return "", fmt.Errorf("prompts: issue %s#%d has no title", d.Repository, d.Number)
	}
	if err := checkResume(d.Resume); err != nil {
		return "", err
	}
	return render("issue", d)
}

// PullRequest renders the task for a pull request follow-up.
func PullRequest(d PRData) (string, error) {
	if d.Repository == "" || d.Number <= 0 {
		return "", fmt.Errorf("prompts: pull request needs a repository and a positive number, got %q #%d", d.Repository, d.Number)
	}
	if strings.TrimSpace(d.Trigger.Body) == "" {
		return "", fmt.Errorf("prompts: pull request %s#%d: the triggering comment is empty", d.Repository, d.Number)
	}
	for i, rc := range d.ReviewComments {
		if rc.Path == "" {
			return "", fmt.Errorf("prompts: review comment %d has no file path", i+1)
		}
	}
	if err := checkResume(d.Resume); err != nil {
		return "", err
	}
	return render("pull_request", d)
}

func checkResume(r *Resume) error {
	if r != nil && r.Branch == "" {
		return errors.New("prompts: resume needs the branch name")
	}
	return nil
}

func render(name string, data any) (string, error) {
	var b strings.Builder
	if err := tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("prompts: render %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}
