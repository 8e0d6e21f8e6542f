package apptest

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v66/github"
	"github.com/palantir/go-githubapp/githubapp"
)

// mustGitHubRepo starts an emulator with one repository "acme/widgets".
func mustGitHubRepo(tb testing.TB) (*GitHub, *github.Client) {
	tb.Helper()
	g := NewGitHub(tb)
	g.AddRepo(GitHubRepo{Owner: "acme", Name: "widgets", CloneURL: "http://git.example/acme/widgets.git"})
	return g, g.Client(g.InstallationToken())
}

func mustNoErr(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// appClient is a go-github client that authenticates as the App (JWT) through ghinstallation.
func appClient(tb testing.TB, g *GitHub, appID int64, key []byte) *github.Client {
	tb.Helper()
	tr, err := ghinstallation.NewAppsTransport(http.DefaultTransport, appID, key)
	if err != nil {
		tb.Fatal(err)
	}
	tr.BaseURL = g.URL
	c := github.NewClient(&http.Client{Transport: tr})
	c.BaseURL, _ = url.Parse(g.URL + "/")
	return c
}

func statusOf(err error) int {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	return 0
}

// signJWT hand-builds an RS256 JWT, to send claims ghinstallation never would.
func signJWT(tb testing.TB, key *rsa.PrivateKey, claims map[string]any) string {
	tb.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signed := enc(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		tb.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestGitHubAppJWT(t *testing.T) {
	g, _ := mustGitHubRepo(t)
	ctx := context.Background()

	app, _, err := appClient(t, g, g.AppID, g.PrivateKeyPEM).Apps.Get(ctx, "")
	mustNoErr(t, err)
	if app.GetSlug() != "gohands" || app.GetID() != g.AppID {
		t.Fatalf("GET /app = %+v", app)
	}

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	mustNoErr(t, err)
	otherPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})
	key, err := x509.ParsePKCS1PrivateKey(mustPEM(t, g.PrivateKeyPEM))
	mustNoErr(t, err)
	now := time.Now().Unix()

	tests := []struct {
		name  string
		token string
	}{
		{"wrong key", signJWT(t, other, map[string]any{"iss": g.AppID, "iat": now - 60, "exp": now + 300})},
		{"expired", signJWT(t, key, map[string]any{"iss": g.AppID, "iat": now - 900, "exp": now - 300})},
		{"wrong issuer", signJWT(t, key, map[string]any{"iss": g.AppID + 1, "iat": now - 60, "exp": now + 300})},
		{"lives an hour", signJWT(t, key, map[string]any{"iss": g.AppID, "iat": now - 60, "exp": now + 3600})},
		{"not a JWT", "abc.def"},
		{"installation token", g.InstallationToken()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := g.Client(tt.token).Apps.Get(ctx, "")
			if statusOf(err) != http.StatusUnauthorized {
				t.Fatalf("GET /app with %s: err = %v, want 401", tt.name, err)
			}
		})
	}
	// Sanity: the hand-made JWT is accepted when it is right, so the cases above fail for their reason.
	good := signJWT(t, key, map[string]any{"iss": fmt.Sprint(g.AppID), "iat": now - 60, "exp": now + 300})
	if _, _, err := g.Client(good).Apps.Get(ctx, ""); err != nil {
		t.Fatalf("valid hand-made JWT rejected: %v", err)
	}
	if _, _, err := appClient(t, g, g.AppID, otherPEM).Apps.Get(ctx, ""); statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("ghinstallation with another key: %v, want 401", err)
	}
}

func mustPEM(tb testing.TB, b []byte) []byte {
	tb.Helper()
	blk, _ := pem.Decode(b)
	if blk == nil {
		tb.Fatal("no PEM block")
		return nil
	}
	return blk.Bytes
}

func TestGitHubInstallationTokens(t *testing.T) {
	g, _ := mustGitHubRepo(t)
	ctx := context.Background()
	app := appClient(t, g, g.AppID, g.PrivateKeyPEM)

	inst, _, err := app.Apps.FindRepositoryInstallation(ctx, "acme", "widgets")
	mustNoErr(t, err)
	if inst.GetID() != g.InstallationID {
		t.Fatalf("installation id = %d, want %d", inst.GetID(), g.InstallationID)
	}
	tok, _, err := app.Apps.CreateInstallationToken(ctx, inst.GetID(), nil)
	mustNoErr(t, err)
	if !strings.HasPrefix(tok.GetToken(), "ghs_") || !tok.GetExpiresAt().After(time.Now()) {
		t.Fatalf("token = %q expires %v", tok.GetToken(), tok.GetExpiresAt())
	}
	if !g.ValidToken(tok.GetToken()) || !g.ValidToken(g.ActionsToken) || g.ValidToken("ghs_nope") || g.ValidToken("") {
		t.Fatal("ValidToken disagrees with issued tokens")
	}
	if _, _, err := app.Apps.CreateInstallationToken(ctx, 999, nil); statusOf(err) != http.StatusNotFound {
		t.Fatalf("token for unknown installation: %v, want 404", err)
	}
	repo, _, err := g.Client(tok.GetToken()).Repositories.Get(ctx, "acme", "widgets")
	mustNoErr(t, err)
	if repo.GetDefaultBranch() != "main" || repo.GetCloneURL() != "http://git.example/acme/widgets.git" {
		t.Fatalf("repo = %+v", repo)
	}
	if _, _, err := g.Client("ghs_forged").Repositories.Get(ctx, "acme", "widgets"); statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("forged token: %v, want 401", err)
	} else if er := new(github.ErrorResponse); errors.As(err, &er) && er.Message != "Bad credentials" {
		t.Fatalf("401 message = %q", er.Message)
	}
	anon := github.NewClient(nil)
	anon.BaseURL, _ = url.Parse(g.URL + "/")
	if _, _, err := anon.Repositories.Get(ctx, "acme", "widgets"); statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("no credentials: %v, want 401", err)
	}
}

func TestGitHubWithGoGitHubApp(t *testing.T) {
	g, _ := mustGitHubRepo(t)
	ctx := context.Background()
	n, err := g.AddIssue("acme", "widgets", GitHubIssue{Title: "t", Author: "alice"})
	mustNoErr(t, err)

	cc, err := githubapp.NewDefaultCachingClientCreator(githubapp.Config{
		V3APIURL: g.URL + "/",
		App: struct {
			IntegrationID int64  `yaml:"integration_id" json:"integrationId"`
			WebhookSecret string `yaml:"webhook_secret" json:"webhookSecret"`
			PrivateKey    string `yaml:"private_key" json:"privateKey"`
		}{IntegrationID: g.AppID, WebhookSecret: g.WebhookSecret, PrivateKey: string(g.PrivateKeyPEM)},
	})
	mustNoErr(t, err)
	appc, err := cc.NewAppClient()
	mustNoErr(t, err)
	app, _, err := appc.Apps.Get(ctx, "")
	mustNoErr(t, err)
	if app.GetSlug() != g.Slug {
		t.Fatalf("slug = %q", app.GetSlug())
	}
	ic, err := cc.NewInstallationClient(g.InstallationID)
	mustNoErr(t, err)
	_, _, err = ic.Issues.CreateComment(ctx, "acme", "widgets", n, &github.IssueComment{Body: github.String("hi")})
	mustNoErr(t, err)
	cs, err := g.Comments("acme", "widgets", n)
	mustNoErr(t, err)
	if len(cs) != 1 || cs[0].Author != "gohands[bot]" {
		t.Fatalf("comments = %+v", cs)
	}
}

func TestGitHubNotFoundIsRecorded(t *testing.T) {
	g, c := mustGitHubRepo(t)
	req, err := c.NewRequest("GET", "repos/acme/widgets/no/such/thing", nil)
	mustNoErr(t, err)
	_, err = c.Do(context.Background(), req, nil)
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != 404 || er.Message != "Not Found" || er.DocumentationURL == "" {
		t.Fatalf("unknown route: %v", err)
	}
	calls := g.Calls()
	last := calls[len(calls)-1]
	if last.Path != "/repos/acme/widgets/no/such/thing" || last.Status != 404 || last.Method != "GET" || last.Time.IsZero() {
		t.Fatalf("last call = %+v", last)
	}
}

func TestGitHubIssuesLabelsComments(t *testing.T) {
	g, c := mustGitHubRepo(t)
	ctx := context.Background()
	n, err := g.AddIssue("acme", "widgets", GitHubIssue{Title: "Crash", Body: "it crashes", Author: "alice", Labels: []string{"bug"}})
	mustNoErr(t, err)

	is, _, err := c.Issues.Get(ctx, "acme", "widgets", n)
	mustNoErr(t, err)
	if is.GetTitle() != "Crash" || is.GetUser().GetLogin() != "alice" || is.IsPullRequest() || len(is.Labels) != 1 {
		t.Fatalf("issue = %+v", is)
	}
	_, _, err = c.Issues.AddLabelsToIssue(ctx, "acme", "widgets", n, []string{"gohands", "bug"})
	mustNoErr(t, err)
	_, err = c.Issues.RemoveLabelForIssue(ctx, "acme", "widgets", n, "bug")
	mustNoErr(t, err)
	got, err := g.Issue("acme", "widgets", n)
	mustNoErr(t, err)
	if strings.Join(got.Labels, ",") != "gohands" {
		t.Fatalf("labels = %v", got.Labels)
	}
	if _, err := c.Issues.RemoveLabelForIssue(ctx, "acme", "widgets", n, "absent"); statusOf(err) != 404 {
		t.Fatalf("remove absent label: %v", err)
	}

	// 35 comments: more than one default page, to check the Link header.
	for i := range 35 {
		_, err := g.AddComment("acme", "widgets", n, "bob", fmt.Sprintf("c%d", i))
		mustNoErr(t, err)
	}
	var all []*github.IssueComment
	opt := &github.IssueListCommentsOptions{}
	for {
		page, resp, err := c.Issues.ListComments(ctx, "acme", "widgets", n, opt)
		mustNoErr(t, err)
		all = append(all, page...)
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	if len(all) != 35 || all[34].GetBody() != "c34" {
		t.Fatalf("paginated %d comments", len(all))
	}

	mine, _, err := c.Issues.CreateComment(ctx, "acme", "widgets", n, &github.IssueComment{Body: github.String("working")})
	mustNoErr(t, err)
	if mine.GetUser().GetLogin() != "gohands[bot]" || mine.GetUser().GetType() != "Bot" {
		t.Fatalf("author = %+v", mine.GetUser())
	}
	for _, b := range []string{"step 1", "step 2"} {
		_, _, err = c.Issues.EditComment(ctx, "acme", "widgets", mine.GetID(), &github.IssueComment{Body: github.String(b)})
		mustNoErr(t, err)
	}
	fetched, _, err := c.Issues.GetComment(ctx, "acme", "widgets", mine.GetID())
	mustNoErr(t, err)
	if fetched.GetBody() != "step 2" {
		t.Fatalf("body = %q", fetched.GetBody())
	}
	cs, err := g.Comments("acme", "widgets", n)
	mustNoErr(t, err)
	if last := cs[len(cs)-1]; last.Edits != 2 || last.Body != "step 2" {
		t.Fatalf("inspector = %+v", last)
	}
	if _, _, err := c.Issues.EditComment(ctx, "acme", "widgets", all[0].GetID(), &github.IssueComment{Body: github.String("x")}); statusOf(err) != 403 {
		t.Fatalf("editing another's comment: %v, want 403", err)
	}
	_, err = c.Issues.DeleteComment(ctx, "acme", "widgets", mine.GetID())
	mustNoErr(t, err)
	if _, _, err := c.Issues.GetComment(ctx, "acme", "widgets", mine.GetID()); statusOf(err) != 404 {
		t.Fatalf("deleted comment: %v", err)
	}
}

func TestGitHubPullRequests(t *testing.T) {
	g, c := mustGitHubRepo(t)
	ctx := context.Background()
	mustNoErr(t, g.SetPermission("acme", "widgets", "alice", "write"))
	issue, err := g.AddIssue("acme", "widgets", GitHubIssue{Title: "Crash", Author: "alice"})
	mustNoErr(t, err)

	pr, _, err := c.PullRequests.Create(ctx, "acme", "widgets", &github.NewPullRequest{
		Title: github.String("Fix crash"), Head: github.String("gohands/issue-1"), Base: github.String("main"),
		Body: github.String("Fixes #1"), Draft: github.Bool(true)})
	mustNoErr(t, err)
	if pr.GetNumber() != issue+1 || !pr.GetDraft() || pr.GetHead().GetRef() != "gohands/issue-1" ||
		pr.GetHead().GetRepo().GetFullName() != "acme/widgets" || pr.GetUser().GetLogin() != "gohands[bot]" {
		t.Fatalf("created PR = %+v", pr)
	}

	_, _, err = c.PullRequests.Create(ctx, "acme", "widgets", &github.NewPullRequest{
		Title: github.String("again"), Head: github.String("acme:gohands/issue-1"), Base: github.String("main")})
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != 422 || len(er.Errors) != 1 ||
		er.Errors[0].Message != "A pull request already exists for acme:gohands/issue-1." {
		t.Fatalf("duplicate PR: %v", err)
	}

	list, _, err := c.PullRequests.List(ctx, "acme", "widgets", &github.PullRequestListOptions{Head: "acme:gohands/issue-1"})
	mustNoErr(t, err)
	if len(list) != 1 || list[0].GetNumber() != pr.GetNumber() {
		t.Fatalf("list by head = %d PRs", len(list))
	}
	list, _, err = c.PullRequests.List(ctx, "acme", "widgets", &github.PullRequestListOptions{Head: "acme:other"})
	mustNoErr(t, err)
	if len(list) != 0 {
		t.Fatalf("list by other head = %d PRs", len(list))
	}

	_, _, err = c.PullRequests.Edit(ctx, "acme", "widgets", pr.GetNumber(), &github.PullRequest{Body: github.String("new body")})
	mustNoErr(t, err)
	got, _, err := c.PullRequests.Get(ctx, "acme", "widgets", pr.GetNumber())
	mustNoErr(t, err)
	if got.GetBody() != "new body" || got.GetTitle() != "Fix crash" {
		t.Fatalf("edited PR = %q %q", got.GetTitle(), got.GetBody())
	}
	asIssue, _, err := c.Issues.Get(ctx, "acme", "widgets", pr.GetNumber())
	mustNoErr(t, err)
	if !asIssue.IsPullRequest() {
		t.Fatal("a PR fetched as an issue has no pull_request key")
	}

	_, _, err = c.PullRequests.RequestReviewers(ctx, "acme", "widgets", pr.GetNumber(), github.ReviewersRequest{Reviewers: []string{"gohands[bot]"}})
	if statusOf(err) != 422 {
		t.Fatalf("review from author: %v, want 422", err)
	}
	_, _, err = c.PullRequests.RequestReviewers(ctx, "acme", "widgets", pr.GetNumber(), github.ReviewersRequest{Reviewers: []string{"mallory"}})
	if statusOf(err) != 422 {
		t.Fatalf("review from non-collaborator: %v, want 422", err)
	}
	_, _, err = c.PullRequests.RequestReviewers(ctx, "acme", "widgets", pr.GetNumber(), github.ReviewersRequest{Reviewers: []string{"alice"}})
	mustNoErr(t, err)
	prs, err := g.PullRequests("acme", "widgets")
	mustNoErr(t, err)
	if len(prs) != 1 || strings.Join(prs[0].Reviewers, ",") != "alice" || prs[0].Body != "new body" {
		t.Fatalf("inspector = %+v", prs)
	}

	// After closing, the same head may be opened again.
	_, _, err = c.PullRequests.Edit(ctx, "acme", "widgets", pr.GetNumber(), &github.PullRequest{State: github.String("closed")})
	mustNoErr(t, err)
	_, _, err = c.PullRequests.Create(ctx, "acme", "widgets", &github.NewPullRequest{
		Title: github.String("Fix crash 2"), Head: github.String("gohands/issue-1"), Base: github.String("main")})
	mustNoErr(t, err)
}

func TestGitHubResolveRef(t *testing.T) {
	g, err := NewGitHubServer(GitHubOptions{ResolveRef: func(owner, repo, branch string) (string, bool) {
		return "0123456789abcdef0123456789abcdef01234567", branch == "exists"
	}})
	mustNoErr(t, err)
	t.Cleanup(g.Close)
	g.AddRepo(GitHubRepo{Owner: "acme", Name: "widgets"})
	c := g.Client(g.ActionsToken)
	ctx := context.Background()
	_, _, err = c.PullRequests.Create(ctx, "acme", "widgets", &github.NewPullRequest{Title: github.String("x"), Head: github.String("missing"), Base: github.String("main")})
	if statusOf(err) != 422 {
		t.Fatalf("PR from missing branch: %v, want 422", err)
	}
	pr, _, err := c.PullRequests.Create(ctx, "acme", "widgets", &github.NewPullRequest{Title: github.String("x"), Head: github.String("exists"), Base: github.String("main")})
	mustNoErr(t, err)
	if pr.GetHead().GetSHA() != "0123456789abcdef0123456789abcdef01234567" || pr.GetUser().GetLogin() != ActionsLogin {
		t.Fatalf("PR = %+v", pr.GetHead())
	}
}

func TestGitHubReviewComments(t *testing.T) {
	g, c := mustGitHubRepo(t)
	ctx := context.Background()
	pr, err := g.AddPullRequest("acme", "widgets", GitHubPR{Title: "Feature", Author: "carol", Head: "feature",
		HeadRepoFullName: "carol/widgets", HeadCloneURL: "http://git.example/carol/widgets.git"})
	mustNoErr(t, err)
	rv, err := g.AddReview("acme", "widgets", pr, GitHubReview{Author: "alice", Body: "see inline", State: "CHANGES_REQUESTED"})
	mustNoErr(t, err)
	rc, err := g.AddReviewComment("acme", "widgets", pr, GitHubReviewComment{Author: "alice", Body: "@gohands rename this",
		Path: "main.go", Line: 12, DiffHunk: "@@ -1,3 +1,4 @@", ReviewID: rv})
	mustNoErr(t, err)

	p, _, err := c.PullRequests.Get(ctx, "acme", "widgets", pr)
	mustNoErr(t, err)
	if !p.GetHead().GetRepo().GetFork() || p.GetHead().GetRepo().GetFullName() != "carol/widgets" || p.GetBase().GetRef() != "main" {
		t.Fatalf("fork PR head = %+v base = %q", p.GetHead().GetRepo(), p.GetBase().GetRef())
	}
	got, _, err := c.PullRequests.GetComment(ctx, "acme", "widgets", rc)
	mustNoErr(t, err)
	if got.GetPath() != "main.go" || got.GetLine() != 12 || got.GetPullRequestReviewID() != rv {
		t.Fatalf("review comment = %+v", got)
	}
	reply, _, err := c.PullRequests.CreateCommentInReplyTo(ctx, "acme", "widgets", pr, "done", rc)
	mustNoErr(t, err)
	if reply.GetInReplyTo() != rc || reply.GetUser().GetLogin() != "gohands[bot]" {
		t.Fatalf("reply = %+v", reply)
	}
	// The dedicated replies endpoint threads on the root even when answering a reply.
	req, err := c.NewRequest("POST", fmt.Sprintf("repos/acme/widgets/pulls/%d/comments/%d/replies", pr, reply.GetID()), map[string]string{"body": "again"})
	mustNoErr(t, err)
	var second github.PullRequestComment
	_, err = c.Do(ctx, req, &second)
	mustNoErr(t, err)
	if second.GetInReplyTo() != rc {
		t.Fatalf("in_reply_to = %d, want %d", second.GetInReplyTo(), rc)
	}
	all, _, err := c.PullRequests.ListComments(ctx, "acme", "widgets", pr, nil)
	mustNoErr(t, err)
	if len(all) != 3 {
		t.Fatalf("%d review comments, want 3", len(all))
	}
	review, _, err := c.PullRequests.GetReview(ctx, "acme", "widgets", pr, rv)
	mustNoErr(t, err)
	if review.GetState() != "CHANGES_REQUESTED" || review.GetUser().GetLogin() != "alice" {
		t.Fatalf("review = %+v", review)
	}
	ofReview, _, err := c.PullRequests.ListReviewComments(ctx, "acme", "widgets", pr, rv, nil)
	mustNoErr(t, err)
	if len(ofReview) != 1 || ofReview[0].GetID() != rc {
		t.Fatalf("review's comments = %d", len(ofReview))
	}
	if _, _, err := c.PullRequests.GetReview(ctx, "acme", "widgets", pr, rv+100); statusOf(err) != 404 {
		t.Fatalf("unknown review: %v", err)
	}
}

func TestGitHubReactions(t *testing.T) {
	g, c := mustGitHubRepo(t)
	ctx := context.Background()
	n, err := g.AddIssue("acme", "widgets", GitHubIssue{Title: "t", Author: "alice"})
	mustNoErr(t, err)
	cm, err := g.AddComment("acme", "widgets", n, "alice", "@gohands go")
	mustNoErr(t, err)
	pr, err := g.AddPullRequest("acme", "widgets", GitHubPR{Title: "p", Author: "alice", Head: "x"})
	mustNoErr(t, err)
	rc, err := g.AddReviewComment("acme", "widgets", pr, GitHubReviewComment{Author: "alice", Body: "b", Path: "a.go", Line: 1})
	mustNoErr(t, err)

	_, resp, err := c.Reactions.CreateIssueReaction(ctx, "acme", "widgets", n, "eyes")
	mustNoErr(t, err)
	if resp.StatusCode != 201 {
		t.Fatalf("first reaction status %d", resp.StatusCode)
	}
	_, resp, err = c.Reactions.CreateIssueReaction(ctx, "acme", "widgets", n, "eyes")
	mustNoErr(t, err)
	if resp.StatusCode != 200 {
		t.Fatalf("repeated reaction status %d, want 200", resp.StatusCode)
	}
	_, _, err = c.Reactions.CreateIssueCommentReaction(ctx, "acme", "widgets", cm, "rocket")
	mustNoErr(t, err)
	_, _, err = c.Reactions.CreatePullRequestCommentReaction(ctx, "acme", "widgets", rc, "confused")
	mustNoErr(t, err)
	if _, _, err := c.Reactions.CreateIssueReaction(ctx, "acme", "widgets", n, "party"); statusOf(err) != 422 {
		t.Fatalf("invalid content: %v", err)
	}
	got := g.Reactions("acme", "widgets")
	want := []GitHubReaction{
		{Subject: GitHubReactIssue, Number: n, Content: "eyes"},
		{Subject: GitHubReactIssueComment, CommentID: cm, Content: "rocket"},
		{Subject: GitHubReactReviewComment, CommentID: rc, Content: "confused"},
	}
	if len(got) != len(want) {
		t.Fatalf("reactions = %+v", got)
	}
	for i := range want {
		w, r := want[i], got[i]
		if r.Subject != w.Subject || r.Number != w.Number || r.CommentID != w.CommentID || r.Content != w.Content || r.User != "gohands[bot]" {
			t.Errorf("reaction %d = %+v, want %+v", i, r, w)
		}
	}
	if len(g.Reactions("acme", "other")) != 0 {
		t.Fatal("reactions leak across repositories")
	}
}

func TestGitHubPermissions(t *testing.T) {
	g, c := mustGitHubRepo(t)
	ctx := context.Background()
	if err := g.SetPermission("acme", "widgets", "x", "superuser"); err == nil {
		t.Fatal("SetPermission accepted an unknown role")
	}
	tests := []struct{ role, permission, roleName string }{
		{"admin", "admin", "admin"},
		{"maintain", "write", "maintain"},
		{"write", "write", "write"},
		{"triage", "read", "triage"},
		{"read", "read", "read"},
		{"none", "none", ""},
	}
	for _, tt := range tests {
		t.Run(tt.role, func(t *testing.T) {
			mustNoErr(t, g.SetPermission("acme", "widgets", "u-"+tt.role, tt.role))
			p, _, err := c.Repositories.GetPermissionLevel(ctx, "acme", "widgets", "u-"+tt.role)
			mustNoErr(t, err)
			if p.GetPermission() != tt.permission || p.GetRoleName() != tt.roleName || p.GetUser().GetLogin() != "u-"+tt.role {
				t.Fatalf("got %q/%q, want %q/%q", p.GetPermission(), p.GetRoleName(), tt.permission, tt.roleName)
			}
		})
	}
	p, _, err := c.Repositories.GetPermissionLevel(ctx, "acme", "widgets", "stranger")
	mustNoErr(t, err)
	if p.GetPermission() != "none" {
		t.Fatalf("stranger = %q", p.GetPermission())
	}
	g.FailPermission(2)
	for i := range 2 {
		if _, _, err := c.Repositories.GetPermissionLevel(ctx, "acme", "widgets", "u-admin"); statusOf(err) != 502 {
			t.Fatalf("failure %d: %v, want 502", i, err)
		}
	}
	if _, _, err := c.Repositories.GetPermissionLevel(ctx, "acme", "widgets", "u-admin"); err != nil {
		t.Fatalf("after failures: %v", err)
	}
}

func TestGitHubManifestConversion(t *testing.T) {
	g := NewGitHub(t)
	g.AddManifestCode("abc123")
	c := github.NewClient(nil)
	c.BaseURL, _ = url.Parse(g.URL + "/")
	ctx := context.Background()
	cfg, _, err := c.Apps.CompleteAppManifest(ctx, "abc123")
	mustNoErr(t, err)
	if cfg.GetID() != g.AppID || cfg.GetSlug() != g.Slug || cfg.GetPEM() != string(g.PrivateKeyPEM) ||
		cfg.GetWebhookSecret() != g.WebhookSecret || cfg.GetClientID() == "" || cfg.GetClientSecret() == "" {
		t.Fatalf("config = %+v", cfg)
	}
	if _, _, err := c.Apps.CompleteAppManifest(ctx, "abc123"); statusOf(err) != 404 {
		t.Fatalf("second use of a code: %v, want 404", err)
	}
}

func TestGitHubWebhookRequest(t *testing.T) {
	g := NewGitHub(t)
	body := []byte(`{"action":"opened"}`)
	req, err := g.WebhookRequest("http://127.0.0.1:1/api/github/hook", "issues", "d-1", body)
	mustNoErr(t, err)
	if req.Header.Get("X-GitHub-Event") != "issues" || req.Header.Get("X-GitHub-Delivery") != "d-1" {
		t.Fatalf("headers = %v", req.Header)
	}
	payload, err := github.ValidatePayload(req, []byte(g.WebhookSecret))
	mustNoErr(t, err)
	if string(payload) != string(body) {
		t.Fatalf("payload = %s", payload)
	}
	req, err = g.WebhookRequest("http://127.0.0.1:1/api/github/hook", "issues", "d-1", body)
	mustNoErr(t, err)
	if _, err := github.ValidatePayload(req, []byte("wrong secret")); err == nil {
		t.Fatal("signature accepted with the wrong secret")
	}
	// Known vector: HMAC-SHA256("It's a Secret to Everybody", "Hello, World!") from GitHub's docs.
	if got := SignWebhook("It's a Secret to Everybody", []byte("Hello, World!")); got != "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17" {
		t.Fatalf("SignWebhook = %s", got)
	}
	if _, err := g.WebhookRequest("http://x", "", "d", body); err == nil {
		t.Fatal("empty event accepted")
	}
}

func ExampleNewGitHubServer() {
	g, err := NewGitHubServer(GitHubOptions{Slug: "gohands"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	g.AddRepo(GitHubRepo{Owner: "acme", Name: "calc"})
	n, _ := g.AddIssue("acme", "calc", GitHubIssue{Title: "Divide by zero", Author: "alice"})

	client := g.Client(g.InstallationToken()) // a real go-github client
	ctx := context.Background()
	_, _, err = client.Issues.CreateComment(ctx, "acme", "calc", n, &github.IssueComment{Body: github.String("On it.")})
	if err != nil {
		fmt.Println(err)
		return
	}
	comments, _ := g.Comments("acme", "calc", n)
	fmt.Println(comments[0].Author, comments[0].Body)
	calls := g.Calls()
	fmt.Println(calls[0].Method, calls[0].Path, calls[0].Status)
	// Output:
	// gohands[bot] On it.
	// POST /repos/acme/calc/issues/1/comments 201
}
