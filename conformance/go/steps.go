package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// step is one call of a scenario of kind "steps"; see conformance/README.md.
type step struct {
	Call      string   `json:"call"`
	Agent     string   `json:"agent"`
	Script    []string `json:"script"`
	RequestID string   `json:"request_id"`
	Turn      *int     `json:"turn"`
	TurnID    string   `json:"turn_id"`
	AfterSeq  uint64   `json:"after_seq"`
	SameAs    *int     `json:"same_as"`
}

// runSuffix makes this run's request ids its own: every runner prompts the
// same gateway, and a request_id seen before would attach to the earlier
// runner's turn. It is removed from every string of the output.
var runSuffix = "." + randomHex(8)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// stepResult is what a step left for the steps after it.
type stepResult struct {
	events []*acpgatev1.PromptEvent // a stream's events, heartbeats left out
	turnID string                   // the turn its `started` event announced
}

// runSteps runs a scenario of kind "steps" and returns its canonical output
// line.
func runSteps(client acpgatev1.AgentGatewayClient, sc scenario) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()

	var (
		outs    []any
		results []stepResult
		turns   []knownTurn
	)
	for i, st := range sc.Steps {
		out := map[string]any{"call": st.Call}
		var res stepResult
		var err error
		switch st.Call {
		case "Prompt":
			res, err = promptStep(ctx, client, sc, st, results, out)
		case "WatchTurn":
			res, err = watchStep(ctx, client, st, results, out)
		case "GetTurn":
			err = getTurnStep(ctx, client, st, results, out)
		default:
			err = fmt.Errorf("unknown call %q", st.Call)
		}
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		if res.turnID != "" && !slices.ContainsFunc(turns, func(t knownTurn) bool { return t.id == res.turnID }) {
			turns = append(turns, knownTurn{res.turnID, fmt.Sprintf("<turn:%d>", i)})
		}
		results = append(results, res)
		outs = append(outs, out)
	}
	return finish(map[string]any{"name": sc.Name, "steps": outs}, turns)
}

// promptStep runs a one-shot Prompt.
func promptStep(ctx context.Context, client acpgatev1.AgentGatewayClient, sc scenario, st step, results []stepResult, out map[string]any) (stepResult, error) {
	agent := st.Agent
	if agent == "" {
		agent = sc.Agent
	}
	req := &acpgatev1.PromptRequest{Agent: agent, Text: strings.Join(st.Script, "\n"), ChunkDelivery: sc.delivery}
	if st.RequestID != "" {
		req.RequestId = st.RequestID + runSuffix
	}
	stream, err := client.Prompt(ctx, req)
	if err != nil {
		return stepResult{}, fmt.Errorf("starting Prompt: %w", err)
	}
	res, err := readStream("Prompt", stream, out)
	if err != nil {
		return res, err
	}
	v := violations(res.events, agent, "")
	return res, sameEvents(v, st, 0, res.events, results, out)
}

// watchStep runs WatchTurn.
func watchStep(ctx context.Context, client acpgatev1.AgentGatewayClient, st step, results []stepResult, out map[string]any) (stepResult, error) {
	turnID, err := stepTurn(st, results)
	if err != nil {
		return stepResult{}, err
	}
	stream, err := client.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: turnID, AfterSeq: st.AfterSeq})
	if err != nil {
		return stepResult{}, fmt.Errorf("starting WatchTurn: %w", err)
	}
	res, err := readStream("WatchTurn", stream, out)
	if err != nil {
		return res, err
	}
	return res, sameEvents(nil, st, st.AfterSeq, res.events, results, out)
}

// getTurnStep runs GetTurn.
func getTurnStep(ctx context.Context, client acpgatev1.AgentGatewayClient, st step, results []stepResult, out map[string]any) error {
	turnID, err := stepTurn(st, results)
	if err != nil {
		return err
	}
	turn, err := client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: turnID})
	if err != nil {
		obj, serr := statusObject("GetTurn", err)
		if serr != nil {
			return serr
		}
		out["status"] = obj
		return nil
	}
	obj, err := protoJSONObject(turn)
	if err != nil {
		return err
	}
	out["turn"] = obj
	if st.SameAs != nil {
		ref, err := stepRef(*st.SameAs, results)
		if err != nil {
			return err
		}
		n := len(ref.events)
		if n == 0 || !proto.Equal(turn.GetTerminal(), ref.events[n-1]) {
			out["violations"] = []any{fmt.Sprintf("the terminal differs from step %d's last event", *st.SameAs)}
		}
	}
	return nil
}

// readStream reads a Prompt or WatchTurn stream to its end, recording its
// events (heartbeats left out) and a non-OK status in out.
func readStream(call string, stream grpc.ServerStreamingClient[acpgatev1.PromptEvent], out map[string]any) (stepResult, error) {
	var res stepResult
	rendered := []any{}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			obj, serr := statusObject(call, err)
			if serr != nil {
				return res, serr
			}
			out["status"] = obj
			break
		}
		if ev.GetHeartbeat() != nil {
			continue
		}
		if s := ev.GetStarted(); s != nil && res.turnID == "" {
			res.turnID = s.GetTurnId()
		}
		obj, err := protoJSONObject(ev)
		if err != nil {
			return res, err
		}
		res.events = append(res.events, ev)
		rendered = append(rendered, obj)
	}
	out["events"] = rendered
	return res, nil
}

// sameEvents adds to the violations v the difference, when there is one,
// between events and the events of step st.SameAs with seq greater than
// afterSeq (compared field for field, seq and time included), and records
// them in out.
func sameEvents(v []any, st step, afterSeq uint64, events []*acpgatev1.PromptEvent, results []stepResult, out map[string]any) error {
	if st.SameAs != nil {
		ref, err := stepRef(*st.SameAs, results)
		if err != nil {
			return err
		}
		var want []*acpgatev1.PromptEvent
		for _, ev := range ref.events {
			if ev.GetSeq() > afterSeq {
				want = append(want, ev)
			}
		}
		equal := len(want) == len(events)
		for i := 0; equal && i < len(events); i++ {
			equal = proto.Equal(want[i], events[i])
		}
		if !equal {
			v = append(v, fmt.Sprintf("the events differ from step %d's after seq %d", *st.SameAs, afterSeq))
		}
	}
	if len(v) > 0 {
		out["violations"] = v
	}
	return nil
}

// stepTurn is the turn a WatchTurn or GetTurn step names: `turn_id`, or the
// turn the stream of step `turn` announced.
func stepTurn(st step, results []stepResult) (string, error) {
	if st.Turn == nil {
		return st.TurnID, nil
	}
	ref, err := stepRef(*st.Turn, results)
	if err != nil {
		return "", err
	}
	if ref.turnID == "" {
		return "", fmt.Errorf("step %d announced no turn", *st.Turn)
	}
	return ref.turnID, nil
}

func stepRef(i int, results []stepResult) (stepResult, error) {
	if i < 0 || i >= len(results) {
		return stepResult{}, fmt.Errorf("no earlier step %d", i)
	}
	return results[i], nil
}
