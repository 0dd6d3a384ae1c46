package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/turn"
)

// Tests of WatchTurn streams that stop reading: what the gateway holds for
// each must stay small and fixed, be given back once they leave, and not
// slow the turn or the streams that do read.

// floodChunk is the size of the chunks of the flooding turns: the largest a
// coalesced chunk may be, so each event is as heavy as an agent can make it.
const floodChunk = 64 << 10

// watchedFlood is what watchedFloodRun measured.
type watchedFlood struct {
	baseline int64         // the gateway's RSS before the turn
	peak     int64         // its peak RSS while the turn ran and the watchers stalled
	after    int64         // its RSS once the stalled watchers had left
	took     time.Duration // from the live stream's started event to its terminal
	bytes    int64         // the chunk text the live stream carried
}

// watchedFloodRun runs a turn of events chunks of floodChunk bytes with a
// live stream that reads it all; once the turn is a quarter done (past what
// the journal keeps in memory), stalled WatchTurn streams join from seq 0
// and stop reading after their first event, and one more watcher reads the
// whole turn. It checks that the live stream and the reading watcher get
// every event, in order, and measures the gateway's RSS before, at its peak,
// and after the stalled watchers leave. The stalled streams are spread over
// connections with gRPC's smallest windows (see stalledClient), 50 to a
// connection.
func watchedFloodRun(t *testing.T, s *served, events, stalled int) watchedFlood {
	t.Helper()
	pid := s.cmd.Process.Pid
	settle(t, pid)
	m := watchedFlood{baseline: procStatus(t, pid, "VmRSS")}

	live := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stream, err := live.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: fmt.Sprintf("flood %d %d\nstop end_turn", events, floodChunk)},
		grpc.MaxCallRecvMsgSize(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetStarted() == nil {
		t.Fatalf("first event %v, %v", first, err)
	}
	began, turnID := time.Now(), first.GetStarted().GetTurnId()
	liveEvents := []*acpgatev1.PromptEvent{first}
	quarter := make(chan struct{})
	liveDone := make(chan error, 1)
	go func() {
		for {
			e, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				liveDone <- err
				return
			}
			liveEvents = append(liveEvents, e)
			m.bytes += int64(len(e.GetAgentMessageChunk().GetText()))
			if len(liveEvents) == events/4 {
				close(quarter)
			}
			if e.GetOutcome() != nil || e.GetError() != nil {
				m.took = time.Since(began)
			}
		}
	}()
	select {
	case <-quarter:
	case err := <-liveDone:
		t.Fatalf("the live stream ended before a quarter of the turn: %v", err)
	}

	watchCtx, leave := context.WithCancel(context.Background())
	defer leave()
	var conns []acpgatev1.AgentGatewayClient
	for i := 0; i < stalled; i++ {
		if i%50 == 0 {
			conns = append(conns, s.stalledClient(t))
		}
		w, err := conns[len(conns)-1].WatchTurn(watchCtx, &acpgatev1.WatchTurnRequest{TurnId: turnID})
		if err != nil {
			t.Fatalf("stalled watcher %d: %v", i, err)
		}
		if _, err := w.Recv(); err != nil {
			t.Fatalf("stalled watcher %d: %v", i, err)
		}
	}
	reader := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	rs, err := reader.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: turnID}, grpc.MaxCallRecvMsgSize(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	read := drain(t, rs)

	if err := <-liveDone; err != nil {
		t.Fatalf("the live stream after %d events: %v", len(liveEvents), err)
	}
	checkSeqs(t, liveEvents, 1)
	checkSeqs(t, read, 1)
	if len(read) != len(liveEvents) || len(liveEvents) < events+2 {
		t.Fatalf("the reading watcher got %d events, the live stream %d, of %d chunks", len(read), len(liveEvents), events)
	}
	settle(t, pid)
	m.peak = procStatus(t, pid, "VmHWM")

	if stalled > 0 {
		leave()
		// The gateway notices the streams' cancellation, ends their
		// calls and gives their memory back to the system: RSS, not
		// only the heap.
		deadline := time.Now().Add(20 * time.Second)
		for m.after = procStatus(t, pid, "VmRSS"); m.after > m.baseline+afterSlack && time.Now().Before(deadline); m.after = procStatus(t, pid, "VmRSS") {
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("%d stalled watchers of a turn of %d chunks of %d KiB: gateway RSS %d MiB before, peak %d MiB; the live stream carried %d MiB in %s (%.0f MiB/s)",
		stalled, events, floodChunk>>10, m.baseline>>20, m.peak>>20, m.bytes>>20, m.took.Round(time.Millisecond), rate(m))
	if stalled > 0 {
		t.Logf("gateway RSS %d MiB once the stalled watchers had left", m.after>>20)
	}
	return m
}

// perStalledWatcher is what a stalled watcher may add to the gateway's peak
// RSS: what gRPC holds for a stream whose client does not read (its 64 KiB
// write quota, passed by the one message that took it, a chunk event of
// 64 KiB), the one event the watcher is sending, and as much again of
// garbage the collector lets grow between collections.
const perStalledWatcher = 512 << 10

// readPages is what the streams of the turn, stalled or reading, may hold
// at once in pages read from the store, whatever their number: the read
// budget they share (turn.ReadBudgetBytes). A crowd of watchers joining
// from seq 0 can take it in one go, where the turn's one reading watcher
// seldom does. How much of it a run's peak shows depends on where the
// collections fall: on one machine the run with the 63 stalled watchers
// peaked at 139 – 150 MiB, and the turn alone at 76 – 158 MiB, so that
// one pair of runs measured the watchers' cost anywhere from 24 to 79 MiB.
const readPages = turn.ReadBudgetBytes

// peakSlack is how far apart two runs of the same turn may peak, stalled
// watchers aside: the collector's timing differs from run to run.
const peakSlack = 16 << 20

// afterSlack is how far above its RSS before the turn the gateway may stay
// once the stalled watchers have left.
const afterSlack = 24 << 20

func TestStalledWatchersOfALargeTurnHoldASmallFixedAmountEachAndGiveItBackWhenTheyLeave(t *testing.T) {
	// 32 MiB, and as many watchers as limits.max_watchers_per_turn lets
	// one turn have by default, the reading one included.
	events, stalled, cfg := 512, 63, e2eConfig
	if n, err := strconv.Atoi(os.Getenv("ACPGATE_E2E_STALLED_WATCHERS")); err == nil {
		// The full measure, by hand: 300 stalled watchers of a 256 MiB
		// turn.
		events, stalled = 4096, n
		cfg += fmt.Sprintf("limits: {max_watchers_per_turn: %d, max_watchers_per_principal: %d}\n", n+1, n+1)
	}
	// The turn alone, for what it costs without watchers (its answer is
	// held for its outcome, and read back by the reading watcher).
	alone := watchedFloodRun(t, serve(t, "--config", writeConfig(t, cfg)), events, 0)
	m := watchedFloodRun(t, serve(t, "--config", writeConfig(t, cfg)), events, stalled)
	cost := (m.peak - m.baseline) - (alone.peak - alone.baseline)
	t.Logf("%d stalled watchers cost %d MiB of peak RSS (%d KiB each); the live stream ran at %.0f MiB/s with them, %.0f MiB/s without",
		stalled, cost>>20, cost/int64(stalled)>>10, rate(m), rate(alone))
	if bound := int64(stalled)*perStalledWatcher + readPages + peakSlack; cost > bound {
		t.Errorf("%d stalled watchers added %d MiB to the gateway's peak RSS, over %d MiB", stalled, cost>>20, bound>>20)
	}
	if m.after > m.baseline+afterSlack {
		t.Errorf("20 s after the stalled watchers left the gateway's RSS is %d MiB, from %d MiB before the turn", m.after>>20, m.baseline>>20)
	}
}

// rate is the live stream's throughput in MiB/s.
func rate(m watchedFlood) float64 {
	return float64(m.bytes) / (1 << 20) / m.took.Seconds()
}

// watchOne opens a WatchTurn stream of turnID as ctx's caller and reads
// its first event: a stream refused at its limits fails there. leave ends
// the stream.
func watchOne(ctx context.Context, client acpgatev1.AgentGatewayClient, turnID string) (leave func(), err error) {
	ctx, leave = context.WithCancel(ctx)
	stream, err := client.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: turnID})
	if err == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		leave()
		return nil, err
	}
	return leave, nil
}

// wantRefusedFor checks that err is RESOURCE_EXHAUSTED with a RetryInfo
// and names the limit that refused it.
func wantRefusedFor(t *testing.T, what string, err error, limit string) {
	t.Helper()
	wantRetryInfo(t, what, err)
	if !strings.Contains(status.Convert(err).Message(), limit) {
		t.Errorf("%s: %v does not name %s", what, err, limit)
	}
}

func TestWatchersPerTurnAndPerPrincipalAreRefusedWithRetryInfoAndAdmittedAgainOnceOneLeaves(t *testing.T) {
	p, signer, s := jwtGatewayFrom(t, func(p *pki, jwks string) string {
		return e2eConfig + fmt.Sprintf(`tls: {cert_file: %s, key_file: %s}
auth: {mode: jwt, jwks_file: %s, issuer: https://issuer.test, audience: acpgate, admins: [root]}
limits: {max_watchers_per_turn: 3, max_watchers_per_principal: 2}
`, p.certFile, p.keyFle, jwks)
	})
	client := acpgatev1.NewAgentGatewayClient(p.tlsClient(t, s, nil))
	alice, root := as(t, signer, "alice"), as(t, signer, "root")
	_, _, turnID := startTurnOnSession(t, alice, client, "hang")

	first, err := watchOne(alice, client, turnID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watchOne(alice, client, turnID); err != nil {
		t.Fatal(err)
	}
	_, err = watchOne(alice, client, turnID)
	wantRefusedFor(t, "alice's third watcher", err, "limits.max_watchers_per_principal")
	// Another principal (an admin, who may watch alice's turn) is not
	// held to alice's count, but to the turn's.
	if _, err := watchOne(root, client, turnID); err != nil {
		t.Fatalf("root's watcher while alice is at her bound: %v", err)
	}
	_, err = watchOne(root, client, turnID)
	wantRefusedFor(t, "the turn's fourth watcher", err, "limits.max_watchers_per_turn")

	// One of alice's leaves: its place, on the turn and hers, is free
	// once the gateway has seen the stream end.
	first()
	deadline := time.Now().Add(10 * time.Second)
	for _, err = watchOne(alice, client, turnID); err != nil; _, err = watchOne(alice, client, turnID) {
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("alice's watcher after one of hers left: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err = watchOne(root, client, turnID)
	wantRefusedFor(t, "the turn's fourth watcher, again", err, "limits.max_watchers_per_turn")
}
