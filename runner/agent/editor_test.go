package agent

import (
	"context"
	"path"
	"strings"
	"testing"
)

func TestFileEditor(t *testing.T) {
	sb := mustSandbox(t, nil)
	ctx := context.Background()
	e := &editor{sb: sb}
	w := sb.WorkDir()
	f := path.Join(w, "a.txt")
	if err := sb.WriteFile(ctx, path.Join(w, "dir/sub/deep/x.go"), []byte("package x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, path.Join(w, "dir/.hidden"), []byte("h"), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		args    map[string]any
		want    []string // substrings of the observation
		notWant string
		isError bool
		file    *string // expected content of a.txt afterwards
	}{
		{name: "relative path", args: map[string]any{"command": "view", "path": "a.txt"}, isError: true,
			want: []string{"The path a.txt is not an absolute path, it should start with `/`. Maybe you meant " + f + "?"}},
		{name: "outside workspace", args: map[string]any{"command": "view", "path": "/etc/passwd"}, isError: true, want: []string{"outside the workspace"}},
		{name: "unknown command", args: map[string]any{"command": "delete", "path": f}, isError: true, want: []string{`Unrecognized command "delete"`}},
		{name: "no command", args: map[string]any{"path": f}, isError: true, want: []string{"Parameter `command` is required"}},
		{name: "no path", args: map[string]any{"command": "view"}, isError: true, want: []string{"Parameter `path` is required for command: view."}},
		{name: "view missing", args: map[string]any{"command": "view", "path": f}, isError: true, want: []string{"The path " + f + " does not exist. Please provide a valid path."}},
		{name: "create without text", args: map[string]any{"command": "create", "path": f}, isError: true, want: []string{"Parameter `file_text` is required for command: create."}},
		{name: "create", args: map[string]any{"command": "create", "path": f, "file_text": "one\ntwo\nthree\ntwo\n"}, want: []string{"File created successfully at: " + f}, file: ptr("one\ntwo\nthree\ntwo\n")},
		{name: "create existing", args: map[string]any{"command": "create", "path": f, "file_text": "x"}, isError: true,
			want: []string{"File already exists at: " + f + ". Cannot overwrite files using command `create`."}},
		{name: "view file", args: map[string]any{"command": "view", "path": f}, want: []string{"Here's the result of running `cat -n` on " + f + ":\n     1\tone\n     2\ttwo\n     3\tthree\n     4\ttwo"}},
		{name: "view range", args: map[string]any{"command": "view", "path": f, "view_range": []int{2, 3}}, want: []string{"     2\ttwo\n     3\tthree"}, notWant: "one"},
		{name: "view range to end", args: map[string]any{"command": "view", "path": f, "view_range": []int{3, -1}}, want: []string{"     3\tthree\n     4\ttwo"}},
		{name: "view range as string", args: map[string]any{"command": "view", "path": f, "view_range": "[1, 1]"}, want: []string{"     1\tone"}, notWant: "two"},
		{name: "view range bad start", args: map[string]any{"command": "view", "path": f, "view_range": []int{0, 2}}, isError: true, want: []string{"Its first element `0` should be within the range of lines of the file: [1, 4]"}},
		{name: "view range bad end", args: map[string]any{"command": "view", "path": f, "view_range": []int{2, 9}}, isError: true, want: []string{"Its second element `9` should be smaller than the number of lines in the file: `4`"}},
		{name: "view range reversed", args: map[string]any{"command": "view", "path": f, "view_range": []int{3, 2}}, isError: true, want: []string{"should be greater than or equal to the first element"}},
		{name: "view range one number", args: map[string]any{"command": "view", "path": f, "view_range": []int{3}}, isError: true, want: []string{"list of two integers"}},
		{name: "view dir", args: map[string]any{"command": "view", "path": path.Join(w, "dir")}, want: []string{"files and directories up to 2 levels deep in " + path.Join(w, "dir"), path.Join(w, "dir/sub/deep")}, notWant: ".hidden"},
		{name: "view dir with range", args: map[string]any{"command": "view", "path": path.Join(w, "dir"), "view_range": []int{1, 2}}, isError: true, want: []string{"not allowed when `path` points to a directory"}},
		{name: "str_replace on dir", args: map[string]any{"command": "str_replace", "path": path.Join(w, "dir"), "old_str": "a", "new_str": "b"}, isError: true, want: []string{"is a directory and only the `view` command can be used on directories"}},
		{name: "str_replace without old", args: map[string]any{"command": "str_replace", "path": f}, isError: true, want: []string{"Parameter `old_str` is required for command: str_replace."}},
		{name: "str_replace no match", args: map[string]any{"command": "str_replace", "path": f, "old_str": "four", "new_str": "4"}, isError: true,
			want: []string{"No replacement was performed, old_str `four` did not appear verbatim in " + f + "."}},
		{name: "str_replace multiple", args: map[string]any{"command": "str_replace", "path": f, "old_str": "two", "new_str": "2"}, isError: true,
			want: []string{"No replacement was performed. Multiple occurrences of old_str `two` in lines [2, 4]. Please ensure it is unique."}},
		{name: "str_replace same", args: map[string]any{"command": "str_replace", "path": f, "old_str": "one", "new_str": "one"}, isError: true,
			want: []string{"No replacement was performed. `new_str` and `old_str` must be different."}},
		{name: "str_replace", args: map[string]any{"command": "str_replace", "path": f, "old_str": "three\n", "new_str": "THREE\n3\n"},
			want: []string{"The file " + f + " has been edited. Here's the result of running `cat -n` on a snippet of " + f + ":\n     1\tone\n     2\ttwo\n     3\tTHREE\n     4\t3\n     5\ttwo\nReview the changes"},
			file: ptr("one\ntwo\nTHREE\n3\ntwo\n")},
		{name: "insert without line", args: map[string]any{"command": "insert", "path": f, "new_str": "x"}, isError: true, want: []string{"Parameter `insert_line` is required for command: insert."}},
		{name: "insert without text", args: map[string]any{"command": "insert", "path": f, "insert_line": 1}, isError: true, want: []string{"Parameter `new_str` is required for command: insert."}},
		{name: "insert out of range", args: map[string]any{"command": "insert", "path": f, "insert_line": 9, "new_str": "x"}, isError: true,
			want: []string{"Invalid `insert_line` parameter: 9. It should be within the range of allowed values: [0, 5]"}},
		{name: "insert", args: map[string]any{"command": "insert", "path": f, "insert_line": 1, "new_str": "one and a half"},
			want: []string{"has been edited", "     1\tone\n     2\tone and a half\n     3\ttwo"}, file: ptr("one\none and a half\ntwo\nTHREE\n3\ntwo\n")},
		{name: "insert at top, line as string", args: map[string]any{"command": "insert", "path": f, "insert_line": "0", "new_str": "zero"},
			want: []string{"     1\tzero\n     2\tone"}, file: ptr("zero\none\none and a half\ntwo\nTHREE\n3\ntwo\n")},
		{name: "undo", args: map[string]any{"command": "undo_edit", "path": f}, want: []string{"Last edit to " + f + " undone successfully.", "     1\tone\n     2\tone and a half"},
			file: ptr("one\none and a half\ntwo\nTHREE\n3\ntwo\n")},
		{name: "undo twice", args: map[string]any{"command": "undo_edit", "path": f}, file: ptr("one\ntwo\nTHREE\n3\ntwo\n"), want: []string{"undone successfully"}},
		{name: "undo thrice", args: map[string]any{"command": "undo_edit", "path": f}, file: ptr("one\ntwo\nthree\ntwo\n"), want: []string{"undone successfully"}},
		{name: "undo empty", args: map[string]any{"command": "undo_edit", "path": f}, isError: true, want: []string{"No edit history found for " + f + "."}},
		{name: "wrong type", args: map[string]any{"command": "insert", "path": f, "insert_line": true, "new_str": "x"}, isError: true, want: []string{"want a number"}},
	}
	for _, st := range steps {
		obs, err := e.run(ctx, jsonArgs(t, st.args))
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if obs.isError != st.isError {
			t.Errorf("%s: isError = %v, want %v (%s)", st.name, obs.isError, st.isError, obs.text)
		}
		for _, w := range st.want {
			if !strings.Contains(obs.text, w) {
				t.Errorf("%s: observation\n%s\nwant it to contain\n%s", st.name, obs.text, w)
			}
		}
		if st.notWant != "" && strings.Contains(obs.text, st.notWant) {
			t.Errorf("%s: observation contains %q:\n%s", st.name, st.notWant, obs.text)
		}
		if st.file != nil {
			got, err := sb.ReadFile(ctx, f)
			if err != nil || string(got) != *st.file {
				t.Errorf("%s: file = %q (%v), want %q", st.name, got, err, *st.file)
			}
		}
	}
}

func TestFileEditorBinary(t *testing.T) {
	sb := mustSandbox(t, nil)
	ctx := context.Background()
	p := path.Join(sb.WorkDir(), "bin")
	if err := sb.WriteFile(ctx, p, []byte{0xff, 0x00, 0xfe}, 0o644); err != nil {
		t.Fatal(err)
	}
	e := &editor{sb: sb}
	for _, cmd := range []string{`{"command":"view","path":%q}`, `{"command":"str_replace","path":%q,"old_str":"a","new_str":"b"}`} {
		obs, _ := e.run(ctx, strings.Replace(cmd, "%q", `"`+p+`"`, 1))
		if !obs.isError || !strings.Contains(obs.text, "is not a text file") {
			t.Errorf("%s: %q", cmd, obs.text)
		}
	}
}

func ptr(s string) *string { return &s }
