package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DispatchEventType is the repository_dispatch event type that starts a job.
const DispatchEventType = "gohands"

// dispatchInputs are the inputs of a workflow_dispatch or the client payload
// of a repository_dispatch. Numbers may come as strings (workflow inputs
// always do) or as JSON numbers.
type dispatchInputs struct {
	IssueNumber flexInt `json:"issue_number"`
	PRNumber    flexInt `json:"pr_number"`
	Prompt      string  `json:"prompt"`
}

// target returns the issue or PR number the dispatch names.
func (in dispatchInputs) target() (number int, isPR bool, err error) {
	switch {
	case in.IssueNumber > 0 && in.PRNumber > 0:
		return 0, false, errors.New("give issue_number or pr_number, not both")
	case in.IssueNumber > 0:
		return int(in.IssueNumber), false, nil
	case in.PRNumber > 0:
		return int(in.PRNumber), true, nil
	}
	return 0, false, errors.New("no issue_number or pr_number given")
}

func parseDispatchInputs(raw json.RawMessage) (dispatchInputs, error) {
	var in dispatchInputs
	if len(raw) == 0 || string(raw) == "null" {
		return in, nil
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return in, err
	}
	return in, nil
}

// flexInt is a positive integer given as a JSON number or a string.
type flexInt int

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*f = 0
		return nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(s, "#"))
	if err != nil || n < 0 {
		return fmt.Errorf("%s is not an issue or pull request number", b)
	}
	*f = flexInt(n)
	return nil
}
