package apptest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
)

// GitHubRepo describes a repository the emulator serves.
type GitHubRepo struct {
	Owner         string
	Name          string
	DefaultBranch string // "main" when empty
	CloneURL      string
	Private       bool
}

// GitHubIssue seeds an issue (AddIssue) and reports one (Issue).
type GitHubIssue struct {
	Title  string
	Body   string
	Author string
	Labels []string
	// Number, State and IsPullRequest are filled in by the emulator.
	Number        int
	State         string
	IsPullRequest bool
}

// GitHubPR seeds a pull request (AddPullRequest) and reports one (PullRequests).
type GitHubPR struct {
	Title  string
	Body   string
	Author string
	Head   string // branch name
	Base   string // branch name; the repository's default branch when empty
	// HeadRepoFullName is "owner/name" of the head repository; a fork when it
	// is not the base repository. Empty means the base repository.
	HeadRepoFullName string
	HeadCloneURL     string
	HeadSHA          string
	Draft            bool
	// Number, State, Labels and Reviewers (requested reviewers) are filled in by the emulator.
	Number    int
	State     string
	Labels    []string
	Reviewers []string
}

// GitHubComment is an issue or pull request conversation comment as the emulator holds it.
type GitHubComment struct {
	ID        int64
	Author    string
	Body      string
	Edits     int // PATCHes since creation
	CreatedAt time.Time
	UpdatedAt time.Time
}

// GitHubReviewComment seeds (AddReviewComment) an inline pull request review comment.
type GitHubReviewComment struct {
	ID        int64 // filled in by the emulator
	Author    string
	Body      string
	Path      string
	Line      int
	DiffHunk  string
	ReviewID  int64
	InReplyTo int64
}

// GitHubReview seeds (AddReview) a submitted pull request review.
type GitHubReview struct {
	ID     int64 // filled in by the emulator
	Author string
	Body   string
	State  string // APPROVED, CHANGES_REQUESTED or COMMENTED (default)
}

// The subjects a reaction can be on.
const (
	GitHubReactIssue         = "issue"
	GitHubReactIssueComment  = "issue_comment"
	GitHubReactReviewComment = "review_comment"
)

// GitHubReaction is one reaction the emulator received.
type GitHubReaction struct {
	Subject   string // GitHubReactIssue, GitHubReactIssueComment or GitHubReactReviewComment
	Number    int    // the issue or PR, for GitHubReactIssue
	CommentID int64  // for comment subjects
	Content   string
	User      string
	At        time.Time
}

type ghRepo struct {
	id     int64
	info   GitHubRepo
	next   int // last issue/PR number used
	issues map[int]*ghIssue
	perms  map[string]string
}

type ghIssue struct {
	id        int64
	number    int
	title     string
	body      string
	author    string
	labels    []string
	state     string
	created   time.Time
	updated   time.Time
	comments  []int64
	pr        *ghPull
	reviewCms []int64
}

type ghPull struct {
	head, base, headRepo, headCloneURL, headSHA string
	draft                                       bool
	reviewers                                   []string
}

type ghComment struct {
	id      int64
	repo    string
	number  int
	author  string
	body    string
	edits   int
	created time.Time
	updated time.Time
}

type ghReviewComment struct {
	GitHubReviewComment
	repo    string
	number  int
	created time.Time
}

type ghReaction struct {
	GitHubReaction
	repo string
}

type ghReview struct {
	GitHubReview
	repo      string
	number    int
	submitted time.Time
}

var validPermissions = []string{"admin", "maintain", "write", "triage", "read", "none"}

var validReactions = []string{"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}

func (g *GitHub) buildRoutes() []ghRoute {
	r := func(method, pattern string, auth authKind, h func(*ghCtx)) ghRoute {
		return ghRoute{method: method, raw: pattern, pattern: splitPath(pattern), auth: auth, handle: h}
	}
	const repo = "/repos/{owner}/{repo}"
	// Literal segments must come before wildcards at the same position:
	// the first matching route wins.
	return []ghRoute{
		r("GET", "/app", authJWT, g.getApp),
		r("POST", "/app/installations/{id}/access_tokens", authJWT, g.createToken),
		r("POST", "/app-manifests/{code}/conversions", authNone, g.convertManifest),
		r("GET", repo+"/installation", authJWT, g.getRepoInstallation),
		r("GET", repo, authToken, g.getRepo),
		r("GET", "/users/{login}", authToken, g.getUser),
		r("GET", repo+"/collaborators/{user}/permission", authToken, g.getPermission),
		r("GET", repo+"/issues/comments/{id}", authToken, g.getComment),
		r("PATCH", repo+"/issues/comments/{id}", authToken, g.editComment),
		r("DELETE", repo+"/issues/comments/{id}", authToken, g.deleteComment),
		r("POST", repo+"/issues/comments/{id}/reactions", authToken, g.reactIssueComment),
		r("GET", repo+"/issues/{number}", authToken, g.getIssue),
		r("POST", repo+"/issues/{number}/labels", authToken, g.addLabels),
		r("DELETE", repo+"/issues/{number}/labels", authToken, g.removeAllLabels),
		r("DELETE", repo+"/issues/{number}/labels/{label}", authToken, g.removeLabel),
		r("GET", repo+"/issues/{number}/comments", authToken, g.listComments),
		r("POST", repo+"/issues/{number}/comments", authToken, g.createComment),
		r("POST", repo+"/issues/{number}/reactions", authToken, g.reactIssue),
		r("GET", repo+"/pulls/comments/{id}", authToken, g.getReviewComment),
		r("POST", repo+"/pulls/comments/{id}/reactions", authToken, g.reactReviewComment),
		r("GET", repo+"/pulls", authToken, g.listPulls),
		r("POST", repo+"/pulls", authToken, g.createPull),
		r("GET", repo+"/pulls/{number}", authToken, g.getPull),
		r("PATCH", repo+"/pulls/{number}", authToken, g.editPull),
		r("POST", repo+"/pulls/{number}/requested_reviewers", authToken, g.requestReviewers),
		r("GET", repo+"/pulls/{number}/comments", authToken, g.listReviewComments),
		r("POST", repo+"/pulls/{number}/comments", authToken, g.createReviewComment),
		r("POST", repo+"/pulls/{number}/comments/{id}/replies", authToken, g.replyReviewComment),
		r("GET", repo+"/pulls/{number}/reviews/{id}", authToken, g.getReview),
		r("GET", repo+"/pulls/{number}/reviews/{id}/comments", authToken, g.listReviewCommentsOfReview),
	}
}

// --- seeding and inspection ---------------------------------------------

func repoKey(owner, repo string) string { return strings.ToLower(owner + "/" + repo) }

func (g *GitHub) newID() int64 {
	g.nextID++
	return g.nextID
}

// AddRepo makes a repository exist, with the App installed on it.
func (g *GitHub) AddRepo(r GitHubRepo) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.DefaultBranch == "" {
		r.DefaultBranch = "main"
	}
	if old, ok := g.repos[repoKey(r.Owner, r.Name)]; ok {
		old.info = r
		return
	}
	g.repos[repoKey(r.Owner, r.Name)] = &ghRepo{id: g.newID(), info: r, issues: map[int]*ghIssue{}, perms: map[string]string{}}
}

// SetPermission gives user a role on a repository: admin, maintain, write, triage, read or none.
// Users never given a role get "none" from the permission endpoint (the emulator does not model
// GitHub's 404 for logins that do not exist).
func (g *GitHub) SetPermission(owner, repo, user, perm string) error {
	if !slices.Contains(validPermissions, perm) {
		return fmt.Errorf("permission %q: want one of %v", perm, validPermissions)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	rp, err := g.repo(owner, repo)
	if err != nil {
		return err
	}
	rp.perms[strings.ToLower(user)] = perm
	return nil
}

func (g *GitHub) repo(owner, repo string) (*ghRepo, error) {
	rp, ok := g.repos[repoKey(owner, repo)]
	if !ok {
		return nil, fmt.Errorf("repository %s/%s: not added (AddRepo)", owner, repo)
	}
	return rp, nil
}

func (g *GitHub) issue(owner, repo string, n int) (*ghRepo, *ghIssue, error) {
	rp, err := g.repo(owner, repo)
	if err != nil {
		return nil, nil, err
	}
	is, ok := rp.issues[n]
	if !ok {
		return nil, nil, fmt.Errorf("%s/%s#%d: no such issue or pull request", owner, repo, n)
	}
	return rp, is, nil
}

func (g *GitHub) newIssue(rp *ghRepo, title, body, author string, labels []string) *ghIssue {
	rp.next++
	now := time.Now()
	is := &ghIssue{id: g.newID(), number: rp.next, title: title, body: body, author: author,
		labels: slices.Clone(labels), state: "open", created: now, updated: now}
	rp.issues[is.number] = is
	return is
}

// AddIssue creates an issue and returns its number.
func (g *GitHub) AddIssue(owner, repo string, is GitHubIssue) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	rp, err := g.repo(owner, repo)
	if err != nil {
		return 0, err
	}
	n := g.newIssue(rp, is.Title, is.Body, is.Author, is.Labels)
	if is.State != "" {
		n.state = is.State
	}
	return n.number, nil
}

// EditIssue changes an issue's or pull request's title and body, as its
// author editing it on GitHub would; no webhook is sent.
func (g *GitHub) EditIssue(owner, repo string, n int, title, body string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, is, err := g.issue(owner, repo, n)
	if err != nil {
		return err
	}
	is.title, is.body = title, body
	return nil
}

// Issue reports an issue or pull request as the emulator holds it now.
func (g *GitHub) Issue(owner, repo string, n int) (GitHubIssue, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, is, err := g.issue(owner, repo, n)
	if err != nil {
		return GitHubIssue{}, err
	}
	return GitHubIssue{Title: is.title, Body: is.body, Author: is.author, Labels: slices.Clone(is.labels),
		Number: is.number, State: is.state, IsPullRequest: is.pr != nil}, nil
}

// AddPullRequest creates a pull request and returns its number.
func (g *GitHub) AddPullRequest(owner, repo string, pr GitHubPR) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	rp, err := g.repo(owner, repo)
	if err != nil {
		return 0, err
	}
	if pr.Head == "" {
		return 0, fmt.Errorf("pull request %q: empty Head", pr.Title)
	}
	is := g.newIssue(rp, pr.Title, pr.Body, pr.Author, pr.Labels)
	if pr.State != "" {
		is.state = pr.State
	}
	base := pr.Base
	if base == "" {
		base = rp.info.DefaultBranch
	}
	headRepo := pr.HeadRepoFullName
	if headRepo == "" {
		headRepo = rp.info.Owner + "/" + rp.info.Name
	}
	cloneURL := pr.HeadCloneURL
	if cloneURL == "" && strings.EqualFold(headRepo, rp.info.Owner+"/"+rp.info.Name) {
		cloneURL = rp.info.CloneURL
	}
	is.pr = &ghPull{head: pr.Head, base: base, headRepo: headRepo, headCloneURL: cloneURL,
		headSHA: pr.HeadSHA, draft: pr.Draft}
	return is.number, nil
}

// PullRequests returns the repository's pull requests, oldest first.
func (g *GitHub) PullRequests(owner, repo string) ([]GitHubPR, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	rp, err := g.repo(owner, repo)
	if err != nil {
		return nil, err
	}
	var out []GitHubPR
	for n := 1; n <= rp.next; n++ {
		is := rp.issues[n]
		if is == nil || is.pr == nil {
			continue
		}
		out = append(out, GitHubPR{Title: is.title, Body: is.body, Author: is.author, Head: is.pr.head,
			Base: is.pr.base, HeadRepoFullName: is.pr.headRepo, HeadCloneURL: is.pr.headCloneURL,
			HeadSHA: is.pr.headSHA, Draft: is.pr.draft, Number: is.number, State: is.state,
			Labels: slices.Clone(is.labels), Reviewers: slices.Clone(is.pr.reviewers)})
	}
	return out, nil
}

// AddComment seeds a conversation comment on an issue or pull request and returns its id.
func (g *GitHub) AddComment(owner, repo string, n int, author, body string) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	rp, is, err := g.issue(owner, repo, n)
	if err != nil {
		return 0, err
	}
	return g.newComment(rp, is, author, body).id, nil
}

func (g *GitHub) newComment(rp *ghRepo, is *ghIssue, author, body string) *ghComment {
	now := time.Now()
	c := &ghComment{id: g.newID(), repo: repoKey(rp.info.Owner, rp.info.Name), number: is.number,
		author: author, body: body, created: now, updated: now}
	g.comments[c.id] = c
	is.comments = append(is.comments, c.id)
	return c
}

// Comments returns the current conversation comments of an issue or pull request, oldest first.
func (g *GitHub) Comments(owner, repo string, n int) ([]GitHubComment, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, is, err := g.issue(owner, repo, n)
	if err != nil {
		return nil, err
	}
	out := make([]GitHubComment, 0, len(is.comments))
	for _, id := range is.comments {
		c := g.comments[id]
		out = append(out, GitHubComment{ID: c.id, Author: c.author, Body: c.body, Edits: c.edits,
			CreatedAt: c.created, UpdatedAt: c.updated})
	}
	return out, nil
}

// AddReview seeds a submitted review on pull request pr and returns its id.
func (g *GitHub) AddReview(owner, repo string, pr int, rv GitHubReview) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, is, err := g.issue(owner, repo, pr)
	if err != nil {
		return 0, err
	}
	if is.pr == nil {
		return 0, fmt.Errorf("%s/%s#%d is an issue, not a pull request", owner, repo, pr)
	}
	if rv.State == "" {
		rv.State = "COMMENTED"
	}
	rv.ID = g.newID()
	g.reviews[rv.ID] = &ghReview{GitHubReview: rv, repo: repoKey(owner, repo), number: pr, submitted: time.Now()}
	return rv.ID, nil
}

// AddReviewComment seeds an inline review comment on pull request pr and returns its id.
func (g *GitHub) AddReviewComment(owner, repo string, pr int, rc GitHubReviewComment) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, is, err := g.issue(owner, repo, pr)
	if err != nil {
		return 0, err
	}
	if is.pr == nil {
		return 0, fmt.Errorf("%s/%s#%d is an issue, not a pull request", owner, repo, pr)
	}
	return g.newReviewComment(is, repoKey(owner, repo), rc).ID, nil
}

func (g *GitHub) newReviewComment(is *ghIssue, repo string, rc GitHubReviewComment) *ghReviewComment {
	rc.ID = g.newID()
	c := &ghReviewComment{GitHubReviewComment: rc, repo: repo, number: is.number, created: time.Now()}
	g.reviewComments[rc.ID] = c
	is.reviewCms = append(is.reviewCms, rc.ID)
	return c
}

// ReviewComments returns the inline review comments of a pull request, oldest first.
func (g *GitHub) ReviewComments(owner, repo string, pr int) ([]GitHubReviewComment, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, is, err := g.issue(owner, repo, pr)
	if err != nil {
		return nil, err
	}
	var out []GitHubReviewComment
	for _, id := range is.reviewCms {
		out = append(out, g.reviewComments[id].GitHubReviewComment)
	}
	return out, nil
}

// Reactions returns the reactions given on a repository's issues, PRs and comments, in order.
func (g *GitHub) Reactions(owner, repo string) []GitHubReaction {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []GitHubReaction
	for _, r := range g.reactions {
		if r.repo == repoKey(owner, repo) {
			out = append(out, r.GitHubReaction)
		}
	}
	return out
}

// getUser answers GET /users/{login}: every login exists, with a stable id.
func (g *GitHub) getUser(c *ghCtx) {
	c.json(http.StatusOK, g.user(c.params["login"]))
}

// --- JSON shapes --------------------------------------------------------

func (g *GitHub) user(login string) *github.User {
	id, ok := g.users[strings.ToLower(login)]
	if !ok {
		id = g.newID()
		g.users[strings.ToLower(login)] = id
	}
	typ := "User"
	if strings.HasSuffix(login, "[bot]") {
		typ = "Bot"
	}
	return &github.User{Login: github.String(login), ID: github.Int64(id), Type: github.String(typ),
		HTMLURL: github.String(g.URL + "/" + login)}
}

func (g *GitHub) repoJSON(rp *ghRepo) *github.Repository {
	full := rp.info.Owner + "/" + rp.info.Name
	vis := "public"
	if rp.info.Private {
		vis = "private"
	}
	return &github.Repository{
		ID: github.Int64(rp.id), Name: github.String(rp.info.Name), FullName: github.String(full),
		Owner: g.user(rp.info.Owner), Private: github.Bool(rp.info.Private), Visibility: github.String(vis),
		DefaultBranch: github.String(rp.info.DefaultBranch), CloneURL: github.String(rp.info.CloneURL),
		HTMLURL: github.String(g.URL + "/" + full), URL: github.String(g.URL + "/repos/" + full),
		Fork: github.Bool(false),
	}
}

func labelsJSON(names []string) []*github.Label {
	out := make([]*github.Label, 0, len(names))
	for _, n := range names {
		out = append(out, &github.Label{Name: github.String(n)})
	}
	return out
}

func ts(t time.Time) *github.Timestamp { return &github.Timestamp{Time: t.UTC().Truncate(time.Second)} }

func (g *GitHub) issueJSON(rp *ghRepo, is *ghIssue) *github.Issue {
	full := rp.info.Owner + "/" + rp.info.Name
	out := &github.Issue{
		ID: github.Int64(is.id), Number: github.Int(is.number), Title: github.String(is.title),
		Body: github.String(is.body), State: github.String(is.state), User: g.user(is.author),
		Labels: labelsJSON(is.labels), Comments: github.Int(len(is.comments)),
		CreatedAt: ts(is.created), UpdatedAt: ts(is.updated),
		URL:     github.String(fmt.Sprintf("%s/repos/%s/issues/%d", g.URL, full, is.number)),
		HTMLURL: github.String(fmt.Sprintf("%s/%s/issues/%d", g.URL, full, is.number)),
	}
	if is.pr != nil {
		out.HTMLURL = github.String(fmt.Sprintf("%s/%s/pull/%d", g.URL, full, is.number))
		out.PullRequestLinks = &github.PullRequestLinks{
			URL:     github.String(fmt.Sprintf("%s/repos/%s/pulls/%d", g.URL, full, is.number)),
			HTMLURL: out.HTMLURL,
		}
	}
	return out
}

func (g *GitHub) pullJSON(rp *ghRepo, is *ghIssue) *github.PullRequest {
	full := rp.info.Owner + "/" + rp.info.Name
	p := is.pr
	headOwner, headName, _ := strings.Cut(p.headRepo, "/")
	headRepo := &github.Repository{FullName: github.String(p.headRepo), Name: github.String(headName),
		Owner: g.user(headOwner), CloneURL: github.String(p.headCloneURL),
		Fork: github.Bool(!strings.EqualFold(p.headRepo, full))}
	var reviewers []*github.User
	for _, r := range p.reviewers {
		reviewers = append(reviewers, g.user(r))
	}
	return &github.PullRequest{
		ID: github.Int64(is.id), Number: github.Int(is.number), State: github.String(is.state),
		Title: github.String(is.title), Body: github.String(is.body), Draft: github.Bool(p.draft),
		User: g.user(is.author), Labels: labelsJSON(is.labels), Merged: github.Bool(false),
		CreatedAt: ts(is.created), UpdatedAt: ts(is.updated), Comments: github.Int(len(is.comments)),
		RequestedReviewers: reviewers,
		URL:                github.String(fmt.Sprintf("%s/repos/%s/pulls/%d", g.URL, full, is.number)),
		HTMLURL:            github.String(fmt.Sprintf("%s/%s/pull/%d", g.URL, full, is.number)),
		Head: &github.PullRequestBranch{Label: github.String(headOwner + ":" + p.head), Ref: github.String(p.head),
			SHA: github.String(p.headSHA), Repo: headRepo, User: g.user(headOwner)},
		Base: &github.PullRequestBranch{Label: github.String(rp.info.Owner + ":" + p.base), Ref: github.String(p.base),
			Repo: g.repoJSON(rp), User: g.user(rp.info.Owner)},
	}
}

func (g *GitHub) commentJSON(c *ghComment) *github.IssueComment {
	rp := g.repos[c.repo]
	full := rp.info.Owner + "/" + rp.info.Name
	return &github.IssueComment{
		ID: github.Int64(c.id), Body: github.String(c.body), User: g.user(c.author),
		CreatedAt: ts(c.created), UpdatedAt: ts(c.updated),
		URL:      github.String(fmt.Sprintf("%s/repos/%s/issues/comments/%d", g.URL, full, c.id)),
		HTMLURL:  github.String(fmt.Sprintf("%s/%s/issues/%d#issuecomment-%d", g.URL, full, c.number, c.id)),
		IssueURL: github.String(fmt.Sprintf("%s/repos/%s/issues/%d", g.URL, full, c.number)),
	}
}

func (g *GitHub) reviewCommentJSON(c *ghReviewComment) *github.PullRequestComment {
	rp := g.repos[c.repo]
	full := rp.info.Owner + "/" + rp.info.Name
	out := &github.PullRequestComment{
		ID: github.Int64(c.ID), Body: github.String(c.Body), User: g.user(c.Author),
		Path: github.String(c.Path), DiffHunk: github.String(c.DiffHunk),
		CreatedAt: ts(c.created), UpdatedAt: ts(c.created),
		URL:            github.String(fmt.Sprintf("%s/repos/%s/pulls/comments/%d", g.URL, full, c.ID)),
		HTMLURL:        github.String(fmt.Sprintf("%s/%s/pull/%d#discussion_r%d", g.URL, full, c.number, c.ID)),
		PullRequestURL: github.String(fmt.Sprintf("%s/repos/%s/pulls/%d", g.URL, full, c.number)),
	}
	if c.Line > 0 {
		out.Line = github.Int(c.Line)
	}
	if c.ReviewID != 0 {
		out.PullRequestReviewID = github.Int64(c.ReviewID)
	}
	if c.InReplyTo != 0 {
		out.InReplyTo = github.Int64(c.InReplyTo)
	}
	return out
}

// --- handlers -------------------------------------------------------------

func (c *ghCtx) repo() (*ghRepo, bool) {
	rp, ok := c.g.repos[repoKey(c.params["owner"], c.params["repo"])]
	if !ok {
		c.fail(http.StatusNotFound, "Not Found")
	}
	return rp, ok
}

func (c *ghCtx) issue() (*ghRepo, *ghIssue, bool) {
	rp, ok := c.repo()
	if !ok {
		return nil, nil, false
	}
	n, ok := c.intParam("number")
	if !ok {
		return nil, nil, false
	}
	is, ok := rp.issues[int(n)]
	if !ok {
		c.fail(http.StatusNotFound, "Not Found")
	}
	return rp, is, ok
}

func (c *ghCtx) pull() (*ghRepo, *ghIssue, bool) {
	rp, is, ok := c.issue()
	if ok && is.pr == nil {
		c.fail(http.StatusNotFound, "Not Found")
		return nil, nil, false
	}
	return rp, is, ok
}

func (g *GitHub) getApp(c *ghCtx) {
	c.json(http.StatusOK, &github.App{ID: github.Int64(g.AppID), Slug: github.String(g.Slug),
		Name: github.String(g.name), Owner: g.user("gohands-org"),
		HTMLURL: github.String(g.URL + "/apps/" + g.Slug)})
}

func (g *GitHub) createToken(c *ghCtx) {
	id, ok := c.intParam("id")
	if !ok {
		return
	}
	if id != g.InstallationID {
		c.fail(http.StatusNotFound, "Not Found")
		return
	}
	tok, exp := g.issueToken()
	c.json(http.StatusCreated, map[string]any{
		"token":                tok,
		"expires_at":           exp.UTC().Format(time.RFC3339),
		"permissions":          map[string]string{"contents": "write", "issues": "write", "pull_requests": "write", "metadata": "read"},
		"repository_selection": "all",
	})
}

func (g *GitHub) getRepoInstallation(c *ghCtx) {
	rp, ok := c.repo()
	if !ok {
		return
	}
	c.json(http.StatusOK, &github.Installation{ID: github.Int64(g.InstallationID), AppID: github.Int64(g.AppID),
		AppSlug: github.String(g.Slug), Account: g.user(rp.info.Owner), TargetType: github.String("User"),
		RepositorySelection: github.String("all")})
}

func (g *GitHub) convertManifest(c *ghCtx) {
	code := c.params["code"]
	if !g.manifestCodes[code] {
		c.fail(http.StatusNotFound, "Not Found")
		return
	}
	delete(g.manifestCodes, code) // codes are single-use, like GitHub's
	now := time.Now()
	c.json(http.StatusCreated, &github.AppConfig{
		ID: github.Int64(g.AppID), Slug: github.String(g.Slug), Name: github.String(g.name),
		Owner: g.user("gohands-org"), HTMLURL: github.String(g.URL + "/apps/" + g.Slug),
		CreatedAt: ts(now), UpdatedAt: ts(now),
		ClientID: github.String("Iv1." + randomString(16)), ClientSecret: github.String(randomString(40)),
		WebhookSecret: github.String(g.WebhookSecret), PEM: github.String(string(g.PrivateKeyPEM)),
	})
}

func (g *GitHub) getRepo(c *ghCtx) {
	if rp, ok := c.repo(); ok {
		c.json(http.StatusOK, g.repoJSON(rp))
	}
}

func (g *GitHub) getPermission(c *ghCtx) {
	rp, ok := c.repo()
	if !ok {
		return
	}
	if g.failPermission > 0 {
		g.failPermission--
		c.fail(http.StatusBadGateway, "Server Error")
		return
	}
	user := c.params["user"]
	role, ok := rp.perms[strings.ToLower(user)]
	if !ok {
		role = "none"
	}
	// permission is GitHub's legacy field: maintain shows as write, triage as read.
	legacy := map[string]string{"admin": "admin", "maintain": "write", "write": "write",
		"triage": "read", "read": "read", "none": "none"}[role]
	roleName := role
	if role == "none" {
		roleName = ""
	}
	c.json(http.StatusOK, map[string]any{"permission": legacy, "role_name": roleName, "user": g.user(user)})
}

func (g *GitHub) getIssue(c *ghCtx) {
	if rp, is, ok := c.issue(); ok {
		c.json(http.StatusOK, g.issueJSON(rp, is))
	}
}

func (g *GitHub) addLabels(c *ghCtx) {
	_, is, ok := c.issue()
	if !ok {
		return
	}
	raw, err := io.ReadAll(c.r.Body)
	if err != nil {
		c.fail(http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	// go-github sends a bare array; GitHub also accepts {"labels": [...]}.
	var names []string
	if err := json.Unmarshal(raw, &names); err != nil {
		var obj struct {
			Labels []string `json:"labels"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			c.fail(http.StatusBadRequest, "Problems parsing JSON")
			return
		}
		names = obj.Labels
	}
	for _, n := range names {
		if !slices.Contains(is.labels, n) {
			is.labels = append(is.labels, n)
		}
	}
	is.updated = time.Now()
	c.json(http.StatusOK, labelsJSON(is.labels))
}

func (g *GitHub) removeAllLabels(c *ghCtx) {
	if _, is, ok := c.issue(); ok {
		is.labels = nil
		c.w.WriteHeader(http.StatusNoContent)
	}
}

func (g *GitHub) removeLabel(c *ghCtx) {
	_, is, ok := c.issue()
	if !ok {
		return
	}
	i := slices.Index(is.labels, c.params["label"])
	if i < 0 {
		c.fail(http.StatusNotFound, "Label does not exist")
		return
	}
	is.labels = slices.Delete(is.labels, i, i+1)
	c.json(http.StatusOK, labelsJSON(is.labels))
}

func (g *GitHub) listComments(c *ghCtx) {
	_, is, ok := c.issue()
	if !ok {
		return
	}
	out := make([]*github.IssueComment, 0, len(is.comments))
	for _, id := range is.comments {
		out = append(out, g.commentJSON(g.comments[id]))
	}
	c.json(http.StatusOK, paginate(c, out))
}

func (g *GitHub) createComment(c *ghCtx) {
	rp, is, ok := c.issue()
	if !ok {
		return
	}
	var in struct {
		Body *string `json:"body"`
	}
	if !c.decode(&in) {
		return
	}
	if in.Body == nil || *in.Body == "" {
		c.invalid("IssueComment", "body", "missing_field", "")
		return
	}
	c.json(http.StatusCreated, g.commentJSON(g.newComment(rp, is, c.actor, *in.Body)))
}

// byID returns the object of m that the path's {id} names, answering 404
// unless belongs says it is the requested repository's (or PR's).
func byID[T any](c *ghCtx, m map[int64]T, belongs func(T) bool) (T, bool) {
	var zero T
	id, ok := c.intParam("id")
	if !ok {
		return zero, false
	}
	v, ok := m[id]
	if !ok || !belongs(v) {
		c.fail(http.StatusNotFound, "Not Found")
		return zero, false
	}
	return v, true
}

func (c *ghCtx) comment() (*ghComment, bool) {
	rp, ok := c.repo()
	if !ok {
		return nil, false
	}
	key := repoKey(rp.info.Owner, rp.info.Name)
	return byID(c, c.g.comments, func(cm *ghComment) bool { return cm.repo == key })
}

func (g *GitHub) getComment(c *ghCtx) {
	if cm, ok := c.comment(); ok {
		c.json(http.StatusOK, g.commentJSON(cm))
	}
}

func (g *GitHub) editComment(c *ghCtx) {
	cm, ok := c.comment()
	if !ok {
		return
	}
	if cm.author != c.actor {
		c.fail(http.StatusForbidden, "Resource not accessible by integration")
		return
	}
	var in struct {
		Body *string `json:"body"`
	}
	if !c.decode(&in) {
		return
	}
	if in.Body == nil || *in.Body == "" {
		c.invalid("IssueComment", "body", "missing_field", "")
		return
	}
	cm.body = *in.Body
	cm.edits++
	cm.updated = time.Now()
	c.json(http.StatusOK, g.commentJSON(cm))
}

func (g *GitHub) deleteComment(c *ghCtx) {
	cm, ok := c.comment()
	if !ok {
		return
	}
	if cm.author != c.actor {
		c.fail(http.StatusForbidden, "Resource not accessible by integration")
		return
	}
	delete(g.comments, cm.id)
	is := g.repos[cm.repo].issues[cm.number]
	is.comments = slices.DeleteFunc(is.comments, func(id int64) bool { return id == cm.id })
	c.w.WriteHeader(http.StatusNoContent)
}

func (g *GitHub) react(c *ghCtx, r GitHubReaction) {
	var in struct {
		Content string `json:"content"`
	}
	if !c.decode(&in) {
		return
	}
	if !slices.Contains(validReactions, in.Content) {
		c.invalid("Reaction", "content", "invalid", "")
		return
	}
	r.Content, r.User, r.At = in.Content, c.actor, time.Now()
	repo := repoKey(c.params["owner"], c.params["repo"])
	for i, old := range g.reactions {
		if old.repo == repo && reactionKey(old.GitHubReaction) == reactionKey(r) {
			// GitHub answers 200 with the existing reaction.
			c.json(http.StatusOK, &github.Reaction{ID: github.Int64(int64(i + 1)), User: g.user(r.User), Content: github.String(r.Content)})
			return
		}
	}
	g.reactions = append(g.reactions, ghReaction{GitHubReaction: r, repo: repo})
	c.json(http.StatusCreated, &github.Reaction{ID: github.Int64(int64(len(g.reactions))), User: g.user(r.User), Content: github.String(r.Content)})
}

// reactionKey identifies a reaction: one per subject, user and content.
func reactionKey(r GitHubReaction) string {
	return fmt.Sprintf("%s/%d/%d/%s/%s", r.Subject, r.Number, r.CommentID, r.User, r.Content)
}

func (g *GitHub) reactIssue(c *ghCtx) {
	if _, is, ok := c.issue(); ok {
		g.react(c, GitHubReaction{Subject: GitHubReactIssue, Number: is.number})
	}
}

func (g *GitHub) reactIssueComment(c *ghCtx) {
	if cm, ok := c.comment(); ok {
		g.react(c, GitHubReaction{Subject: GitHubReactIssueComment, CommentID: cm.id})
	}
}

func (c *ghCtx) reviewComment() (*ghReviewComment, bool) {
	rp, ok := c.repo()
	if !ok {
		return nil, false
	}
	key := repoKey(rp.info.Owner, rp.info.Name)
	return byID(c, c.g.reviewComments, func(rc *ghReviewComment) bool { return rc.repo == key })
}

func (g *GitHub) reactReviewComment(c *ghCtx) {
	if rc, ok := c.reviewComment(); ok {
		g.react(c, GitHubReaction{Subject: GitHubReactReviewComment, CommentID: rc.ID})
	}
}

func (g *GitHub) getReviewComment(c *ghCtx) {
	if rc, ok := c.reviewComment(); ok {
		c.json(http.StatusOK, g.reviewCommentJSON(rc))
	}
}

// headMatches reports whether a PR's head matches the "owner:branch" filter of
// GET /pulls; a filter without an owner is taken as a branch of any repository.
func headMatches(p *ghPull, filter string) bool {
	owner, branch, ok := strings.Cut(filter, ":")
	if !ok {
		return p.head == filter
	}
	headOwner, _, _ := strings.Cut(p.headRepo, "/")
	return strings.EqualFold(headOwner, owner) && p.head == branch
}

func (g *GitHub) listPulls(c *ghCtx) {
	rp, ok := c.repo()
	if !ok {
		return
	}
	q := c.r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	var out []*github.PullRequest
	for n := 1; n <= rp.next; n++ {
		is := rp.issues[n]
		if is == nil || is.pr == nil {
			continue
		}
		if state != "all" && is.state != state {
			continue
		}
		if h := q.Get("head"); h != "" && !headMatches(is.pr, h) {
			continue
		}
		if b := q.Get("base"); b != "" && is.pr.base != b {
			continue
		}
		out = append(out, g.pullJSON(rp, is))
	}
	if out == nil {
		out = []*github.PullRequest{}
	}
	c.json(http.StatusOK, paginate(c, out))
}

func (g *GitHub) createPull(c *ghCtx) {
	rp, ok := c.repo()
	if !ok {
		return
	}
	var in github.NewPullRequest
	if !c.decode(&in) {
		return
	}
	title, head, base := in.GetTitle(), in.GetHead(), in.GetBase()
	switch {
	case title == "" && in.Issue == nil:
		c.invalid("PullRequest", "title", "missing_field", "")
		return
	case head == "":
		c.invalid("PullRequest", "head", "missing_field", "")
		return
	case base == "":
		c.invalid("PullRequest", "base", "missing_field", "")
		return
	}
	headOwner, branch, hasOwner := strings.Cut(head, ":")
	if !hasOwner {
		headOwner, branch = rp.info.Owner, head
	}
	if !strings.EqualFold(headOwner, rp.info.Owner) {
		c.invalid("PullRequest", "head", "invalid", "") // forks are seeded with AddPullRequest
		return
	}
	if branch == base {
		c.invalid("PullRequest", "", "custom", "No commits between "+base+" and "+branch)
		return
	}
	sha := ""
	if g.resolveRef != nil {
		s, ok := g.resolveRef(rp.info.Owner, rp.info.Name, branch)
		if !ok {
			c.invalid("PullRequest", "head", "invalid", "")
			return
		}
		sha = s
	}
	for n := 1; n <= rp.next; n++ {
		if is := rp.issues[n]; is != nil && is.pr != nil && is.state == "open" &&
			is.pr.head == branch && strings.EqualFold(is.pr.headRepo, rp.info.Owner+"/"+rp.info.Name) {
			c.invalid("PullRequest", "", "custom", "A pull request already exists for "+rp.info.Owner+":"+branch+".")
			return
		}
	}
	is := g.newIssue(rp, title, in.GetBody(), c.actor, nil)
	is.pr = &ghPull{head: branch, base: base, headRepo: rp.info.Owner + "/" + rp.info.Name,
		headCloneURL: rp.info.CloneURL, headSHA: sha, draft: in.GetDraft()}
	c.json(http.StatusCreated, g.pullJSON(rp, is))
}

func (g *GitHub) getPull(c *ghCtx) {
	if rp, is, ok := c.pull(); ok {
		c.json(http.StatusOK, g.pullJSON(rp, is))
	}
}

func (g *GitHub) editPull(c *ghCtx) {
	rp, is, ok := c.pull()
	if !ok {
		return
	}
	var in struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
		State *string `json:"state"`
		Base  *string `json:"base"`
	}
	if !c.decode(&in) {
		return
	}
	if in.State != nil && *in.State != "open" && *in.State != "closed" {
		c.invalid("PullRequest", "state", "invalid", "")
		return
	}
	if in.Title != nil {
		is.title = *in.Title
	}
	if in.Body != nil {
		is.body = *in.Body
	}
	if in.State != nil {
		is.state = *in.State
	}
	if in.Base != nil {
		is.pr.base = *in.Base
	}
	is.updated = time.Now()
	c.json(http.StatusOK, g.pullJSON(rp, is))
}

func (g *GitHub) requestReviewers(c *ghCtx) {
	rp, is, ok := c.pull()
	if !ok {
		return
	}
	var in github.ReviewersRequest
	if !c.decode(&in) {
		return
	}
	for _, r := range in.Reviewers {
		if strings.EqualFold(r, is.author) {
			c.invalid("PullRequest", "", "custom", "Review cannot be requested from pull request author.")
			return
		}
		if role := rp.perms[strings.ToLower(r)]; role == "" || role == "none" {
			c.invalid("PullRequest", "", "custom", "Reviews may only be requested from collaborators. One or more of the users or teams you specified is not a collaborator of the "+rp.info.Owner+"/"+rp.info.Name+" repository.")
			return
		}
	}
	for _, r := range in.Reviewers {
		if !slices.Contains(is.pr.reviewers, r) {
			is.pr.reviewers = append(is.pr.reviewers, r)
		}
	}
	c.json(http.StatusCreated, g.pullJSON(rp, is))
}

func (g *GitHub) listReviewComments(c *ghCtx) {
	_, is, ok := c.pull()
	if !ok {
		return
	}
	out := []*github.PullRequestComment{}
	for _, id := range is.reviewCms {
		out = append(out, g.reviewCommentJSON(g.reviewComments[id]))
	}
	c.json(http.StatusOK, paginate(c, out))
}

// createReviewComment handles POST .../pulls/{n}/comments; gohands only uses
// it for replies (go-github's CreateCommentInReplyTo), so a new thread is refused.
func (g *GitHub) createReviewComment(c *ghCtx) {
	_, is, ok := c.pull()
	if !ok {
		return
	}
	var in struct {
		Body      string `json:"body"`
		InReplyTo int64  `json:"in_reply_to"`
	}
	if !c.decode(&in) {
		return
	}
	if in.InReplyTo == 0 {
		c.invalid("PullRequestReviewComment", "commit_id", "missing_field", "")
		return
	}
	g.reply(c, is, in.InReplyTo, in.Body)
}

func (g *GitHub) replyReviewComment(c *ghCtx) {
	_, is, ok := c.pull()
	if !ok {
		return
	}
	id, ok := c.intParam("id")
	if !ok {
		return
	}
	var in struct {
		Body string `json:"body"`
	}
	if !c.decode(&in) {
		return
	}
	g.reply(c, is, id, in.Body)
}

func (g *GitHub) reply(c *ghCtx, is *ghIssue, to int64, body string) {
	parent, ok := g.reviewComments[to]
	if !ok || parent.number != is.number || parent.repo != repoKey(c.params["owner"], c.params["repo"]) {
		c.fail(http.StatusNotFound, "Not Found")
		return
	}
	if body == "" {
		c.invalid("PullRequestReviewComment", "body", "missing_field", "")
		return
	}
	// GitHub threads replies on the thread's first comment.
	root := parent.ID
	if parent.InReplyTo != 0 {
		root = parent.InReplyTo
	}
	rc := g.newReviewComment(is, parent.repo, GitHubReviewComment{Author: c.actor, Body: body,
		Path: parent.Path, Line: parent.Line, DiffHunk: parent.DiffHunk, InReplyTo: root})
	c.json(http.StatusCreated, g.reviewCommentJSON(rc))
}

func (c *ghCtx) review() (*ghReview, bool) {
	rp, is, ok := c.pull()
	if !ok {
		return nil, false
	}
	key := repoKey(rp.info.Owner, rp.info.Name)
	return byID(c, c.g.reviews, func(rv *ghReview) bool { return rv.repo == key && rv.number == is.number })
}

func (g *GitHub) getReview(c *ghCtx) {
	rv, ok := c.review()
	if !ok {
		return
	}
	c.json(http.StatusOK, &github.PullRequestReview{ID: github.Int64(rv.ID), User: g.user(rv.Author),
		Body: github.String(rv.Body), State: github.String(rv.State), SubmittedAt: ts(rv.submitted)})
}

func (g *GitHub) listReviewCommentsOfReview(c *ghCtx) {
	rv, ok := c.review()
	if !ok {
		return
	}
	is := g.repos[rv.repo].issues[rv.number]
	out := []*github.PullRequestComment{}
	for _, id := range is.reviewCms {
		if rc := g.reviewComments[id]; rc.ReviewID == rv.ID {
			out = append(out, g.reviewCommentJSON(rc))
		}
	}
	c.json(http.StatusOK, paginate(c, out))
}
