package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/webhook/webhooktest"
)

// The tests in this file check turn-ending notifications against the real
// binary and a real HTTP receiver, which verifies each notification's
// signature with its own implementation of the Standard Webhooks recipe.

// hookReceiver is a real HTTP server that takes notifications: it answers
// 503 while down and to its first failFirst requests, 204 otherwise, and
// keeps every request.
type hookReceiver struct {
	srv    *httptest.Server
	key    []byte // the secret's key
	secret string // its file
	mu     sync.Mutex
	got    []hookRequest
	fail   int
	down   bool
}

type hookRequest struct {
	url    string // the request's path and query
	header http.Header
	body   []byte
	code   int
}

func newHookReceiver(t *testing.T, failFirst int) *hookReceiver {
	t.Helper()
	r := &hookReceiver{key: make([]byte, 32), fail: failFirst}
	if _, err := rand.Read(r.key); err != nil {
		t.Fatal(err)
	}
	r.secret = filepath.Join(t.TempDir(), "webhook-secret")
	if err := os.WriteFile(r.secret, []byte("whsec_"+base64.StdEncoding.EncodeToString(r.key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		code := http.StatusNoContent
		if r.down || len(r.got) < r.fail {
			code = http.StatusServiceUnavailable
		}
		r.got = append(r.got, hookRequest{url: req.URL.RequestURI(), header: req.Header.Clone(), body: body, code: code})
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// url is the notification target the tests name: under the allowed
// prefix.
func (r *hookReceiver) url() string { return r.srv.URL + "/hooks/turns" }

// config is the webhooks block that allows the receiver.
func (r *hookReceiver) config() string {
	return fmt.Sprintf("webhooks:\n  allowed_url_prefixes: [%q]\n  secret_file: %q\n", r.srv.URL+"/hooks/", r.secret)
}

func (r *hookReceiver) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

func (r *hookReceiver) requests() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookRequest(nil), r.got...)
}

// delivered are the requests answered 2xx, by webhook-id.
func (r *hookReceiver) delivered() map[string][]hookRequest {
	out := map[string][]hookRequest{}
	for _, q := range r.requests() {
		if q.code/100 == 2 {
			id := q.header.Get("webhook-id")
			out[id] = append(out[id], q)
		}
	}
	return out
}

// waitDelivered waits up to bound for n distinct notifications answered
// 2xx.
func (r *hookReceiver) waitDelivered(t *testing.T, n int, bound time.Duration) map[string][]hookRequest {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		got := r.delivered()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d notifications delivered within %s; the receiver got %d requests", len(got), n, bound, len(r.requests()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// verify checks a request as a receiver following the Standard Webhooks
// specification does (package webhooktest).
func (r *hookReceiver) verify(t *testing.T, q hookRequest) {
	t.Helper()
	if err := webhooktest.Verify(r.key, q.header, q.body); err != nil {
		t.Fatal(err)
	}
}

// hookTurn is the turn a notification carries.
func hookTurn(t *testing.T, q hookRequest) *acpgatev1.Turn {
	t.Helper()
	var turn acpgatev1.Turn
	if err := protojson.Unmarshal(q.body, &turn); err != nil {
		t.Fatalf("the notification's body is not a Turn in protojson: %v\n%s", err, q.body)
	}
	return &turn
}

// promptToEnd runs req to its terminal and returns the turn's id.
func promptToEnd(t *testing.T, client acpgatev1.AgentGatewayClient, req *acpgatev1.PromptRequest) string {
	t.Helper()
	stream, err := client.Prompt(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	events := drain(t, stream)
	if len(events) == 0 || events[len(events)-1].GetOutcome() == nil {
		t.Fatalf("the turn did not complete: %v", events)
	}
	return events[0].GetStarted().GetTurnId()
}

// notifiedTurn serves a gateway whose webhooks allow r and runs a turn
// with r as its target to its end; it returns a client of the gateway and
// the turn's id.
func notifiedTurn(t *testing.T, r *hookReceiver, text string) (acpgatev1.AgentGatewayClient, string) {
	t.Helper()
	cfg, _ := durableConfig(t, r.config())
	client, _ := serve(t, "--config", cfg).client(t)
	return client, promptToEnd(t, client, &acpgatev1.PromptRequest{Agent: "test", Text: text, NotifyUrl: r.url()})
}

func TestACompletedTurnIsNotifiedOnceSignedWithItsRecordAndTerminal(t *testing.T) {
	r := newHookReceiver(t, 0)
	client, turnID := notifiedTurn(t, r, "chunk notified")

	got := r.waitDelivered(t, 1, 10*time.Second)
	// Long enough for a second delivery to show: the notifier looks every
	// half second.
	time.Sleep(2 * time.Second)
	if n := len(r.requests()); n != 1 {
		t.Fatalf("the receiver got %d requests, want the one notification once", n)
	}
	q := got[turnID+".1"]
	if len(q) != 1 {
		t.Fatalf("delivered %v, want webhook-id %s.1 (the turn id and attempt)", got, turnID)
	}
	r.verify(t, q[0])
	if ct := q[0].header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	turn := hookTurn(t, q[0])
	want, err := client.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(turn, want) {
		t.Errorf("the notification carries %v,\nGetTurn says %v", turn, want)
	}
	if turn.GetTerminal().GetOutcome() == nil {
		t.Errorf("the notified turn's terminal is %v, want its outcome", turn.GetTerminal())
	}
}

func TestANotificationTheReceiverRefusesIsRetriedUnderTheSameWebhookID(t *testing.T) {
	r := newHookReceiver(t, 2)
	_, turnID := notifiedTurn(t, r, "chunk retried")

	r.waitDelivered(t, 1, 20*time.Second)
	all := r.requests()
	if len(all) != 3 {
		t.Fatalf("the receiver got %d requests, want 2 refused and 1 answered", len(all))
	}
	for i, q := range all {
		if id := q.header.Get("webhook-id"); id != turnID+".1" {
			t.Errorf("attempt %d came as webhook-id %q, want %s.1: a receiver could not tell it was the same notification", i+1, id, turnID)
		}
		r.verify(t, q)
	}
}

func TestANotificationPendingWhenTheGatewayIsKilledIsDeliveredAtTheNextStart(t *testing.T) {
	r := newHookReceiver(t, 0)
	r.setDown(true)
	cfg, _ := durableConfig(t, fmt.Sprintf("state_dir: %q\n", t.TempDir())+r.config())
	s := serve(t, "--config", cfg)
	client, _ := s.client(t)
	turnID := promptToEnd(t, client, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk before the kill", NotifyUrl: r.url()})
	// Killed as soon as the terminal is seen: before any attempt, or
	// after one the receiver refused.
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	if got := r.delivered(); len(got) != 0 {
		t.Fatalf("delivered before the kill: %v", got)
	}
	r.setDown(false)

	serve(t, "--config", cfg)
	got := r.waitDelivered(t, 1, 15*time.Second)
	q := got[turnID+".1"]
	if len(q) != 1 {
		t.Fatalf("after the restart the receiver got %v, want the turn's notification once", got)
	}
	r.verify(t, q[0])
	if turn := hookTurn(t, q[0]); turn.GetTurnId() != turnID || turn.GetTerminal().GetOutcome() == nil {
		t.Errorf("the notification carries %v, want the completed turn %s", turn, turnID)
	}
}

func TestTwoReplicasOnOnePostgreSQLDeliverOneNotificationPerTurn(t *testing.T) {
	r := newHookReceiver(t, 0)
	c := startCluster(t, 2, r.config())
	const turns = 12
	want := map[string]bool{}
	for i := range turns {
		client := c.replicas[i%2].client
		id := promptToEnd(t, client, &acpgatev1.PromptRequest{Agent: "scratch", Text: fmt.Sprintf("chunk %d", i), NotifyUrl: r.url()})
		want[id+".1"] = true
	}
	r.waitDelivered(t, turns, 20*time.Second)
	time.Sleep(2 * time.Second)
	got := r.delivered()
	for id := range want {
		if len(got[id]) != 1 {
			t.Errorf("notification %s was delivered %d times, want once", id, len(got[id]))
		}
	}
	if n := len(r.requests()); n != turns {
		t.Errorf("the receiver got %d requests for %d turns", n, turns)
	}
	for _, qs := range got {
		r.verify(t, qs[0])
	}
}

func TestANotifyURLOutsideTheAllowedPrefixesIsRefusedAtRequestTime(t *testing.T) {
	r := newHookReceiver(t, 0)
	cfg, prompts := durableConfig(t, r.config())
	s := serve(t, "--config", cfg)
	client, _ := s.client(t)
	for _, c := range []struct {
		url  string
		code codes.Code
	}{
		{r.srv.URL + "/elsewhere", codes.PermissionDenied},
		{r.srv.URL + "/hooks", codes.PermissionDenied}, // the prefix without its final "/"
		{"http://169.254.169.254/hooks/", codes.PermissionDenied},
		{"ftp://example.com/hooks/", codes.InvalidArgument},
	} {
		stream, err := client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: "chunk x", NotifyUrl: c.url})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != c.code || (c.code == codes.PermissionDenied && !strings.Contains(err.Error(), "webhooks.allowed_url_prefixes")) {
			t.Errorf("notify_url %q: %v; want %v naming webhooks.allowed_url_prefixes", c.url, err, c.code)
		}
	}
	list, err := client.ListTurns(context.Background(), &acpgatev1.ListTurnsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetTurns()) != 0 || promptsSeen(t, prompts) != 0 {
		t.Errorf("a refused Prompt started %d turns and asked the agent %d times", len(list.GetTurns()), promptsSeen(t, prompts))
	}

	// A gateway without webhooks allows no target at all.
	plainCfg, _ := durableConfig(t, "")
	plain, _ := serve(t, "--config", plainCfg).client(t)
	stream, err := plain.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: "chunk x", NotifyUrl: r.url()})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "webhooks.allowed_url_prefixes") {
		t.Errorf("a gateway without webhooks: %v; want PERMISSION_DENIED naming webhooks.allowed_url_prefixes", err)
	}
}

func TestATurnAKilledGatewayLeftRunningIsNotifiedWhenTheNextStartEndsIt(t *testing.T) {
	r := newHookReceiver(t, 0)
	cfg, _ := durableConfig(t, fmt.Sprintf("state_dir: %q\n", t.TempDir())+r.config())
	s := serve(t, "--config", cfg)
	client, _ := s.client(t)
	seen := killMidTurn(t, s, client, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk a\nhang", RequestId: "notified-crash", NotifyUrl: r.url()}, "a")
	turnID := seen[0].GetStarted().GetTurnId()
	if n := len(r.requests()); n != 0 {
		t.Fatalf("the receiver got %d requests for a turn still running", n)
	}

	serve(t, "--config", cfg)
	q := r.waitDelivered(t, 1, 15*time.Second)[turnID+".1"]
	if len(q) != 1 {
		t.Fatalf("the receiver got %v, want the turn's notification", r.delivered())
	}
	r.verify(t, q[0])
	e := hookTurn(t, q[0]).GetTerminal().GetError()
	if e.GetTransport().GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_GATEWAY_STOPPED || !e.GetRetryable() {
		t.Errorf("the notification's terminal is %v, want the retryable GATEWAY_STOPPED", e)
	}
}

func TestAnAgentsNotifyURLIsUsedWhenAPromptNamesNone(t *testing.T) {
	r := newHookReceiver(t, 0)
	cfg := writeConfig(t, r.config()+fmt.Sprintf(`
shutdown_grace: 3s
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
    notify_url: %q
`, r.url()+"?from=agent"))
	client, _ := serve(t, "--config", cfg).client(t)
	byAgent := promptToEnd(t, client, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk by agent"})
	byRequest := promptToEnd(t, client, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk by request", NotifyUrl: r.url() + "?from=request"})
	got := r.waitDelivered(t, 2, 10*time.Second)
	for id, want := range map[string]string{byAgent + ".1": "/hooks/turns?from=agent", byRequest + ".1": "/hooks/turns?from=request"} {
		if q := got[id]; len(q) != 1 || q[0].url != want {
			t.Errorf("notification %s: %d deliveries (%v), want one to %s", id, len(q), q, want)
		}
	}

	// An agent's target outside the prefixes is refused at start.
	bad := writeConfig(t, r.config()+`
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    notify_url: https://elsewhere.example.com/hooks/
`)
	if _, err := startServe(t, "--config", bad); err == nil || !strings.Contains(err.Error(), "agents[0].notify_url") && !strings.Contains(err.Error(), "webhooks.allowed_url_prefixes") {
		t.Errorf("a gateway whose agent's notify_url is outside the prefixes: %v; want a start-up error naming it", err)
	}
}

func TestANotificationItsReceiverNeverTakesIsGivenUpAtTheHorizonAndCounted(t *testing.T) {
	r := newHookReceiver(t, 0)
	r.setDown(true)
	cfg, _ := durableConfig(t, "metrics: {listen: \"127.0.0.1:0\"}\n"+r.config()+"  retry_horizon: 3s\n")
	s := serve(t, "--config", cfg)
	client, _ := s.client(t)
	promptToEnd(t, client, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk unheard", NotifyUrl: r.url()})
	url := s.metricsURL(t)

	deadline := time.Now().Add(15 * time.Second)
	for values(scrape(t, url), "acpgate_webhook_deliveries_total")["result=given_up"] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("not given up within %s of a 3s horizon; the receiver got %d requests", 15*time.Second, len(r.requests()))
		}
		time.Sleep(100 * time.Millisecond)
	}
	attempts := len(r.requests())
	fams := scrape(t, url)
	if got := values(fams, "acpgate_webhook_delivery_failures_total")[""]; got != float64(attempts) || attempts < 2 {
		t.Errorf("%d attempts refused, acpgate_webhook_delivery_failures_total = %v; want a few, each counted", attempts, got)
	}
	wantValues(t, fams, "acpgate_webhook_deliveries_total", map[string]float64{"result=delivered": 0, "result=given_up": 1, "result=turn_gone": 0})
	// The gauge is read again each half second: the queue is empty now.
	time.Sleep(time.Second)
	if got := values(scrape(t, url), "acpgate_webhook_oldest_pending_seconds")[""]; got != 0 {
		t.Errorf("acpgate_webhook_oldest_pending_seconds = %v after the only notification was given up, want 0", got)
	}
	r.setDown(false)
	time.Sleep(2 * time.Second)
	if n := len(r.requests()); n != attempts {
		t.Errorf("the receiver got %d more requests after the notification was given up", n-attempts)
	}
}
