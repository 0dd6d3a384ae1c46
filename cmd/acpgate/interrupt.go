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

import (
	"context"
	"sync"
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

// cancelOnInterrupt does what this file's documentation says for one Prompt
// call; abandon cancels the call's own context. Once the `started` event
// arrives, pass its session id to turnStarted; call stop when the stream has
// ended.
func cancelOnInterrupt(ctx context.Context, client acpgatev1.AgentGatewayClient, abandon context.CancelFunc) (turnStarted func(sessionID string), stop func()) {
	startedCh := make(chan string, 1) // the session id, once the turn started
	done := make(chan struct{})       // closed when the stream has ended
	var watcher sync.WaitGroup
	watcher.Go(func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		var sessionID string
		select {
		case sessionID = <-startedCh:
		default:
		}
		if sessionID == "" {
			abandon()
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), clientCancelTimeout)
		_, err := client.Cancel(cctx, &acpgatev1.CancelRequest{SessionId: sessionID})
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
	turnStarted = func(sessionID string) {
		select {
		case startedCh <- sessionID:
		default:
		}
	}
	stop = func() {
		close(done)
		watcher.Wait()
	}
	return turnStarted, stop
}
