package clients

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpgate/acpgate/bench/internal/job"
)

// The peer is what a team embedding the ACP SDK gets: acp-go-sdk's
// client-side connection driving the agent directly, its SessionUpdate
// handler counting chunks.

type peerClient struct {
	mu     sync.Mutex
	s      *Stream
	closed bool
}

func (c *peerClient) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		c.mu.Lock()
		if !c.closed {
			c.s.chunk(m.Content.Text.Text)
		}
		c.mu.Unlock()
	}
	return nil
}

var errNotOffered = errors.New("not offered by the benchmark client")

func (c *peerClient) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, errNotOffered
}

func (c *peerClient) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, errNotOffered
}

func (c *peerClient) RequestPermission(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	return acp.RequestPermissionResponse{}, errNotOffered
}

func (c *peerClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNotOffered
}

func (c *peerClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNotOffered
}

func (c *peerClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNotOffered
}

func (c *peerClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNotOffered
}

func (c *peerClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNotOffered
}

// RunPeer runs the job with acp-go-sdk's client-side connection, each turn
// on an agent of its own.
func RunPeer(ctx context.Context, j job.Job) job.Result {
	return runStreams(ctx, j, peerTurn)
}

func peerTurn(ctx context.Context, j job.Job, s *Stream) {
	c := &peerClient{s: s}
	s.Start = time.Now()
	a, err := startAgent(nil, j.Agent)
	if err != nil {
		s.err = err
		return
	}
	conn := acp.NewClientSideConnection(c, a.stdin, a.stdout)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	defer func() {
		a.stop()
		select {
		case <-conn.Done():
		case <-time.After(5 * time.Second):
		}
		c.mu.Lock() // no handler touches s after this
		c.closed = true
		c.mu.Unlock()
	}()

	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		s.err = fmt.Errorf("initialize: %w", err)
		return
	}
	s.startup = time.Now()
	sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: a.dir, McpServers: []acp.McpServer{}})
	if err != nil {
		s.err = fmt.Errorf("session/new: %w", err)
		return
	}
	s.prompt()
	resp, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(j.Script())}})
	c.mu.Lock()
	defer c.mu.Unlock()
	s.ended()
	if err != nil {
		s.err = fmt.Errorf("session/prompt: %w", err)
		select {
		case <-conn.Done():
			s.broke = true // the SDK closed the connection under us
		default:
		}
		return
	}
	if resp.StopReason != acp.StopReasonEndTurn {
		s.err = fmt.Errorf("session/prompt: stop reason %q", resp.StopReason)
	}
}
