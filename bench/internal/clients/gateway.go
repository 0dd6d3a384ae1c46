package clients

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"
	"unsafe"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/proc"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The gateway client is a Go gRPC client calling one-shot Prompt on
// `acpgate serve` over loopback TCP. Every event's seq, every chunk's index
// and the outcome's text (length and CRC of the chunks' concatenation) are
// checked.

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// DialGateway connects to the gateway at addr, with a receive limit that
// takes a whole turn's outcome, and waits until the connection is ready.
func DialGateway(ctx context.Context, addr string) (*grpc.ClientConn, acpgatev1.AgentGatewayClient, error) {
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// A completed turn's outcome carries the whole text (twice: text
		// and final_message), far over gRPC's default 4 MiB.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30)))
	if err != nil {
		return nil, nil, err
	}
	client := acpgatev1.NewAgentGatewayClient(conn)
	// Connect now, so that no turn's time includes dialing.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := client.ListAgents(cctx, &acpgatev1.ListAgentsRequest{}, grpc.WaitForReady(true)); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("connecting to the gateway at %s: %w", addr, err)
	}
	return conn, client, nil
}

// RunGateway runs the job's turns as one-shot Prompt calls (or on the
// job's session) on one connection to the gateway at j.Addr.
func RunGateway(ctx context.Context, j job.Job) job.Result {
	conn, client, err := DialGateway(ctx, j.Addr)
	if err != nil {
		return job.Result{Client: j.Client, Err: err.Error()}
	}
	defer conn.Close()
	return runStreams(ctx, j, func(ctx context.Context, j job.Job, s *Stream) {
		GatewayTurn(ctx, client, j, s, j.ReadRate, nil)
	})
}

// GatewayTurn runs one one-shot Prompt. With readRate > 0 the client reads
// at most readRate chunks/s; progress, when set, is told the count of chunks
// read after each one.
func GatewayTurn(ctx context.Context, client acpgatev1.AgentGatewayClient, j job.Job, s *Stream, readRate int, progress func(int64)) {
	waitStart(j)
	s.Start = time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	asStream := j.Client == job.GatewayStream || j.Client == job.GatewayStreamMemory
	agent := job.FloodAgent
	if j.Naive {
		agent = job.NaiveAgent
	}
	req := &acpgatev1.PromptRequest{Agent: agent, Text: j.Script(), OmitOutcomeText: asStream}
	if asStream {
		// For the baseline (a808356), which coalesces only when asked; the
		// working tree's default.
		//lint:ignore SA1019 the baseline knows only the deprecated field
		req.CoalesceChunks = true
	}
	if j.Client == job.GatewayEach {
		req.ChunkDelivery = acpgatev1.ChunkDelivery_CHUNK_DELIVERY_EACH
	}
	if j.SessionID != "" {
		req.Agent, req.SessionId = "", j.SessionID
	}
	st, err := client.Prompt(ctx, req)
	if err != nil {
		s.err = err
		return
	}
	consume(st, j, s, asStream, false, readRate, progress)
}

// consume reads a turn's events to the end, checking and timing them: a
// Prompt stream's, or with watching a WatchTurn stream's from after_seq 0,
// whose turn starts before the call (the caller marks s.prompt). asStream
// says the turn was asked for omit_outcome_text and coalesce_chunks.
func consume(st interface {
	Recv() (*acpgatev1.PromptEvent, error)
}, j job.Job, s *Stream, asStream, watching bool, readRate int, progress func(int64)) {
	var seq uint64
	var crc uint32
	terminal := false
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.err = fmt.Errorf("receiving: %w", err)
			return
		}
		if ev.GetHeartbeat() != nil {
			// Sent when the stream has been quiet for the heartbeat
			// interval (the turn's ending waits for the store); not
			// journaled, so it has no seq.
			continue
		}
		seq++
		if ev.GetSeq() != seq && s.err == nil {
			s.err = fmt.Errorf("event seq %d where %d was due", ev.GetSeq(), seq)
		}
		switch e := ev.GetEvent().(type) {
		case *acpgatev1.PromptEvent_Started:
			s.turnID = e.Started.GetTurnId()
			if !watching {
				s.prompt()
				s.startup = s.prompted
			}
		case *acpgatev1.PromptEvent_AgentMessageChunk:
			s.events++
			text := e.AgentMessageChunk.GetText()
			crc = crc32.Update(crc, crcTable, bytesOf(text))
			// A coalesced event (the gateway's default since
			// chunk_delivery) carries several of the agent's chunks, each
			// j.Size bytes: check and time each one.
			pieces := 1
			if j.Size > 0 && len(text) > j.Size && len(text)%j.Size == 0 {
				pieces = len(text) / j.Size
			}
			piece := len(text) / pieces
			for p := range pieces {
				s.chunk(text[p*piece : (p+1)*piece])
				if s.latency {
					s.relayed = append(s.relayed, ev.GetTime().AsTime().UnixNano())
				}
			}
			if progress != nil {
				progress(s.v.chunks)
			}
			if readRate > 0 {
				due := s.first.Add(time.Duration(s.v.chunks) * time.Second / time.Duration(readRate))
				time.Sleep(time.Until(due))
			}
		case *acpgatev1.PromptEvent_Outcome:
			s.ended()
			terminal = true
			if asStream {
				// The client has the text already: the outcome says how
				// long it was, which the chunks must add up to.
				if !e.Outcome.GetTextOmitted() || e.Outcome.GetText() != "" || int64(e.Outcome.GetTextBytes()) != s.v.bytes {
					s.err = fmt.Errorf("asked to omit the text, the outcome has text_omitted %v, %d bytes of text and text_bytes %d (the chunks: %d bytes)",
						e.Outcome.GetTextOmitted(), len(e.Outcome.GetText()), e.Outcome.GetTextBytes(), s.v.bytes)
				}
				break
			}
			text := e.Outcome.GetText()
			if int64(len(text)) != s.v.bytes || crc32.Checksum(bytesOf(text), crcTable) != crc {
				s.err = fmt.Errorf("the outcome's text (%d bytes) is not the chunks' concatenation (%d bytes)", len(text), s.v.bytes)
			}
		case *acpgatev1.PromptEvent_Error:
			s.ended()
			terminal = true
			s.err = fmt.Errorf("the turn ended with a HarnessError: %s", e.Error.GetMessage())
		}
	}
	if !terminal && s.err == nil {
		s.err = errors.New("the stream ended without a terminal event")
	}
}

// RunWatch replays a finished turn (j.TurnID, one of a gateway-stream
// client's) with WatchTurn from after_seq 0, checking it as the turn's own
// stream was checked. Its turn time runs from the call to the terminal.
func RunWatch(ctx context.Context, j job.Job) job.Result {
	conn, client, err := DialGateway(ctx, j.Addr)
	if err != nil {
		return job.Result{Client: j.Client, Err: err.Error()}
	}
	defer conn.Close()
	s := NewStream(j)
	s.Start = time.Now()
	s.prompt()
	st, err := client.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: j.TurnID})
	if err != nil {
		s.err = err
	} else {
		consume(st, j, s, true, true, 0, nil)
	}
	if s.err == nil && s.turnID != j.TurnID {
		s.err = fmt.Errorf("watching turn %q, the started event names %q", j.TurnID, s.turnID)
	}
	return Merge(j, j.Client, time.Since(s.Start), proc.CPUMark{}, []*Stream{s})
}

// bytesOf views s as bytes without copying (the CRC only reads them).
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
