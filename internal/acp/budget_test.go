package acp_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/answer"
	"github.com/acpgate/acpgate/outcome"
)

// budgetTurn is one turn run for a budget test: its ending and the bytes
// its chunks carried.
type budgetTurn struct {
	result outcome.Result
	chunks int
}

func runBudgetTurn(ctx context.Context, t *testing.T, s *acp.Session, script string, omit bool, chunkBytes *atomic.Int64) budgetTurn {
	t.Helper()
	var n int
	r, err := s.Prompt(ctx, []acpsdk.ContentBlock{acpsdk.TextBlock(script)}, acp.PromptOptions{
		OmitText: omit,
		Emit: func(e *acpgatev1.PromptEvent) {
			n += len(e.GetAgentMessageChunk().GetText())
			if chunkBytes != nil {
				chunkBytes.Add(int64(len(e.GetAgentMessageChunk().GetText())))
			}
		},
	})
	if err != nil {
		t.Errorf("prompt: %v", err)
	}
	return budgetTurn{result: r, chunks: n}
}

// wantWholeText checks a completed turn whose outcome carries its text.
func wantWholeText(t *testing.T, got budgetTurn, size int) {
	t.Helper()
	o := got.result.Outcome
	if o == nil || o.GetTextOmitted() || o.GetTextOmission() != acpgatev1.TextOmission_TEXT_OMISSION_UNSPECIFIED ||
		len(o.GetText()) != size || o.GetFinalMessage() != o.GetText() || o.GetTextBytes() != 0 || got.chunks != size {
		t.Errorf("want the whole %d-byte text (chunks carried %d): outcome %.200v, error %.200v", size, got.chunks, o, got.result.Error)
	}
}

// wantOmittedText checks a completed turn whose outcome leaves its text out
// for why, while its chunks carried all of it.
func wantOmittedText(t *testing.T, got budgetTurn, size int, why acpgatev1.TextOmission) {
	t.Helper()
	o := got.result.Outcome
	if o == nil || !o.GetTextOmitted() || o.GetTextOmission() != why || o.GetText() != "" || o.GetFinalMessage() != "" ||
		o.GetTextBytes() != uint64(size) || o.GetFinalMessageBytes() != uint64(size) || got.chunks != size {
		t.Errorf("want the %d-byte text omitted (%v), the chunks carrying it (they carried %d): outcome %.200v, error %.200v",
			size, why, got.chunks, o, got.result.Error)
	}
}

// waitUntil polls cond for up to five seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

func TestConcurrentTurnsNeverHoldMoreAnswerTextThanTheBudgetAndATurnOverItCompletesWithItsTextOmitted(t *testing.T) {
	const capacity, size = 1 << 20, 3000 * 256 // each turn alone fits; two do not
	budget := answer.NewBudget(capacity)
	cfg := agentConfig()
	cfg.AnswerBudget = budget
	cfg.PartialCap = 100 // a turn over the budget keeps about 4 KB

	stop := make(chan struct{})
	var peak atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), budget.Used()))
			select {
			case <-stop:
				return
			default:
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()

	// A turn that holds its text, still running, leaves too little for a
	// second one of the same size.
	holder := open(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var held atomic.Int64
	holding := make(chan budgetTurn, 1)
	go func() {
		holding <- runBudgetTurn(ctx, t, holder, "flood 3000 256\nsleep 5000\nstop end_turn", false, &held)
	}()
	waitUntil(t, "the first turn holds its text", func() bool { return held.Load() == size })
	if used := budget.Used(); used < size || used > capacity {
		t.Fatalf("the first turn reserved %d bytes for %d bytes of text", used, size)
	}
	over := runBudgetTurn(context.Background(), t, open(t, cfg), "flood 3000 256\nstop end_turn", false, nil)
	wantOmittedText(t, over, size, acpgatev1.TextOmission_TEXT_OMISSION_ANSWER_LIMIT)

	// Several at once: whatever fits is kept whole, the rest is omitted,
	// and the budget is never overdrawn.
	var wg sync.WaitGroup
	turns := make([]budgetTurn, 4)
	for i := range turns {
		s := open(t, cfg)
		wg.Go(func() {
			turns[i] = runBudgetTurn(context.Background(), t, s, "flood 1000 256\nstop end_turn", false, nil)
		})
	}
	wg.Wait()
	for _, got := range turns {
		if got.result.Outcome.GetTextOmitted() {
			wantOmittedText(t, got, 1000*256, acpgatev1.TextOmission_TEXT_OMISSION_ANSWER_LIMIT)
		} else {
			wantWholeText(t, got, 1000*256)
		}
	}
	holder.Cancel("the test is over")
	<-holding
	close(stop)
	<-sampled
	if p := peak.Load(); p > capacity {
		t.Errorf("%d bytes reserved of a %d-byte budget", p, capacity)
	}
	if used := budget.Used(); used != 0 {
		t.Errorf("%d bytes still reserved after every turn ended", used)
	}
}

func TestATurnThatFitsTheAnswerBudgetCarriesItsWholeText(t *testing.T) {
	budget := answer.NewBudget(1 << 20)
	cfg := agentConfig()
	cfg.AnswerBudget = budget
	cfg.PartialCap = 100
	got := runBudgetTurn(context.Background(), t, open(t, cfg), "flood 3000 256\nstop end_turn", false, nil)
	wantWholeText(t, got, 3000*256)
	if used := budget.Used(); used != 0 {
		t.Errorf("%d bytes still reserved after the turn ended", used)
	}
}

func TestATurnAskedToOmitItsTextSaysItWasRequestedAndReservesNothing(t *testing.T) {
	budget := answer.NewBudget(1) // no room at all: a reservation would fail
	cfg := agentConfig()
	cfg.AnswerBudget = budget
	cfg.PartialCap = 100
	got := runBudgetTurn(context.Background(), t, open(t, cfg), "flood 3000 256\nstop end_turn", true, nil)
	// Had the turn reserved, it would have failed and said ANSWER_LIMIT.
	wantOmittedText(t, got, 3000*256, acpgatev1.TextOmission_TEXT_OMISSION_REQUESTED)
}

func TestATurnWhoseClientWentAwayStopsKeepingItsTextBeforeTheAgentAnswers(t *testing.T) {
	budget := answer.NewBudget(64 << 20)
	cfg := agentConfig()
	cfg.AnswerBudget = budget
	cfg.PartialCap = 100 // the turn then keeps about 4 KB of its 256 KB
	cfg.CancelGrace = 10 * time.Second
	s := open(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var streamed atomic.Int64
	done := make(chan budgetTurn, 1)
	// The agent finishes the answer after the cancel, as a slow agent does.
	go func() {
		done <- runBudgetTurn(ctx, t, s, "ignore_cancel\nflood 1000 256\nsleep 1500\nstop end_turn", false, &streamed)
	}()
	waitUntil(t, "the answer has streamed", func() bool { return streamed.Load() == 1000*256 })
	if used := budget.Used(); used < 1000*256 {
		t.Fatalf("the turn reserved %d bytes for 256,000 bytes of text", used)
	}
	cancel()
	waitUntil(t, "the turn returns its reservation", func() bool { return budget.Used() == 0 })
	select {
	case got := <-done:
		t.Fatalf("the agent answered before the check: %v %v", got.result.Outcome, got.result.Error)
	default:
	}
	got := <-done
	wantOmittedText(t, got, 1000*256, acpgatev1.TextOmission_TEXT_OMISSION_CLIENT_GONE)
}
