package clients

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/acpgate/acpgate/bench/internal/job"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
)

// The relay is the least a gRPC gateway can do: a server of the
// gateway's Prompt that spawns the naive agent in a process group (no
// namespaces), speaks ACP to it, and sends the chunks it reads as gRPC
// messages, recording nothing. One goroutine reads the agent and another
// sends, as in acpgate, and like acpgate by default it coalesces chunks
// that arrive while the stream is busy (relayQueue); one message a chunk
// when the request asks for CHUNK_DELIVERY_EACH. With one goroutine doing
// both, a fast agent's chunks waited behind every send, and the relay
// fell behind the gateway it is meant to bound. It starts
// agents as acpgate does by default (config.DefaultNice levels below its
// own priority, config.DefaultMaxStartingAgents at once; mirrored here,
// since importing acpgate's configuration would make every client process
// of this executable initialize its dependencies), since without
// that many turns at once measure the agents' start-ups rather than the
// relay. The gateway client calls it as it calls acpgate, so its figures
// against the naive floor's are what one gRPC message per chunk costs on
// this machine (the server's write, the client's read, two more
// processes' wake-ups), and acpgate's against the relay's are what acpgate
// adds to that: the journal, the records, the containment and the
// hand-offs between them.

// RelayListening starts the line on which `acpbench relay` says, on
// stderr, where it listens.
const RelayListening = "acpbench relay listening on "

// RelayOptions are how the relay starts agents: Nice levels below its own
// priority (0: at its own), at most Starts at once (0: unbounded).
type RelayOptions struct {
	Nice, Starts int
}

// DefaultRelayOptions are acpgate's defaults: config.DefaultNice and
// config.DefaultMaxStartingAgents.
func DefaultRelayOptions() RelayOptions {
	return RelayOptions{Nice: 5, Starts: max(4, 2*runtime.GOMAXPROCS(0))}
}

// ServeRelay serves the relay on lis until ctx ends or it fails.
func ServeRelay(ctx context.Context, lis net.Listener, o RelayOptions) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r := &relay{self: self}
	if o.Starts > 0 {
		r.starts = make(chan struct{}, o.Starts)
	}
	if o.Nice > 0 {
		if r.starter, err = agentproc.NewStarter(o.Nice); err != nil {
			return err
		}
	}
	if r.starter != nil {
		// After Stop, which waits for the handlers and with them every
		// agent they started: see agentproc.Starter.
		defer r.starter.Close()
	}
	s := grpc.NewServer(grpc.WaitForHandlers(true))
	acpgatev1.RegisterAgentGatewayServer(s, r)
	stop := context.AfterFunc(ctx, s.Stop)
	defer stop()
	if err := s.Serve(lis); err != nil && ctx.Err() == nil {
		return err
	}
	s.Stop()
	return nil
}

type relay struct {
	acpgatev1.UnimplementedAgentGatewayServer
	self    string
	starter *agentproc.Starter // nil: agents start at the relay's priority
	starts  chan struct{}      // a slot per agent starting; nil: unbounded
}

// startSlot waits, until ctx ends, for a slot to start an agent in, and
// returns its release, which frees it once however often it is called.
func (r *relay) startSlot(ctx context.Context) (release func(), err error) {
	if r.starts == nil {
		return func() {}, nil
	}
	select {
	case r.starts <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() { once.Do(func() { <-r.starts }) }, nil
}

// ListAgents answers the client's dial check (DialGateway).
func (r *relay) ListAgents(context.Context, *acpgatev1.ListAgentsRequest) (*acpgatev1.ListAgentsResponse, error) {
	return &acpgatev1.ListAgentsResponse{}, nil
}

// Prompt runs one turn on a fresh naive agent.
func (r *relay) Prompt(req *acpgatev1.PromptRequest, st grpc.ServerStreamingServer[acpgatev1.PromptEvent]) error {
	if req.GetAgent() != job.NaiveAgent {
		return fmt.Errorf("the relay runs only the %q agent", job.NaiveAgent)
	}
	ctx := st.Context()
	release, err := r.startSlot(ctx)
	if err != nil {
		return err
	}
	defer release()
	a, err := startAgent(&containment{kind: agentproc.ContainProcessGroup, starter: r.starter}, r.self, "agent")
	if err != nil {
		return err
	}
	defer a.stop()
	// A client that leaves ends the turn: killing the agent ends the read
	// that waits for it.
	stop := context.AfterFunc(ctx, a.kill)
	defer stop()
	q := newRelayQueue(req.GetChunkDelivery() != acpgatev1.ChunkDelivery_CHUNK_DELIVERY_EACH)
	var reader sync.WaitGroup
	defer reader.Wait()
	reader.Go(func() { q.close(converse(a, req, q, release)) })
	var seq uint64
	for {
		events, more, err := q.take()
		if !more {
			return err
		}
		for _, ev := range events {
			seq++
			ev.Seq, ev.Time = seq, timestamppb.Now()
			if err := st.Send(ev); err != nil {
				a.kill() // ends the reader, which the return waits for
				return err
			}
		}
	}
}

// converse runs the turn's ACP conversation with the agent, queueing its
// events on q; release frees the turn's start slot once the agent is
// initialized.
func converse(a *agentProc, req *acpgatev1.PromptRequest, q *relayQueue, release func()) error {
	in := bufio.NewReaderSize(a.stdout, 1<<20)
	send := func(id int64, method string, params any) error { return writeRequest(a.stdin, id, method, params) }
	omit := req.GetOmitOutcomeText()
	var text strings.Builder
	var textBytes uint64
	await := func(id int64) (json.RawMessage, error) {
		for {
			line, err := in.ReadSlice('\n')
			if err != nil {
				return nil, fmt.Errorf("reading the agent's stdout: %w", err)
			}
			var m floorMessage
			var p minNotification
			m.Params = &p
			if err := json.Unmarshal(line, &m); err != nil {
				return nil, err
			}
			switch u := p.Update; {
			case m.Method == "session/update" && u.SessionUpdate == "agent_message_chunk" && u.Content.Type == "text":
				textBytes += uint64(len(u.Content.Text))
				if !omit {
					text.WriteString(u.Content.Text)
				}
				q.chunk(u.Content.Text)
			case m.Method == "" && m.ID != nil && *m.ID == id:
				if m.Error != nil {
					return nil, errors.New(m.Error.Message)
				}
				return m.Result, nil
			}
		}
	}
	if err := send(1, "initialize", initializeParams()); err != nil {
		return err
	}
	if _, err := await(1); err != nil {
		return err
	}
	release()
	if err := send(2, "session/new", newSessionParams(a.dir)); err != nil {
		return err
	}
	res, err := await(2)
	if err != nil {
		return err
	}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(res, &sess)
	q.push(&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Started{Started: &acpgatev1.TurnStarted{TurnId: "relay"}}})
	if err := send(3, "session/prompt", promptParams(sess.SessionID, req.GetText())); err != nil {
		return err
	}
	if _, err := await(3); err != nil {
		return err
	}
	out := &acpgatev1.PromptOutcome{StopKind: acpgatev1.StopKind_STOP_KIND_END_TURN, StopReason: "end_turn", SessionId: sess.SessionID}
	if omit {
		out.TextOmitted, out.TextBytes = true, textBytes
	} else {
		out.Text = text.String()
	}
	q.push(&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: out}})
	return nil
}
