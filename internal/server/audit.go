package server

import (
	"context"
	"encoding/binary"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/auth"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/outcome"
)

// auditor writes the audit log: one INFO record, msg "audit", per RPC,
// naming the principal, the RPC, the agent, session and turn it concerned,
// its status code, the terminal class of a turn it streamed, and its
// duration. Never the prompt's or the answer's text, unless includeText
// (then a Prompt's text is in its record).
//
// Its interceptors come first in the chain, so that calls refused by
// authentication or validation are audited too; the principal is learnt
// from an inner interceptor (note), after authentication, through a holder
// the outer one put in the context.
type auditor struct {
	log         *slog.Logger
	includeText bool
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

func (a *auditor) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
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

func (a *auditor) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	rec := &auditRecord{}
	ctx := ss.Context()
	start := time.Now()
	err := handler(srv, &auditedStream{ServerStream: ss, ctx: context.WithValue(ctx, auditKey{}, rec), rec: rec})
	a.write(ctx, info.FullMethod, rec, err, start)
	return err
}

// note records the authenticated principal in the call's audit record; it
// runs after authentication.
func (a *auditor) note(ctx context.Context) {
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

func (a *auditor) noteUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	a.note(ctx)
	return handler(ctx, req)
}

func (a *auditor) noteStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
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
func (a *auditor) write(ctx context.Context, rpc string, rec *auditRecord, err error, start time.Time) {
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
	case encodedEvent:
		return decodeForAudit(store.Event(m).Pieces())
	}
	return nil
}

// decodeForAudit decodes an encoded event, given in pieces, except that a
// completed turn's outcome decodes empty: the audit needs to know only
// that it is there, and the outcome repeats the turn's answer, twice for a
// one-message turn. Decoding it whole copied both strings out of the
// encoding: 312 MiB more at the end of a 156 MiB answer, live beside the
// encoding being sent. nil when the bytes do not decode.
func decodeForAudit(pieces [][]byte) *acpgatev1.PromptEvent {
	r := pieceReader{pieces: pieces}
	var rest []byte
	completed := false
	for !r.empty() {
		// A field's tag and, for a length-delimited one, its length
		// come first, each at most a varint's size.
		head := r.peek(2 * binary.MaxVarintLen64)
		num, typ, n := protowire.ConsumeTag(head)
		if n < 0 {
			return nil
		}
		m := protowire.ConsumeFieldValue(num, typ, head[n:])
		if typ == protowire.BytesType {
			size, sizeLen := protowire.ConsumeVarint(head[n:])
			if sizeLen < 0 || uint64(n+sizeLen)+size > uint64(r.len()) {
				return nil
			}
			m = sizeLen + int(size)
		}
		if m < 0 {
			return nil
		}
		if num == outcomeField && typ == protowire.BytesType {
			completed = true
			r.next(n+m, nil)
		} else {
			r.next(n+m, func(b []byte) { rest = append(rest, b...) })
		}
	}
	e := &acpgatev1.PromptEvent{}
	if proto.Unmarshal(rest, e) != nil {
		return nil
	}
	if completed {
		e.Event = &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{}}
	}
	return e
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

// pieceReader reads an encoding given in pieces from the front.
type pieceReader struct {
	pieces [][]byte
}

func (r *pieceReader) empty() bool { return r.len() == 0 }

func (r *pieceReader) len() int {
	n := 0
	for _, p := range r.pieces {
		n += len(p)
	}
	return n
}

// peek returns up to n bytes from the front: the first piece's own bytes
// when it holds them, else a copy across pieces.
func (r *pieceReader) peek(n int) []byte {
	if len(r.pieces) == 0 || len(r.pieces[0]) >= n {
		if len(r.pieces) == 0 {
			return nil
		}
		return r.pieces[0][:n]
	}
	var out []byte
	for _, p := range r.pieces {
		out = append(out, p[:min(len(p), n-len(out))]...)
		if len(out) == n {
			break
		}
	}
	return out
}

// next consumes n bytes from the front, handing them to keep, piece by
// piece, unless keep is nil. The caller has checked that there are n.
func (r *pieceReader) next(n int, keep func([]byte)) {
	for n > 0 {
		k := min(n, len(r.pieces[0]))
		if keep != nil {
			keep(r.pieces[0][:k])
		}
		r.pieces[0] = r.pieces[0][k:]
		if len(r.pieces[0]) == 0 {
			r.pieces = r.pieces[1:]
		}
		n -= k
	}
}
