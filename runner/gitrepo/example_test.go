package gitrepo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gohands/gohands/app/apptest"
	"github.com/gohands/gohands/runner/gitrepo"
)

// A job: prepare the branch, let the agent change files, commit with the
// requester as co-author, push; a follow-up job resumes from the branch.
func ExampleCache_Prepare() {
	tmp, _ := os.MkdirTemp("", "gitrepo-example-")
	defer os.RemoveAll(tmp)
	srv, err := apptest.StartGitServer(filepath.Join(tmp, "remote"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	url, _ := srv.CreateRepoFromDir("acme", "calc", "../../testdata/repos/calc", "main")

	ctx := context.Background()
	cache, _ := gitrepo.NewCache(filepath.Join(tmp, "repos")) // <store.path>/repos
	opts := gitrepo.PrepareOptions{CloneURL: url, Token: srv.Token, Branch: "gohands/issue-5", BaseBranch: "main", Dir: filepath.Join(tmp, "job1")}
	ws, err := cache.Prepare(ctx, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("resumed:", ws.Resumed)

	_ = os.WriteFile(filepath.Join(ws.Dir, "NOTES.md"), []byte("fixed\n"), 0o644)
	_, changed, err := ws.Commit(ctx, gitrepo.CommitOptions{
		Message:   "Fix Sub",
		Author:    gitrepo.Signature{Name: "gohands[bot]", Email: "gohands[bot]@users.noreply.github.com"},
		CoAuthors: []gitrepo.Signature{{Name: "Octo Cat", Email: "octocat@example.com"}},
	})
	fmt.Println("changed:", changed, err)
	fmt.Println("push:", ws.Push(ctx, srv.Token))

	opts.Dir = filepath.Join(tmp, "job2")
	ws2, err := cache.Prepare(ctx, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("resumed:", ws2.Resumed, ws2.BranchCommits[0].Subject, ws2.BranchChanges[0].Path, ws2.BranchChanges[0].Action)
	// Output:
	// resumed: false
	// changed: true <nil>
	// push: <nil>
	// resumed: true Fix Sub NOTES.md added
}
