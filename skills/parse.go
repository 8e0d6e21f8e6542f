package skills

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// frontmatter is the YAML header of an OpenHands skill file. Unknown keys are
// ignored, as OpenHands does, so newer skill files still load.
type frontmatter struct {
	Name     string   `yaml:"name"`
	Type     string   `yaml:"type"`
	Version  string   `yaml:"version"`
	Agent    string   `yaml:"agent"`
	Triggers []string `yaml:"triggers"`
	Inputs   []Input  `yaml:"inputs"`
}

// Parse reads one skill file: optional YAML frontmatter between "---" lines,
// then the markdown body. defaultName is used when the frontmatter has no name.
// It returns an error naming what is wrong for malformed input.
func Parse(data []byte, defaultName string) (Skill, error) {
	if !utf8.Valid(data) {
		return Skill{}, errors.New("not valid UTF-8")
	}
	text := strings.TrimPrefix(string(data), "\ufeff")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	sk := Skill{Name: defaultName}
	body := text
	if strings.HasPrefix(text, "---\n") {
		rest := text[len("---\n"):]
		var head string
		switch {
		case strings.HasPrefix(rest, "---\n") || rest == "---":
			head, body = "", strings.TrimPrefix(strings.TrimPrefix(rest, "---"), "\n")
		default:
			end := strings.Index(rest, "\n---\n")
			if end < 0 {
				if strings.HasSuffix(rest, "\n---") {
					end = len(rest) - len("\n---")
				} else {
					return Skill{}, errors.New("frontmatter has no closing '---' line")
				}
			}
			head = rest[:end]
			body = strings.TrimPrefix(rest[end+len("\n---"):], "\n")
		}
		var fm frontmatter
		dec := yaml.NewDecoder(bytes.NewReader([]byte(head)))
		if err := dec.Decode(&fm); err != nil && !errors.Is(err, io.EOF) {
			return Skill{}, fmt.Errorf("frontmatter: %w", err)
		}
		if fm.Name != "" {
			sk.Name = strings.TrimSpace(fm.Name)
		}
		sk.Type, sk.Version, sk.Agent, sk.Inputs = fm.Type, fm.Version, fm.Agent, fm.Inputs
		for i, t := range fm.Triggers {
			t = strings.TrimSpace(t)
			if t == "" {
				return Skill{}, fmt.Errorf("frontmatter: trigger %d is empty", i+1)
			}
			sk.Triggers = append(sk.Triggers, t)
		}
		for i, in := range sk.Inputs {
			if strings.TrimSpace(in.Name) == "" {
				return Skill{}, fmt.Errorf("frontmatter: input %d has no name", i+1)
			}
		}
	}
	if strings.TrimSpace(sk.Name) == "" {
		return Skill{}, errors.New("skill has no name")
	}
	sk.Content = strings.TrimSpace(body)
	if sk.Content == "" {
		return Skill{}, errors.New("skill has no content")
	}
	return sk, nil
}
