// Package webhook delivers a notification as an HTTP POST signed the way
// the Standard Webhooks convention signs one (standardwebhooks.com), so
// that a receiver can check with any of that convention's libraries that
// the gateway sent it and that it was not replayed:
//
//   - webhook-id: the notification's id, the same on every retry, which a
//     receiver uses to process a notification once (delivery is at least
//     once);
//   - webhook-timestamp: the attempt's time, in Unix seconds;
//   - webhook-signature: "v1," and the base64 of the HMAC-SHA256, keyed by
//     the secret, of the id, the timestamp and the body joined by ".".
//
// An attempt that does not get a 2xx answer is retried with exponential
// backoff until a bounded horizon has passed: a receiver that is down for
// less than the horizon still gets the notification; one that is down for
// longer does not keep a delivery going forever.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// secretPrefix starts a secret in the convention's form: "whsec_" and the
// base64 of the key.
const secretPrefix = "whsec_"

// minSecretBytes is the shortest key accepted: the convention asks for 24
// to 64 random bytes; a shorter key is guessable.
const minSecretBytes = 24

// Secret is the key signatures are made with.
type Secret []byte

// ParseSecret reads a secret in the convention's form, "whsec_" followed
// by the base64 of at least 24 random bytes (surrounding white space, as a
// file's final newline, is ignored).
func ParseSecret(s string) (Secret, error) {
	s = strings.TrimSpace(s)
	b64, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, fmt.Errorf("a webhook secret must start with %q followed by the base64 of its key (make one with: echo %s$(head -c 32 /dev/urandom | base64))", secretPrefix, secretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("the webhook secret after %q is not base64: %v", secretPrefix, err)
	}
	if len(key) < minSecretBytes {
		return nil, fmt.Errorf("the webhook secret's key is %d bytes; use at least %d random bytes", len(key), minSecretBytes)
	}
	return Secret(key), nil
}

// ReadSecretFile reads a secret from path (see ParseSecret).
func ReadSecretFile(path string) (Secret, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the webhook secret: %w", err)
	}
	s, err := ParseSecret(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Sign is the webhook-signature header's value for a notification id sent
// at ts with body.
func Sign(secret Secret, id string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Defaults of a Sender.
const (
	// DefaultFirstBackoff is the wait before the first retry; each next
	// wait doubles, up to DefaultMaxBackoff.
	DefaultFirstBackoff = time.Second
	DefaultMaxBackoff   = 5 * time.Minute
	// DefaultHorizon is how long a delivery is retried from its first
	// attempt before it is given up.
	DefaultHorizon = 24 * time.Hour
	// DefaultAttemptTimeout bounds one attempt: connecting, sending and
	// reading the answer's status.
	DefaultAttemptTimeout = 10 * time.Second
)

// maxErrorBody is how much of a refusing receiver's answer an error
// quotes.
const maxErrorBody = 256

// Sender delivers notifications. The zero value of a duration field means
// its default.
type Sender struct {
	Secret Secret
	Client *http.Client // nil: one that follows no redirect

	FirstBackoff   time.Duration
	MaxBackoff     time.Duration
	Horizon        time.Duration
	AttemptTimeout time.Duration
}

// ErrGivenUp wraps the last attempt's error when a delivery's horizon has
// passed.
var ErrGivenUp = errors.New("webhook delivery given up")

// Deliver posts body (JSON) to url as notification id, retrying until an
// attempt gets a 2xx answer, the horizon from the first attempt has
// passed (ErrGivenUp), or ctx ends.
func (s *Sender) Deliver(ctx context.Context, url, id string, body []byte) error {
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := s.attempt(ctx, url, id, body)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := s.Backoff(attempt)
		if time.Since(start)+wait > orDefault(s.Horizon, DefaultHorizon) {
			return fmt.Errorf("%w after %d attempts over %s: %v", ErrGivenUp, attempt, time.Since(start).Round(time.Millisecond), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// Attempt posts once, signed with the attempt's time: a nil error means a
// 2xx answer. A caller that keeps its own schedule of retries (an outbox
// in a store, which outlives the process) uses it with Backoff rather
// than Deliver.
func (s *Sender) Attempt(ctx context.Context, url, id string, body []byte) error {
	return s.attempt(ctx, url, id, body)
}

// Backoff is the wait after the attempt-th failed attempt (1 for the
// first): FirstBackoff doubled per attempt up to MaxBackoff, of which the
// second half is random, so that receivers that came back are not hit by
// every sender at once.
func (s *Sender) Backoff(attempt int) time.Duration {
	backoff, most := orDefault(s.FirstBackoff, DefaultFirstBackoff), orDefault(s.MaxBackoff, DefaultMaxBackoff)
	for i := 1; i < attempt && backoff < most; i++ {
		backoff *= 2
	}
	backoff = min(backoff, most)
	return backoff/2 + rand.N(backoff/2+1)
}

// attempt posts once, signed with the attempt's time.
func (s *Sender) attempt(ctx context.Context, url, id string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, orDefault(s.AttemptTimeout, DefaultAttemptTimeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	now := time.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", Sign(s.Secret, id, now, body))
	client := s.Client
	if client == nil {
		client = noRedirects
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	quoted, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return fmt.Errorf("the receiver answered %s: %q", resp.Status, quoted)
}

// noRedirects is the default client. A redirect is a failed attempt, not
// a hop: following it would send the notification to a URL the operator
// did not allow.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
