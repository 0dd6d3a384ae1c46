package main

// Interrupting a prompt (Ctrl-C, SIGTERM).
//
// The Prompt call runs on its own context, not on the command's ctx, so
// that the cancellation terminal can still be read after ctx is cancelled
// (Ctrl-C). On cancellation:
//
//   - once the turn has started (the `started` event named its session),
//     the client calls Cancel on that session and keeps reading the stream
//     until the gateway sends the terminal event (normally error.harness
//     with cancelled, exit 7). If Cancel fails, or no terminal arrives
//     within clientCancelWait, the call itself is cancelled, which also
//     cancels the turn on the gateway;
//   - before the turn has started, the call itself is cancelled. Without a
//     request id (on_disconnect CANCEL) the gateway then abandons the
//     set-up and no turn runs; with one, the turn runs on (CONTINUE, the
//     default for a request id) unless --on-disconnect cancel was given,
//     and `acpgate turns` shows it.
//
// Either way an interrupted prompt exits 7 unless the turn ended otherwise
// first.
//
// With --request-id (and the turn left running on disconnect, the default
// there), Ctrl-C after the turn has started detaches instead: a cancelled
// turn is not retryable, so cancelling would spend the id for the gateway's
// turn_retention. The command prints how to follow the turn (acpgate watch)
// and how to cancel it (acpgate cancel, or a second Ctrl-C within
// secondInterruptWait, which takes the cancel path above), then exits 0,
// leaving the turn running.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// clientCancelWait is how long an interrupted prompt waits, after asking the
// gateway to cancel the turn, for the terminal event before it abandons the
// call. It exceeds the gateway's default cancel grace (10s) so that the
// gateway's own verdict normally arrives first.
var clientCancelWait = 30 * time.Second

// clientCancelTimeout bounds the Cancel call an interrupted prompt makes.
const clientCancelTimeout = 5 * time.Second

// secondInterruptWait is how long a detaching prompt waits for a second
// Ctrl-C, which cancels the turn instead: long enough to decide, short
// enough that a detached command does not seem stuck.
var secondInterruptWait = 3 * time.Second

// interruptAgain delivers the interrupts that arrive after the first (the
// command's ctx already reports the first); stop ends the delivery.
var interruptAgain = func() (again <-chan os.Signal, stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	return ch, func() { signal.Stop(ch) }
}

// interruption is what an interrupted prompt decided, for streamPrompt.
type interruption struct {
	detached atomic.Bool
}

// cancelOnInterrupt does what this file's documentation says for one Prompt
// call; abandon cancels the call's own context. detach says that an
// interruption detaches (a request id that outlives the command). Once the
// `started` event arrives, pass it to turnStarted; call stop when the
// stream has ended. Messages go to stderr.
func cancelOnInterrupt(ctx context.Context, client acpgatev1.AgentGatewayClient, abandon context.CancelFunc, detach bool, stderr io.Writer) (turnStarted func(started *acpgatev1.PromptEvent), stop func(), st *interruption) {
	startedCh := make(chan *acpgatev1.TurnStarted, 1) // once the turn started
	done := make(chan struct{})                       // closed when the stream has ended
	st = &interruption{}
	var watcher sync.WaitGroup
	watcher.Go(func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		var started *acpgatev1.TurnStarted
		select {
		case started = <-startedCh:
		default:
		}
		if started.GetSessionId() == "" {
			abandon()
			return
		}
		if detach && !secondInterrupt(started, stderr, done) {
			st.detached.Store(true)
			abandon()
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), clientCancelTimeout)
		_, err := client.Cancel(cctx, &acpgatev1.CancelRequest{SessionId: started.GetSessionId()})
		cancel()
		if err != nil {
			abandon()
			return
		}
		timer := time.NewTimer(clientCancelWait)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			abandon()
		}
	})
	turnStarted = func(ev *acpgatev1.PromptEvent) {
		select {
		case startedCh <- ev.GetStarted():
		default:
		}
	}
	stop = func() {
		close(done)
		watcher.Wait()
	}
	return turnStarted, stop, st
}

// secondInterrupt tells the user how to follow and cancel the started turn
// and waits secondInterruptWait for a second interrupt: true when one came
// (cancel the turn), false to detach. The stream ending first (done) is
// detaching too: the turn's own ending is then already shown.
func secondInterrupt(started *acpgatev1.TurnStarted, stderr io.Writer, done <-chan struct{}) bool {
	again, stop := interruptAgain()
	defer stop()
	fmt.Fprintf(stderr, "\nacpgate: detaching: turn %s runs on (its request id outlives this command).\n"+
		"  follow it:  acpgate watch %s\n"+
		"  cancel it:  Ctrl-C again within %s, or acpgate cancel %s\n",
		started.GetTurnId(), started.GetTurnId(), secondInterruptWait, started.GetSessionId())
	timer := time.NewTimer(secondInterruptWait)
	defer timer.Stop()
	select {
	case <-again:
		fmt.Fprintln(stderr, "acpgate: cancelling the turn")
		return true
	case <-timer.C:
		return false
	case <-done:
		return false
	}
}
