package e2e

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testpg"
)

// outageRecovery bounds how long after PostgreSQL is back every replica
// must serve again: a lease interval to find the lease lost, the agents'
// stop, another to join again, and a margin for a loaded machine.
const outageRecovery = 20 * time.Second

// outageCallTimeout bounds a call that needs the database while it is
// down: it must fail, not hang.
const outageCallTimeout = 10 * time.Second

func TestAPostgresOutagePastTheLeaseLeavesEveryReplicaServingAndEachTurnWithOneEnding(t *testing.T) {
	pg, dsn := testpg.StartOwn(t)
	c := startClusterWith(t, 3, clusterOpts{dsn: dsn, extra: "metrics:\n  listen: 127.0.0.1:0\n"})
	a := c.replicas[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A turn that runs through the outage, its client reading it as it
	// goes.
	stream, err := a.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk before\nsleep 2000\nchunk after\nsleep 60000\nchunk never"})
	if err != nil {
		t.Fatal(err)
	}
	turnID := startedTurn(t, stream).GetTurnId()
	type streamEnd struct {
		last *acpgatev1.PromptEvent
		err  error
	}
	ended := make(chan streamEnd, 1)
	go func() {
		var end streamEnd
		for {
			e, err := stream.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					end.err = err
				}
				ended <- end
				return
			}
			if e.GetHeartbeat() == nil {
				end.last = e
			}
		}
	}()

	if err := pg.Halt(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	// While the database is down, a call that needs it fails at once with
	// a retryable status.
	for _, r := range c.replicas {
		callCtx, cancel := context.WithTimeout(ctx, outageCallTimeout)
		_, err := r.client.GetTurn(callCtx, &acpgatev1.GetTurnRequest{TurnId: turnID})
		cancel()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("GetTurn through %s with the database down: %v, want UNAVAILABLE", r.id, err)
		}
	}
	time.Sleep(time.Until(down.Add(3 * leaseTTL)))
	// By now every replica knows its lease lost, and says so.
	for _, r := range c.replicas {
		hc, err := healthpb.NewHealthClient(r.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "acpgate.v1.AgentGateway"})
		if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("replica %s's health with the database down past its lease: %v, %v; want NOT_SERVING", r.id, hc.GetStatus(), err)
		}
	}
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()

	// Every replica still runs, and serves: health SERVING and a call
	// answered from the store.
	deadline := back.Add(outageRecovery)
	for _, r := range c.replicas {
		health := healthpb.NewHealthClient(r.conn)
		for {
			select {
			case err := <-r.exited:
				t.Fatalf("replica %s exited after the outage (%v):\n%s", r.id, err, r.log())
			default:
			}
			hc, herr := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "acpgate.v1.AgentGateway"})
			_, lerr := r.client.ListTurns(ctx, &acpgatev1.ListTurnsRequest{})
			if herr == nil && hc.GetStatus() == healthpb.HealthCheckResponse_SERVING && lerr == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %s %v after PostgreSQL came back: health %v, %v; ListTurns: %v\n%s", r.id, outageRecovery, hc.GetStatus(), herr, lerr, r.log())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("every replica served again %v after PostgreSQL came back", time.Since(back).Round(time.Millisecond))

	// A new turn completes through each.
	for _, r := range c.replicas {
		events := drain(t, mustPrompt(ctx, t, r.client, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk again"}))
		if o := events[len(events)-1].GetOutcome(); o.GetText() != "again" {
			t.Errorf("a new turn through %s ended %v", r.id, events[len(events)-1])
		}
	}

	// The turn that ran through the outage has one ending, the same
	// through every replica, by GetTurn and by WatchTurn, and it is the
	// ending its own client got, if its stream ended with one.
	var terminal *acpgatev1.PromptEvent
	for _, r := range c.replicas {
		got, err := r.client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: turnID})
		if err != nil || got.GetState() != acpgatev1.TurnState_TURN_STATE_ENDED {
			t.Fatalf("the outage's turn through %s: %v, %v; want it ended", r.id, got, err)
		}
		watched := drain(t, mustWatch(ctx, t, r.client, turnID))
		last := watched[len(watched)-1]
		if !proto.Equal(last, got.GetTerminal()) || last.GetSeq() != got.GetLastSeq() {
			t.Errorf("through %s, WatchTurn ends %v and GetTurn says %v (last seq %d)", r.id, last, got.GetTerminal(), got.GetLastSeq())
		}
		if terminal == nil {
			terminal = last
		} else if !proto.Equal(last, terminal) {
			t.Errorf("through %s the outage's turn ended %v; through %s %v", r.id, last, c.replicas[0].id, terminal)
		}
	}
	if e := terminal.GetError(); !e.GetRetryable() {
		t.Errorf("the outage's turn ended %v, want a retryable error", terminal)
	}
	select {
	case end := <-ended:
		t.Logf("the outage's turn's own stream ended with %v after %v", end.err, end.last)
		if end.last.GetError() != nil || end.last.GetOutcome() != nil {
			if !proto.Equal(end.last, terminal) {
				t.Errorf("the outage's turn's own client got the terminal %v; the store has %v", end.last, terminal)
			}
		} else if code := status.Code(end.err); code != codes.Unavailable {
			t.Errorf("the outage's turn's own stream ended with %v after %v, want its terminal or UNAVAILABLE", end.err, end.last)
		}
	case <-time.After(outageRecovery):
		t.Errorf("the outage's turn's own stream has not ended")
	}

	// Each replica says once that it lost its lease and once that it
	// joined again, and counts both.
	for _, r := range c.replicas {
		log := r.log()
		if n := strings.Count(log, "this replica lost its lease"); n != 1 {
			t.Errorf("replica %s logged its lease lost %d times, want once", r.id, n)
		}
		if n := strings.Count(log, "this replica joined the cluster again"); n != 1 {
			t.Errorf("replica %s logged joining again %d times, want once", r.id, n)
		}
		fams := scrape(t, r.metricsURL(t))
		if lost, rejoined := values(fams, "acpgate_cluster_leases_lost_total")[""], values(fams, "acpgate_cluster_rejoins_total")[""]; lost != 1 || rejoined != 1 {
			t.Errorf("replica %s counts %v leases lost and %v rejoins, want 1 and 1", r.id, lost, rejoined)
		}
	}
}

// mustPrompt opens a Prompt stream.
func mustPrompt(ctx context.Context, t *testing.T, client acpgatev1.AgentGatewayClient, req *acpgatev1.PromptRequest) acpgatev1.AgentGateway_PromptClient {
	t.Helper()
	s, err := client.Prompt(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestATurnWhoseJournalFailedInAShortPostgresOutageEndsOnceEverywhereAndItsRetryRuns(t *testing.T) {
	pg, dsn := testpg.StartOwn(t)
	// A lease far longer than the outage: no replica loses it, so the
	// turn's owner, not a reaper, must end the turn.
	c := startClusterWith(t, 3, clusterOpts{dsn: dsn, leaseTTL: 10 * time.Second})
	a, b := c.replicas[0], c.replicas[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req := &acpgatev1.PromptRequest{Agent: "test", RequestId: "outage-retry", Text: "chunk before\nsleep 1000\nchunk after"}
	stream := mustPrompt(ctx, t, a.client, req)
	turnID := startedTurn(t, stream).GetTurnId()
	if err := pg.Halt(); err != nil {
		t.Fatal(err)
	}
	// The agent's next chunk (or its answer) cannot be journaled.
	time.Sleep(2 * time.Second)
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	var own []*acpgatev1.PromptEvent
	var ownErr error
	for {
		e, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				ownErr = err
			}
			break
		}
		own = append(own, e)
	}
	t.Logf("the turn's own stream ended with %v after %d events", ownErr, len(own))

	// The turn ends, once, as every replica reads it.
	deadline := time.Now().Add(outageRecovery)
	var terminal *acpgatev1.PromptEvent
	for _, r := range c.replicas {
		var got *acpgatev1.Turn
		for {
			var err error
			got, err = r.client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: turnID})
			if err == nil && got.GetState() == acpgatev1.TurnState_TURN_STATE_ENDED {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the turn through %s %v after PostgreSQL came back: %v, %v; want it ended", r.id, outageRecovery, got, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		watched := drain(t, mustWatch(ctx, t, r.client, turnID))
		last := watched[len(watched)-1]
		if !proto.Equal(last, got.GetTerminal()) {
			t.Errorf("through %s, WatchTurn ends %v and GetTurn says %v", r.id, last, got.GetTerminal())
		}
		if terminal == nil {
			terminal = last
		} else if !proto.Equal(last, terminal) {
			t.Errorf("through %s the turn ended %v; through a %v", r.id, last, terminal)
		}
	}
	if e := terminal.GetError(); !e.GetRetryable() {
		t.Fatalf("the turn ended %v, want a retryable error", terminal)
	}
	if ownErr == nil {
		if last := own[len(own)-1]; !proto.Equal(last, terminal) {
			t.Errorf("the turn's own client got the terminal %v; the store has %v", last, terminal)
		}
	} else if status.Code(ownErr) != codes.Unavailable {
		t.Errorf("the turn's own stream ended with %v, want its terminal or UNAVAILABLE", ownErr)
	}

	// Its request_id runs again: the retry is attempt 2, and completes.
	events := drain(t, mustPrompt(ctx, t, b.client, req))
	retry, err := b.client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: events[0].GetStarted().GetTurnId()})
	if err != nil || retry.GetTurnId() == turnID || retry.GetAttempt() != 2 {
		t.Errorf("the retry is %v, %v; want attempt 2, a new turn", retry, err)
	}
	if o := events[len(events)-1].GetOutcome(); o.GetText() != "beforeafter" {
		t.Errorf("the retry ended %v", events[len(events)-1])
	}
	for _, r := range c.replicas {
		if strings.Contains(r.log(), "lost its lease") {
			t.Errorf("replica %s lost its lease in an outage far shorter than it:\n%s", r.id, r.log())
		}
	}
}
