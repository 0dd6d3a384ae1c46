package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acpgate/acpgate/bench/internal/report"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The warm section measures the warm pool against an agent that is slow to
// start: the test agent sleeping warmInitDelay before it answers
// initialize, a stand-in for Node start-up and credential loading.

// warmInitDelay is the slow agent's start-up.
const warmInitDelay = time.Second

// The agents of the warm section's gateway: the same slow agent kept warm
// by two, not kept warm, and kept warm by four for the sustained rate.
const (
	warmAgent    = "slow-warm"
	coldAgent    = "slow-cold"
	sustainAgent = "slow-warm4"
)

// warmAgents is the YAML of the warm section's agents.
func (d *driver) warmAgents() string {
	agent := func(name string, warm int) string {
		return fmt.Sprintf(`  - name: %s
    command: %q
    args: [--unique-sessions, --initialize-delay, %s]
    warm: %d
`, name, d.agent, warmInitDelay, warm)
	}
	return agent(warmAgent, 2) + agent(coldAgent, 0) + agent(sustainAgent, 4)
}

func (d *driver) warmSection() error {
	return d.withGateway(gatewayConf{agents: d.warmAgents()}, d.warmOn)
}

func (d *driver) warmOn(ctx context.Context, _ *gatewayProc, client acpgatev1.AgentGatewayClient) error {
	res := report.WarmResult{Delay: warmInitDelay}
	var err error
	res.Warm, res.Open, res.Cold, err = d.compareStarts(ctx, client, starts{
		warm: warmAgent, cold: coldAgent, pool: 2, runs: d.plan.warmRuns, text: "chunk hello\nstop end_turn",
	})
	if err != nil {
		return err
	}
	if err := waitWarm(ctx, client, sustainAgent, 4); err != nil {
		return err
	}
	d.waitQuiet()
	res.Sustain = sustain(ctx, client, 4, d.plan.warmSustain)
	s := res.Sustain
	logf("   sustained: %d one-shot turns in %s from %d clients (%d took a warm process, %d errors)", s.Turns, s.Wall.Round(time.Millisecond), s.Clients, s.Taken, s.Errors)
	if s.Errors > 0 {
		d.fail("warm: %d sustained one-shot turns failed", s.Errors)
	}
	d.rep.Warm = &res
	return nil
}

// starts is what compareStarts compares: one-shot turns on an agent kept
// warm by pool processes, the same turn on a session already open, and
// one-shot turns on the same agent without a pool.
type starts struct {
	warm, cold string // the agents: with `warm: pool`, and without a pool
	pool       uint32
	runs       int
	text       string // the prompt of every turn
}

// compareStarts runs s.runs rounds of the three turns, each round after the
// pool is full again, each turn on a quiet machine, and returns each turn's
// time to its first chunk (ns). For a real agent the quiet matters: the
// process a one-shot turn leaves behind is stopped after the turn, and a
// warm take starts a refill, each seconds of CPU that would otherwise slow
// the next turn. The open session is opened on s.cold and closed at the
// end.
func (d *driver) compareStarts(ctx context.Context, client acpgatev1.AgentGatewayClient, s starts) (warm, open, cold []float64, err error) {
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: s.cold})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("opening the session for the open-session turns: %w", err)
	}
	defer client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: sess.GetId()}) //nolint:errcheck // the gateway stops next
	for run := range s.runs {
		if err := waitWarm(ctx, client, s.warm, s.pool); err != nil {
			return nil, nil, nil, err
		}
		for _, v := range []struct {
			into *[]float64
			req  *acpgatev1.PromptRequest
		}{
			{&cold, &acpgatev1.PromptRequest{Agent: s.cold}},
			{&open, &acpgatev1.PromptRequest{SessionId: sess.GetId()}},
			{&warm, &acpgatev1.PromptRequest{Agent: s.warm}},
		} {
			v.req.Text = s.text
			d.waitQuiet()
			took, err := firstChunk(ctx, client, v.req)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("run %d: %w", run+1, err)
			}
			*v.into = append(*v.into, float64(took))
		}
		logf("   run %d: warm %s, open session %s, cold %s", run+1,
			report.FmtDurF(warm[run]), report.FmtDurF(open[run]), report.FmtDurF(cold[run]))
	}
	return warm, open, cold, nil
}

// waitWarm waits, up to a minute, for agent to have n warm processes ready.
func waitWarm(ctx context.Context, client acpgatev1.AgentGatewayClient, agent string, n uint32) error {
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{})
		if err != nil {
			return err
		}
		for _, a := range resp.GetAgents() {
			if a.GetName() == agent && a.GetWarmReady() >= n {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agent %s never had %d warm processes ready", agent, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// firstChunk runs one turn and returns the time from the call to its
// first agent message chunk; the turn must complete.
func firstChunk(ctx context.Context, client acpgatev1.AgentGatewayClient, req *acpgatev1.PromptRequest) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	began := time.Now()
	stream, err := client.Prompt(ctx, req)
	if err != nil {
		return 0, err
	}
	var took time.Duration
	for {
		e, err := stream.Recv()
		if err != nil {
			return 0, fmt.Errorf("the stream ended before its terminal: %w", err)
		}
		switch {
		case e.GetAgentMessageChunk() != nil && took == 0:
			took = time.Since(began)
		case e.GetError() != nil:
			return 0, fmt.Errorf("the turn failed: %s", e.GetError().GetMessage())
		case e.GetOutcome() != nil:
			if took == 0 {
				return 0, errors.New("the turn streamed no chunk")
			}
			return took, nil
		}
	}
}

// sustain runs one-shot turns on sustainAgent from clients callers, each
// starting its next turn when the last ends, for d.
func sustain(ctx context.Context, client acpgatev1.AgentGatewayClient, clients int, d time.Duration) report.WarmSustain {
	s := report.WarmSustain{Clients: clients}
	var mu sync.Mutex
	var wg sync.WaitGroup
	began := time.Now()
	for range clients {
		wg.Go(func() {
			for time.Since(began) < d {
				took, err := firstChunk(ctx, client, &acpgatev1.PromptRequest{Agent: sustainAgent, Text: "chunk hello\nstop end_turn"})
				mu.Lock()
				if err != nil {
					s.Errors++
				} else {
					s.Turns++
					s.TTFC = append(s.TTFC, float64(took))
					if took < warmInitDelay/2 {
						s.Taken++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	s.Wall = time.Since(began)
	return s
}
