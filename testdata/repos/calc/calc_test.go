package calc

import (
	"errors"
	"testing"
)

func TestOps(t *testing.T) {
	tests := []struct {
		name string
		got  int
		want int
	}{
		{"add", Add(2, 3), 5},
		{"sub", Sub(5, 3), 2},
		{"mul", Mul(4, 3), 12},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

func TestDiv(t *testing.T) {
	if got, err := Div(7, 2); err != nil || got != 3 {
		t.Errorf("Div(7, 2) = %d, %v; want 3, nil", got, err)
	}
	if _, err := Div(1, 0); !errors.Is(err, ErrDivByZero) {
		t.Errorf("Div(1, 0) error = %v; want ErrDivByZero", err)
	}
}
