//go:build !linux

package sandbox

import (
	"errors"
	"os"
)

// openPty is only implemented on Linux.
func openPty() (master, slave *os.File, err error) {
	return nil, nil, errors.New("the process sandbox needs Linux pseudo-terminals")
}
