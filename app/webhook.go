package app

import (
	"errors"
	"net/http"
	"strings"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/gohands/gohands/handlers"
)

// limitBody refuses webhooks over MaxWebhookBytes with 413 and unsigned
// ones with 401 before anything reads them. Only SHA-256 signatures count:
// go-github would fall back to the weaker SHA-1 header.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxWebhookBytes {
			http.Error(w, "webhook body over 25 MB", http.StatusRequestEntityTooLarge)
			return
		}
		if r.Header.Get("X-Hub-Signature-256") == "" {
			http.Error(w, "missing X-Hub-Signature-256", http.StatusUnauthorized)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxWebhookBytes)
		next.ServeHTTP(w, r)
	})
}

// onError maps what went wrong with a webhook to a status: 413 for a body
// too large, 401 for a bad signature, 400 for a malformed request or
// payload, 500 (logged) for everything else.
func (a *App) onError(w http.ResponseWriter, r *http.Request, err error) {
	log := a.log.With("event", r.Header.Get("X-GitHub-Event"), "delivery", r.Header.Get("X-GitHub-Delivery"))
	var (
		tooBig *http.MaxBytesError
		ve     githubapp.ValidationError
		bad    *handlers.BadPayloadError
	)
	switch {
	// go-githubapp's ValidationError does not unwrap: a body cut off by
	// MaxBytesReader (a chunked upload) is its Cause.
	case errors.As(err, &tooBig), errors.As(err, &ve) && errors.As(ve.Cause, &tooBig):
		log.Warn("webhook refused: body too large")
		http.Error(w, "webhook body over 25 MB", http.StatusRequestEntityTooLarge)
	case errors.As(err, &ve) && strings.Contains(ve.Cause.Error(), "signature"):
		log.Warn("webhook refused: bad signature", "err", ve.Cause)
		http.Error(w, "invalid webhook signature", http.StatusUnauthorized)
	case errors.As(err, &ve):
		log.Warn("webhook refused: invalid request", "err", ve.Cause)
		http.Error(w, "invalid webhook request: "+ve.Cause.Error(), http.StatusBadRequest)
	case errors.As(err, &bad):
		log.Warn("webhook refused: malformed payload", "err", err)
		http.Error(w, bad.Error(), http.StatusBadRequest)
	default:
		log.Error("webhook failed", "err", err)
		http.Error(w, "internal error; see the gohands log", http.StatusInternalServerError)
	}
}

// onResponse answers ping with 200 and everything else with 202: the job,
// if any, runs after the response.
func onResponse(w http.ResponseWriter, r *http.Request, event string, handled bool) {
	if event == "ping" {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
