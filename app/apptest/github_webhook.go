package apptest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
)

// SignWebhook returns the X-Hub-Signature-256 value GitHub sends for body: "sha256=" + hex HMAC.
func SignWebhook(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// WebhookRequest builds the POST GitHub would deliver to url for event, signed with the App's webhook secret.
func (g *GitHub) WebhookRequest(url, event, delivery string, payload []byte) (*http.Request, error) {
	if event == "" {
		return nil, fmt.Errorf("webhook request to %s: empty event name", url)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("webhook request to %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/emulator")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	req.Header.Set("X-Hub-Signature-256", SignWebhook(g.WebhookSecret, payload))
	return req, nil
}
