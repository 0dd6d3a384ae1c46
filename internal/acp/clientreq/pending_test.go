package clientreq

import (
	"context"
	"errors"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
)

// fakeTurn is a turn whose cancellation and end a test controls.
type fakeTurn struct {
	cancelSent, ended chan struct{}
}

func newFakeTurn() *fakeTurn {
	return &fakeTurn{cancelSent: make(chan struct{}), ended: make(chan struct{})}
}

func (t *fakeTurn) CancelRequested() bool                    { return false }
func (t *fakeTurn) CancelSent() <-chan struct{}              { return t.cancelSent }
func (t *fakeTurn) Ended() <-chan struct{}                   { return t.ended }
func (t *fakeTurn) EmitRequest(*acpgatev1.PromptEvent, bool) {}

// answerIt accepts any request, answering what it asked.
func answerIt(q string) (string, error) { return "answer to " + q, nil }

// waitFor waits for an answer to request q-1, announcing nothing.
func waitFor(ctx context.Context, p *pending[string, string], t Turn, timeout time.Duration) ending {
	_, how := p.wait(ctx, t, "q-1", "question", timeout, func() {})
	return how
}

var errNotWaiting = errors.New("not waiting")

func TestRequestIDsCountEveryRequestOfTheKind(t *testing.T) {
	p := newPending[string, string]("perm", errNotWaiting)
	for _, want := range []string{"perm-1", "perm-2", "perm-3"} {
		if got := p.mint(); got != want {
			t.Errorf("minted %q, want %q", got, want)
		}
	}
}

func TestAClientsAnswerEndsTheWaitAndASecondAnswerFindsNoRequest(t *testing.T) {
	p := newPending[string, string]("q", errNotWaiting)
	// The request is announced once it can be answered: a client that
	// answers the announcement at once is not told there is no request.
	var announced error
	got, how := p.wait(context.Background(), newFakeTurn(), "q-1", "question", time.Minute, func() {
		announced = p.resolve("q-1", answerIt)
	})
	if announced != nil || how != answered || got != "answer to question" {
		t.Fatalf("resolve %v; the wait ended %v with %q", announced, how, got)
	}
	err := p.resolve("q-1", answerIt)
	if !errors.Is(err, errNotWaiting) || err.Error() != `not waiting: "q-1"` {
		t.Errorf("a second answer: %v", err)
	}
}

func TestAnAnswerItsCheckRefusesLeavesTheRequestWaiting(t *testing.T) {
	p := newPending[string, string]("q", errNotWaiting)
	refusal := errors.New("no such option")
	var refused, accepted error
	got, how := p.wait(context.Background(), newFakeTurn(), "q-1", "question", time.Minute, func() {
		refused = p.resolve("q-1", func(string) (string, error) { return "", refusal })
		accepted = p.resolve("q-1", answerIt)
	})
	if refused != refusal || accepted != nil || how != answered || got != "answer to question" {
		t.Errorf("refused %v, accepted %v; the wait ended %v with %q", refused, accepted, how, got)
	}
}

func TestAWaitNobodyAnswersTimesOutAndLeavesNoRequest(t *testing.T) {
	p := newPending[string, string]("q", errNotWaiting)
	if how := waitFor(context.Background(), p, newFakeTurn(), 10*time.Millisecond); how != timedOut {
		t.Errorf("the wait ended %v, want timed out", how)
	}
	if err := p.resolve("q-1", answerIt); !errors.Is(err, errNotWaiting) {
		t.Errorf("an answer after the timeout: %v", err)
	}
}

func TestAWaitEndsCancelledOnceTheTurnsCancelIsSentOrTheTurnEnds(t *testing.T) {
	for name, end := range map[string]func(*fakeTurn){
		"cancel sent": func(t *fakeTurn) { close(t.cancelSent) },
		"turn ended":  func(t *fakeTurn) { close(t.ended) },
	} {
		p := newPending[string, string]("q", errNotWaiting)
		turn := newFakeTurn()
		end(turn)
		if how := waitFor(context.Background(), p, turn, time.Minute); how != cancelled {
			t.Errorf("%s: the wait ended %v, want cancelled", name, how)
		}
	}
}

func TestARequestTheAgentWithdrawsEndsWithdrawnAndAnyOtherEndOfItsContextCancelled(t *testing.T) {
	for cause, want := range map[error]ending{jsonrpc.ErrCancelledByPeer: withdrawn, context.Canceled: cancelled} {
		p := newPending[string, string]("q", errNotWaiting)
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		if how := waitFor(ctx, p, newFakeTurn(), time.Minute); how != want {
			t.Errorf("a context ended by %v: the wait ended %v, want %v", cause, how, want)
		}
	}
}
