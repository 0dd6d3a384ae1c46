package webhook_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/webhook"
	"github.com/acpgate/acpgate/internal/webhook/webhooktest"
)

// testSecret is a secret in the convention's form: whsec_ and the base64
// of 32 bytes.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw4jwIuPaRx4U="

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
}

// receiver is a real HTTP server that answers the n-th request with
// codes[n-1] (204 past the end) and keeps every request.
type receiver struct {
	mu    sync.Mutex
	got   []received
	codes []int
	srv   *httptest.Server
}

func newReceiver(t *testing.T, codes ...int) *receiver {
	r := &receiver{codes: codes}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{header: req.Header.Clone(), body: body})
		code := http.StatusNoContent
		if n := len(r.got); n <= len(r.codes) {
			code = r.codes[n-1]
		}
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// verify checks a request as a receiver following the Standard Webhooks
// specification does (package webhooktest), not with the package's Sign.
func verify(t *testing.T, r received) {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(testSecret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	if err := webhooktest.Verify(key, r.header, r.body); err != nil {
		t.Fatal(err)
	}
}

func sender(t *testing.T) *webhook.Sender {
	t.Helper()
	secret, err := webhook.ParseSecret(testSecret + "\n")
	if err != nil {
		t.Fatal(err)
	}
	return &webhook.Sender{Secret: secret, FirstBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Horizon: 5 * time.Second}
}

func TestAReceiverVerifiesTheSignatureWithTheSpecificationsRecipe(t *testing.T) {
	r := newReceiver(t)
	body := []byte(`{"turn":{"turn_id":"turn-1"},"terminal":{"seq":3}}`)
	if err := sender(t).Deliver(context.Background(), r.srv.URL+"/hooks/turns", "msg_turn-1", body); err != nil {
		t.Fatal(err)
	}
	got := r.requests()
	if len(got) != 1 || string(got[0].body) != string(body) || got[0].header.Get("webhook-id") != "msg_turn-1" {
		t.Fatalf("the receiver got %d requests: %+v", len(got), got)
	}
	if ct := got[0].header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	verify(t, got[0])
}

func TestADeliveryIsRetriedAfterTheReceiverFailsUnderTheSameWebhookID(t *testing.T) {
	r := newReceiver(t, http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusFound)
	if err := sender(t).Deliver(context.Background(), r.srv.URL, "msg_retry", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	got := r.requests()
	if len(got) != 4 {
		t.Fatalf("the receiver got %d requests, want 3 failed and 1 answered", len(got))
	}
	for _, g := range got {
		if g.header.Get("webhook-id") != "msg_retry" {
			t.Errorf("a retry came as webhook-id %q: a receiver could not tell it was the same notification", g.header.Get("webhook-id"))
		}
		verify(t, g)
	}
}

func TestADeliveryIsGivenUpOnceItsHorizonHasPassed(t *testing.T) {
	r := newReceiver(t, http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway)
	s := sender(t)
	s.Horizon = 150 * time.Millisecond
	start := time.Now()
	err := s.Deliver(context.Background(), r.srv.URL, "msg_down", []byte(`{}`))
	if !errors.Is(err, webhook.ErrGivenUp) || !strings.Contains(err.Error(), "502") {
		t.Fatalf("Deliver to a receiver that is down: %v, want ErrGivenUp naming its answer", err)
	}
	if d := time.Since(start); d > s.Horizon+time.Second {
		t.Errorf("the delivery went on for %s past a %s horizon", d, s.Horizon)
	}
	if n := len(r.requests()); n < 2 || n >= 10 {
		t.Errorf("the receiver got %d attempts, want a few retries within the horizon", n)
	}
}

func TestASecretNotInTheConventionsFormIsRefusedSayingHowToMakeOne(t *testing.T) {
	for _, bad := range []string{"hunter2", "whsec_not base64!", "whsec_c2hvcnQ="} {
		if _, err := webhook.ParseSecret(bad); err == nil {
			t.Errorf("ParseSecret(%q) accepted it", bad)
		}
	}
	_, err := webhook.ParseSecret("hunter2")
	if err == nil || !strings.Contains(err.Error(), "/dev/urandom") {
		t.Errorf("the error %v does not say how to make a secret", err)
	}
}
