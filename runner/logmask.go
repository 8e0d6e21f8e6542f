package runner

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gohands/gohands/runner/agent"
)

// MaskLogger returns a logger that writes through log with every secret
// masked in the message and in every attribute, errors included.
func MaskLogger(log *slog.Logger, secrets ...string) *slog.Logger {
	return slog.New(&maskHandler{next: log.Handler(), mask: agent.NewMasker(secrets...).Mask})
}

// maskHandler masks secrets in records before the next handler sees them.
type maskHandler struct {
	next slog.Handler
	mask func(string) string
}

func (h *maskHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *maskHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.mask(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *maskHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		masked[i] = h.attr(a)
	}
	return &maskHandler{next: h.next.WithAttrs(masked), mask: h.mask}
}

func (h *maskHandler) WithGroup(name string) slog.Handler {
	return &maskHandler{next: h.next.WithGroup(name), mask: h.mask}
}

func (h *maskHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.mask(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		masked := make([]any, len(attrs))
		for i, g := range attrs {
			masked[i] = h.attr(g)
		}
		return slog.Group(a.Key, masked...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.mask(err.Error()))
		}
		return slog.String(a.Key, h.mask(fmt.Sprint(v.Any())))
	}
	return slog.Attr{Key: a.Key, Value: v}
}
