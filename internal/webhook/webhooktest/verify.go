// Package webhooktest checks notifications as a receiver does, written
// from the Standard Webhooks specification rather than with package
// webhook's own signing: a test that verified with the code it tests
// could not catch a signature both got wrong the same way.
package webhooktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Tolerance is how far a webhook-timestamp may be from now, as the
// specification's reference receivers allow.
const Tolerance = 5 * time.Minute

// Verify checks a notification's headers and body against key (the bytes
// whose base64 follows "whsec_" in the secret): the signed content is id
// "." timestamp "." body, HMAC-SHA256 keyed by key, and one of the
// space-separated "v1,<base64>" signatures must match; the timestamp
// must be within Tolerance of now.
func Verify(key []byte, h http.Header, body []byte) error {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || id == "" {
		return fmt.Errorf("webhook-id %q, webhook-timestamp %q: want an id and Unix seconds", id, ts)
	}
	if d := time.Since(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return fmt.Errorf("webhook-timestamp is %s away from now", d)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		v, b64, ok := strings.Cut(sig, ",")
		got, err := base64.StdEncoding.DecodeString(b64)
		if ok && v == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no signature in " + strconv.Quote(h.Get("webhook-signature")) + " matches the body")
}
