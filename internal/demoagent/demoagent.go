package demoagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// DefaultChunkDelay is the pause between two updates of a turn when
// [Options.ChunkDelay] is zero.
const DefaultChunkDelay = 30 * time.Millisecond

// Options configures [Run].
type Options struct {
	// ChunkDelay is the pause before each update of a turn after its first,
	// so that streaming is visible. Zero means DefaultChunkDelay; a negative
	// value means no pause. The slow keyword ticks once per second
	// regardless.
	ChunkDelay time.Duration
	// Logger receives the agent's and the ACP connection's diagnostics. Nil
	// discards them. Never direct it at the writer Run speaks ACP on.
	Logger *slog.Logger
}

// Agent identity reported by initialize.
const (
	agentName    = "acpgate-demo"
	agentVersion = "1"
)

// Run serves one ACP connection as the demo agent: it reads the client's
// JSON-RPC messages from in and writes its own to out, until in reaches EOF
// (Run returns nil; a read error other than EOF is returned) or ctx is done
// (Run returns ctx.Err()). Prompt turns
// still running are cancelled and waited for before Run returns. At EOF the
// running turns answer "cancelled", and Run waits (up to 5s) until every
// request it read has been answered, so a client may write its requests and
// close its end straight away.
//
// Run does not close in or out. When it returns because ctx is done, the
// connection's reader may stay blocked in a Read on in until the caller
// closes it (or the process exits).
func Run(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	if in == nil || out == nil {
		return errors.New("demoagent: Run needs both a reader and a writer")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	delay := opts.ChunkDelay
	switch {
	case delay == 0:
		delay = DefaultChunkDelay
	case delay < 0:
		delay = 0
	}

	base, stop := context.WithCancel(ctx)
	defer stop()
	a := &agent{
		delay:    delay,
		log:      logger,
		base:     base,
		sessions: make(map[acp.SessionId]*session),
	}

	// The SDK starts reading as soon as the connection exists; holding its
	// first Read until a.conn is set means no handler can run without it.
	tr := newTracker()
	rd := &inbound{r: in, open: make(chan struct{}), tr: tr, atEnd: func() {
		a.stopTurns()
		tr.waitIdle(base, drainTimeout)
	}}
	conn := acp.NewAgentSideConnection(a, &outbound{w: out, tr: tr}, rd)
	conn.SetLogger(logger)
	a.conn = conn
	close(rd.open)

	var err error
	select {
	case <-conn.Done():
		// rd.endErr was set by the SDK's reader before Done closed.
		if rd.endErr != nil && !errors.Is(rd.endErr, io.EOF) {
			err = fmt.Errorf("demoagent: reading the client's messages: %w", rd.endErr)
		}
		logger.Debug("demo agent: connection closed", "err", err)
	case <-ctx.Done():
		err = ctx.Err()
		logger.Debug("demo agent: stopping", "cause", context.Cause(ctx))
	}
	stop()
	a.shutdown()
	return err
}

// agent implements acp.Agent. One agent serves one connection.
type agent struct {
	conn  *acp.AgentSideConnection // set before the first message is read
	delay time.Duration
	log   *slog.Logger
	base  context.Context // done when Run is returning

	mu         sync.Mutex
	clientCaps acp.ClientCapabilities
	sessions   map[acp.SessionId]*session
	closed     bool           // Run is returning: no new turns
	turns      sync.WaitGroup // running Prompt calls
}

type session struct {
	cwd      string
	toolCall int   // tool calls minted so far in this session
	turn     *turn // the running prompt turn, if any
}

var _ acp.Agent = (*agent)(nil)

// stopTurns refuses new turns and cancels the running ones.
func (a *agent) stopTurns() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for _, s := range a.sessions {
		if s.turn != nil {
			s.turn.cancel()
		}
	}
}

// shutdown stops the turns and waits for them to return.
func (a *agent) shutdown() {
	a.stopTurns()
	a.turns.Wait()
}

func (a *agent) Initialize(_ context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	a.mu.Lock()
	a.clientCaps = p.ClientCapabilities
	a.mu.Unlock()
	a.log.Debug("demo agent: initialize", "clientProtocolVersion", p.ProtocolVersion,
		"fsReadTextFile", p.ClientCapabilities.Fs.ReadTextFile)
	return acp.InitializeResponse{
		ProtocolVersion:   acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{LoadSession: false},
		AgentInfo:         &acp.Implementation{Name: agentName, Version: agentVersion},
		AuthMethods:       []acp.AuthMethod{},
	}, nil
}

func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, acp.NewInvalidParams(map[string]any{
		"error": "the demo agent offers no authentication methods",
	})
}

func (a *agent) NewSession(_ context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	if !filepath.IsAbs(p.Cwd) {
		return acp.NewSessionResponse{}, acp.NewInvalidParams(map[string]any{
			"error": fmt.Sprintf("cwd must be an absolute path, got %q", p.Cwd),
		})
	}
	id := acp.SessionId("demo-" + randomHex(16))
	a.mu.Lock()
	a.sessions[id] = &session{cwd: filepath.Clean(p.Cwd)}
	a.mu.Unlock()
	a.log.Debug("demo agent: new session", "sessionId", id, "cwd", p.Cwd)
	return acp.NewSessionResponse{SessionId: id}, nil
}

// Cancel ends the session's running turn, which then answers "cancelled".
// (The SDK also cancels the Prompt call's context on session/cancel; doing it
// here as well keeps the behaviour independent of that.)
func (a *agent) Cancel(_ context.Context, p acp.CancelNotification) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[p.SessionId]; s != nil && s.turn != nil {
		a.log.Debug("demo agent: cancel", "sessionId", p.SessionId)
		s.turn.cancel()
	}
	return nil
}

func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	unlink := context.AfterFunc(a.base, cancel)
	defer unlink()

	t := &turn{a: a, ctx: ctx, cancel: cancel, sid: p.SessionId}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	s := a.sessions[p.SessionId]
	if s == nil {
		a.mu.Unlock()
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{
			"error": fmt.Sprintf("unknown session %q", p.SessionId),
		})
	}
	if s.turn != nil {
		s.turn.cancel() // one turn per session: a new prompt supersedes the old
	}
	s.turn = t
	t.sess = s
	t.cwd = s.cwd
	a.turns.Add(1)
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		if s.turn == t {
			s.turn = nil
		}
		a.mu.Unlock()
		a.turns.Done()
	}()

	request := promptText(p.Prompt)
	m := classify(request)
	a.log.Debug("demo agent: prompt", "sessionId", p.SessionId, "mode", m.name)

	stop, err := t.play(m, request)
	if err != nil && ctx.Err() != nil {
		// Whatever was interrupted, a cancelled turn answers "cancelled".
		stop, err = acp.StopReasonCancelled, nil
	}
	if err != nil {
		a.log.Debug("demo agent: prompt failed", "sessionId", p.SessionId, "err", err)
		return acp.PromptResponse{}, err
	}
	a.log.Debug("demo agent: prompt done", "sessionId", p.SessionId, "stopReason", stop)
	return acp.PromptResponse{StopReason: stop}, nil
}

func (a *agent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionClose)
}

func (a *agent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *agent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

func (a *agent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}

// canReadFiles reports whether the client advertised fs/read_text_file.
func (a *agent) canReadFiles() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.clientCaps.Fs.ReadTextFile
}

// nextToolCallID mints the session's next tool call id.
func (a *agent) nextToolCallID(s *session) acp.ToolCallId {
	a.mu.Lock()
	defer a.mu.Unlock()
	s.toolCall++
	return acp.ToolCallId(fmt.Sprintf("call-%d", s.toolCall))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// newMessageID returns a random (version 4) UUID: ACP requires messageIds to
// be UUIDs.
func newMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
