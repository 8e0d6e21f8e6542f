// Package gohands holds what the whole module shares from its root: the
// annotated configuration, config.yml, which `gohands setup` starts from.
package gohands

import _ "embed"

// ConfigYML is config.yml at the repository root: every key, documented.
//
//go:embed config.yml
var ConfigYML []byte
