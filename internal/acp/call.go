package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
	"github.com/acpgate/acpgate/outcome"
)

// Error is a failure the agent caused (or the gateway's own typed
// rejection), carrying its classification.
type Error struct {
	Proto *acpgatev1.HarnessError
	// Info is what the agent said at initialize, when the failure came
	// later in the handshake (for example session/new asking for
	// authentication); nil otherwise.
	Info *AgentInfo
}

func (e *Error) Error() string { return e.Proto.GetMessage() }

// Errors that mean no turn ran, for reasons of the caller's making.
var (
	ErrBusy   = errors.New("the session is already running a turn (ACP allows one at a time)")
	ErrClosed = errors.New("the session is closed")
)

// errHandshakeTimeout is the cause of a handshake context that ran out of
// Config.HandshakeTimeout, telling it apart from the caller's own deadline.
var errHandshakeTimeout = errors.New("handshake timeout")

// call makes one request of the handshake or of a session's settings and
// decodes its result. params builds
// the request given its _meta, which carries the request's own span.
func (s *Session) call(ctx context.Context, method string, params func(meta map[string]any) any, result any) error {
	ctx, span := startCall(ctx, s.tracer, s.cfg.Agent, method)
	reply, err := s.conn.Call(ctx, method, params(requestMeta(ctx, s.cfg.Propagator)))
	endCall(span, reply, err)
	if err != nil {
		if errors.Is(context.Cause(ctx), errHandshakeTimeout) {
			f := outcome.Failure{StderrTail: s.proc.StderrTail()}
			return &Error{Proto: s.interp.HandshakeTimedOut(method, s.cfg.HandshakeTimeout, f)}
		}
		return fmt.Errorf("%s: %w", method, err)
	}
	if reply.End != nil {
		return &Error{Proto: s.endError(method, reply.End, outcome.Text{})}
	}
	if reply.Violation != "" {
		return &Error{Proto: s.interp.ProtocolViolation(reply.Violation, outcome.Text{})}
	}
	r := reply.Response
	if len(r.Error) > 0 && string(r.Error) != "null" || len(r.Result) == 0 {
		return &Error{Proto: s.interp.Interpret(outcome.Turn{Method: method, Ending: outcome.Answered, Response: r}).Error}
	}
	if err := json.Unmarshal(r.Result, result); err != nil {
		return &Error{Proto: s.interp.MalformedResult(method, err.Error(), r.Result)}
	}
	return nil
}

// endError classifies a connection that ended with a request outstanding.
func (s *Session) endError(method string, end *jsonrpc.End, text outcome.Text) *acpgatev1.HarnessError {
	if end.Kind == jsonrpc.EndViolation {
		return s.interp.ProtocolViolation(end.Detail, text)
	}
	turn := outcome.Turn{Method: method, Ending: outcome.StreamEnded, Text: text, Failure: processFailure(s.proc, end.Detail)}
	if end.Kind != jsonrpc.EndStream {
		turn.Ending = outcome.TransportFailed
	}
	return s.interp.Interpret(turn).Error
}

// processFailure gathers what is known about a broken channel to proc:
// the agent's exit status (waiting briefly, since an agent that closed its
// stdout is usually exiting) and the tail of its stderr.
func processFailure(proc *agentproc.Process, detail string) outcome.Failure {
	f := outcome.Failure{Detail: detail}
	if proc.WaitExit(500 * time.Millisecond) {
		f.ExitCode, f.Signal, _ = proc.ExitStatus()
		// Let stderr drain what the agent wrote before it exited.
		select {
		case <-proc.StderrDone():
		case <-time.After(200 * time.Millisecond):
		}
	}
	f.StderrTail = proc.StderrTail()
	return f
}
