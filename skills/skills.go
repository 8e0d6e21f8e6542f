// Package skills loads the knowledge a repository gives the agent: AGENTS.md,
// .cursorrules, OpenHands skills and legacy microagents, plus gohands'
// built-in skills. Skills without triggers are always on (system prompt);
// skills with triggers are added to the user message that mentions one.
package skills

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxFileSize is the largest skill file read; bigger files are skipped with a warning.
const MaxFileSize = 256 << 10

// Source values say where a skill came from.
const (
	SourceRepo    = "repo"
	SourceBuiltin = "builtin"
)

// Skill is one piece of knowledge for the agent.
type Skill struct {
	// Name identifies the skill; later skills with the same name are dropped.
	Name string `json:"name"`
	// Type is the frontmatter type (knowledge, repo, task), "" when absent.
	Type    string `json:"type,omitempty"`
	Version string `json:"version,omitempty"`
	Agent   string `json:"agent,omitempty"`
	// Triggers are the words that activate the skill; none means always on.
	Triggers []string `json:"triggers,omitempty"`
	// Inputs are the task inputs declared in the frontmatter.
	Inputs []Input `json:"inputs,omitempty"`
	// Content is the markdown body without the frontmatter.
	Content string `json:"content"`
	// Path is the file the skill came from, relative to the repository
	// (or to skills/builtin for built-in skills).
	Path string `json:"path"`
	// Source is SourceRepo or SourceBuiltin.
	Source string `json:"source"`
}

// Input is a value a task skill asks the user for.
type Input struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description,omitempty"`
}

// AlwaysOn reports whether the skill belongs in the system prompt.
func (s Skill) AlwaysOn() bool { return len(s.Triggers) == 0 }

// Warning names a skill file that was skipped and why.
type Warning struct {
	Path string
	Err  error
}

// String formats the warning for logs.
func (w Warning) String() string { return fmt.Sprintf("skill %s skipped: %v", w.Path, w.Err) }

// Set is an ordered list of skills with unique names, in priority order.
type Set []Skill

// AlwaysOn returns the skills without triggers.
func (s Set) AlwaysOn() []Skill {
	var out []Skill
	for _, sk := range s {
		if sk.AlwaysOn() {
			out = append(out, sk)
		}
	}
	return out
}

// Triggered returns the triggered skills whose trigger occurs in text as a
// whole word (case-insensitive) and whose name is not in seen; it adds the
// returned names to seen so that each skill is given once per job.
func (s Set) Triggered(text string, seen map[string]bool) []Skill {
	var out []Skill
	lower := strings.ToLower(text)
	for _, sk := range s {
		if sk.AlwaysOn() || seen[sk.Name] {
			continue
		}
		for _, t := range sk.Triggers {
			if containsWord(lower, strings.ToLower(t)) {
				out = append(out, sk)
				seen[sk.Name] = true
				break
			}
		}
	}
	return out
}

// Names lists the skills' names in order.
func (s Set) Names() []string {
	out := make([]string, len(s))
	for i, sk := range s {
		out[i] = sk.Name
	}
	return out
}

// containsWord reports whether word occurs in text with no letter, digit or
// underscore right before or after it.
func containsWord(text, word string) bool {
	if word == "" {
		return false
	}
	for i := 0; i <= len(text)-len(word); {
		j := strings.Index(text[i:], word)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(word)
		before, _ := utf8.DecodeLastRuneInString(text[:start])
		after, _ := utf8.DecodeRuneInString(text[end:])
		if (start == 0 || !isWordRune(before)) && (end == len(text) || !isWordRune(after)) {
			return true
		}
		_, size := utf8.DecodeRuneInString(text[start:])
		i = start + size
	}
	return false
}

func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

//go:embed builtin/*.md
var builtinFS embed.FS

// Builtin returns gohands' built-in skills.
func Builtin() (Set, []Warning) {
	sub, err := fs.Sub(builtinFS, "builtin")
	if err != nil {
		return nil, []Warning{{Path: "builtin", Err: err}}
	}
	var l loader
	l.source = SourceBuiltin
	l.walk(sub, ".", func(string) bool { return true })
	return l.set, l.warnings
}

// Load reads the repository's skills from the host directory dir, in
// priority order: AGENTS.md (or agents.md, agent.md), .cursorrules,
// .openhands/skills/**/*.md, .openhands/microagents/*.md, then the built-in
// skills; a name seen earlier wins. The directory is read through os.Root, so
// a symlink cannot lead outside it. Malformed files are skipped with a
// warning; README.md files in the skill folders are not skills. An empty dir
// loads only the built-in skills.
func Load(dir string) (Set, []Warning) {
	var l loader
	if dir != "" {
		root, err := os.OpenRoot(dir)
		if err != nil {
			l.warnings = append(l.warnings, Warning{Path: dir, Err: fmt.Errorf("open repository: %w", err)})
		} else {
			defer root.Close()
			l.source = SourceRepo
			fsys := root.FS()
			for _, name := range []string{"AGENTS.md", "agents.md", "agent.md"} {
				if l.file(fsys, name, "agents", true) {
					break
				}
			}
			l.file(fsys, ".cursorrules", "cursorrules", true)
			l.walk(fsys, ".openhands/skills", func(string) bool { return true })
			l.walk(fsys, ".openhands/microagents", func(p string) bool {
				return path.Dir(p) == ".openhands/microagents"
			})
		}
	}
	b, w := Builtin()
	l.warnings = append(l.warnings, w...)
	for _, sk := range b {
		l.add(sk)
	}
	return l.set, l.warnings
}

type loader struct {
	source   string
	set      Set
	names    map[string]bool
	warnings []Warning
}

func (l *loader) add(sk Skill) {
	if l.names == nil {
		l.names = map[string]bool{}
	}
	if l.names[sk.Name] {
		return
	}
	l.names[sk.Name] = true
	l.set = append(l.set, sk)
}

// file loads one file; it reports whether the file existed. A file without
// frontmatter takes defaultName; alwaysOn files ignore triggers.
func (l *loader) file(fsys fs.FS, p, defaultName string, alwaysOn bool) bool {
	data, err := readLimited(fsys, p)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		l.warnings = append(l.warnings, Warning{Path: p, Err: err})
		return true
	}
	sk, err := Parse(data, defaultName)
	if err != nil {
		l.warnings = append(l.warnings, Warning{Path: p, Err: err})
		return true
	}
	if alwaysOn {
		sk.Triggers = nil
	}
	sk.Path, sk.Source = p, l.source
	l.add(sk)
	return true
}

// walk loads every *.md file under dir that keep accepts, in lexical order.
func (l *loader) walk(fsys fs.FS, dir string, keep func(string) bool) {
	var files []string
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			l.warnings = append(l.warnings, Warning{Path: p, Err: err})
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(strings.ToLower(p), ".md") || !keep(p) {
			return nil
		}
		if strings.EqualFold(path.Base(p), "README.md") {
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		l.warnings = append(l.warnings, Warning{Path: dir, Err: err})
	}
	sort.Strings(files)
	for _, p := range files {
		name := strings.TrimSuffix(path.Base(p), path.Ext(p))
		l.file(fsys, p, name, false)
	}
}

func readLimited(fsys fs.FS, p string) ([]byte, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("file is %d bytes, more than the %d allowed", st.Size(), MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("file is more than the %d bytes allowed", MaxFileSize)
	}
	return data, nil
}
