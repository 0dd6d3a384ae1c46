package access

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/auth"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/turn/wire"
	"github.com/acpgate/acpgate/outcome"
)

// Auditor writes the audit log: one INFO record, msg "audit", per RPC,
// naming the principal, the RPC, the agent, session and turn it concerned,
// its status code, the terminal class of a turn it streamed, and its
// duration. Never the prompt's or the answer's text, unless includeText
// (then a Prompt's text is in its record).
//
// Its interceptors come first in the chain, so that calls refused by
// authentication or validation are audited too; the principal is learnt
// from an inner interceptor (note), after authentication, through a holder
// the outer one put in the context.
type Auditor struct {
	log         *slog.Logger
	includeText bool
}

// NewAuditor is an Auditor writing to log; includeText is audit.include_text.
func NewAuditor(log *slog.Logger, includeText bool) *Auditor {
	return &Auditor{log: log, includeText: includeText}
}

// auditKey is the context key of a call's *auditRecord.
type auditKey struct{}

// auditRecord is what is learnt about a call while it runs.
type auditRecord struct {
	mu        sync.Mutex
	principal string
	req       proto.Message // the (first) request message
	first     any           // the first message sent, undecoded
	last      any           // the last event sent (not a heartbeat), undecoded
}

func (a *Auditor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	rec := &auditRecord{}
	if m, ok := req.(proto.Message); ok {
		rec.req = m
	}
	start := time.Now()
	resp, err := handler(context.WithValue(ctx, auditKey{}, rec), req)
	if s, ok := resp.(*acpgatev1.Session); ok {
		// CreateSession names its session only in the answer.
		rec.first = s
	}
	a.write(ctx, info.FullMethod, rec, err, start)
	return resp, err
}

func (a *Auditor) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	rec := &auditRecord{}
	ctx := ss.Context()
	start := time.Now()
	err := handler(srv, &auditedStream{ServerStream: ss, ctx: context.WithValue(ctx, auditKey{}, rec), rec: rec})
	a.write(ctx, info.FullMethod, rec, err, start)
	return err
}

// note records the authenticated principal in the call's audit record; it
// runs after authentication.
func (a *Auditor) note(ctx context.Context) {
	rec, ok := ctx.Value(auditKey{}).(*auditRecord)
	if !ok {
		return
	}
	if p, ok := auth.FromContext(ctx); ok {
		rec.mu.Lock()
		rec.principal = p.Name
		rec.mu.Unlock()
	}
}

func (a *Auditor) NoteUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	a.note(ctx)
	return handler(ctx, req)
}

func (a *Auditor) NoteStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	a.note(ss.Context())
	return handler(srv, ss)
}

// auditedStream keeps a stream's first request and its first and last
// sent events for the audit record, without decoding anything.
type auditedStream struct {
	grpc.ServerStream
	ctx context.Context
	rec *auditRecord
}

func (s *auditedStream) Context() context.Context { return s.ctx }

func (s *auditedStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil {
		s.rec.mu.Lock()
		if pm, ok := m.(proto.Message); ok && s.rec.req == nil {
			s.rec.req = pm
		}
		s.rec.mu.Unlock()
	}
	return err
}

func (s *auditedStream) SendMsg(m any) error {
	if e, ok := m.(*acpgatev1.PromptEvent); ok && e.GetHeartbeat() != nil {
		return s.ServerStream.SendMsg(m)
	}
	s.rec.mu.Lock()
	if s.rec.first == nil {
		s.rec.first = m
	}
	s.rec.last = m
	s.rec.mu.Unlock()
	return s.ServerStream.SendMsg(m)
}

// write logs rec's call, which ended with err after starting at start.
func (a *Auditor) write(ctx context.Context, rpc string, rec *auditRecord, err error, start time.Time) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var agent, session, turn string
	if rec.req != nil {
		agent, session, turn = stringField(rec.req, "agent"), stringField(rec.req, "session_id"), stringField(rec.req, "turn_id")
	}
	if s, ok := rec.first.(*acpgatev1.Session); ok {
		session, agent = s.GetId(), s.GetAgent()
	}
	attrs := []any{"principal", rec.principal, "rpc", rpc}
	var class string
	if started := asEvent(rec.first).GetStarted(); started != nil {
		turn, session, agent = started.GetTurnId(), started.GetSessionId(), started.GetAgent()
	}
	if rec.last != nil {
		switch e := asEvent(rec.last); {
		case e.GetOutcome() != nil:
			class = "outcome"
		case e.GetError() != nil:
			class = outcome.Class(e.GetError())
		}
	}
	attrs = append(attrs, "agent", agent, "session", session, "turn", turn, "code", status.Code(err).String())
	if class != "" {
		attrs = append(attrs, "class", class)
	}
	attrs = append(attrs, "duration", time.Since(start))
	if a.includeText {
		if p, ok := rec.req.(*acpgatev1.PromptRequest); ok {
			attrs = append(attrs, "text", promptText(p))
		}
	}
	a.log.Log(ctx, slog.LevelInfo, "audit", attrs...)
}

// asEvent is m as a PromptEvent, decoding a journaled event's bytes; nil
// (whose getters answer zero values) when it is neither.
func asEvent(m any) *acpgatev1.PromptEvent {
	switch m := m.(type) {
	case *acpgatev1.PromptEvent:
		return m
	case wire.Encoded:
		return wire.DecodeForAudit(store.Event(m).Pieces())
	}
	return nil
}

// stringField is m's string field name, or "" when it has none.
func stringField(m proto.Message, name protoreflect.Name) string {
	r := m.ProtoReflect()
	f := r.Descriptor().Fields().ByName(name)
	if f == nil || f.Kind() != protoreflect.StringKind || f.IsList() {
		return ""
	}
	return r.Get(f).String()
}

// promptText is a Prompt's text: its text field and its text blocks.
func promptText(p *acpgatev1.PromptRequest) string {
	parts := []string{}
	if p.GetText() != "" {
		parts = append(parts, p.GetText())
	}
	for _, b := range p.GetPrompt() {
		if t := b.GetText(); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}
