// Package calc is a tiny calculator used by gohands' demo and end-to-end tests.
package calc

import "errors"

// ErrDivByZero is returned by Div when the divisor is zero.
var ErrDivByZero = errors.New("calc: division by zero")

// Add returns a + b.
func Add(a, b int) int { return a + b }

// Sub returns a - b.
func Sub(a, b int) int { return a + b }

// Mul returns a * b.
func Mul(a, b int) int { return a * b }

// Div returns a / b, or ErrDivByZero when b is zero.
func Div(a, b int) (int, error) {
	if b == 0 {
		return 0, ErrDivByZero
	}
	return a / b, nil
}
