package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// slowStartConfig starts at most two agents at once, each taking
// slowStart to answer initialize.
const slowStartConfig = `
shutdown_grace: 5s
limits: {max_starting_agents: 2}
agents:
  - name: slow
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --initialize-delay, 400ms]
`

const slowStart = 400 * time.Millisecond

// A burst of one-shot turns takes its start-ups two at a time: eight
// start-ups of 400 ms each cannot end sooner than four rounds of them, and
// no more than two agents (and the two of the round just ending, which
// exit as their turns end) are ever seen at once; unbounded, all eight run
// together. As the unprivileged user nobody, as a gateway runs in a
// container.
func TestAnUnprivilegedGatewayStartsNoMoreAgentsAtOnceThanMaxStartingAgents(t *testing.T) {
	s := serveAsNobody(t, slowStartConfig, unprivileged)
	client, _ := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	stopSampling := peakAgents(s.cmd.Process.Pid)

	const turns = 8
	began := time.Now()
	var wg sync.WaitGroup
	for range turns {
		wg.Go(func() {
			stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "slow", Text: "chunk hi"})
			if err != nil {
				t.Error(err)
				return
			}
			for {
				e, err := stream.Recv()
				if err != nil {
					t.Errorf("Recv: %v", err)
					return
				}
				if e.GetError() != nil {
					t.Errorf("a turn ended with %v\n%s", e, s.log())
					return
				}
				if e.GetOutcome() != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	peak := stopSampling()
	if peak > 4 {
		t.Errorf("%d agents ran at once, where two start at a time and each ends with its one-chunk turn", peak)
	}
	if rounds := time.Duration(turns / 2); took < rounds*slowStart*9/10 {
		t.Errorf("%d start-ups of %s, two at a time, ended after %s: fewer than %d rounds", turns, slowStart, took, rounds)
	}
	t.Logf("%d turns in %s, at most %d agents at once", turns, took, peak)
}
