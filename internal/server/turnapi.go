package server

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/access"
	"github.com/acpgate/acpgate/internal/rpcerr"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/turn"
)

// turnReads answers the RPCs that read turns (WatchTurn, GetTurn,
// ListTurns): from the store, and from memory for the turns running here.
// They need nothing of sessions or agents, so they are a type of their
// own, which Gateway embeds to serve them.
type turnReads struct {
	store    store.Store
	authz    access.Authz
	turns    *turn.Table
	reader   *turn.Reader
	watchers *turn.WatchLimits // WatchTurn streams open
}

// WatchTurn streams a turn's events after after_seq.
func (g *turnReads) WatchTurn(req *acpgatev1.WatchTurnRequest, stream acpgatev1.AgentGateway_WatchTurnServer) error {
	if req.GetTurnId() == "" {
		return status.Error(codes.InvalidArgument, "turn_id is required")
	}
	if err := g.mayWatch(stream.Context(), req.GetTurnId()); err != nil {
		return err
	}
	leave, err := g.watchers.Enter(req.GetTurnId(), access.Caller(stream.Context()).Name)
	if err != nil {
		return err
	}
	defer leave()
	err = g.reader.Follow(stream.Context(), req.GetTurnId(), req.GetAfterSeq(), stream)
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	return nil
}

// GetTurn describes a turn.
func (g *turnReads) GetTurn(ctx context.Context, req *acpgatev1.GetTurnRequest) (*acpgatev1.Turn, error) {
	if req.GetTurnId() == "" {
		return nil, status.Error(codes.InvalidArgument, "turn_id is required")
	}
	rec, err := g.turn(ctx, req.GetTurnId())
	if err != nil {
		return nil, err
	}
	return g.turnProto(rec)
}

// turn finds a turn's record that the caller may see; NOT_FOUND otherwise,
// worded as for an id that does not exist.
func (g *turnReads) turn(ctx context.Context, id string) (store.Turn, error) {
	rec, err := g.store.Get(ctx, id)
	if err := g.seen(ctx, id, rec.Owner, err); err != nil {
		return store.Turn{}, err
	}
	return rec, nil
}

// mayWatch refuses a turn the caller may not see, as turn does, but from
// its owner alone (store.Store.Owner): the record Get reads carries a
// completed turn's terminal, the whole answer.
func (g *turnReads) mayWatch(ctx context.Context, id string) error {
	owner, err := g.store.Owner(ctx, id)
	return g.seen(ctx, id, owner, err)
}

// seen is the answer to a caller looking up turn id, whose owner the store
// gave with err.
func (g *turnReads) seen(ctx context.Context, id, owner string, err error) error {
	if errors.Is(err, store.ErrNotFound) || (err == nil && !g.authz.Sees(ctx, owner)) {
		return status.Errorf(codes.NotFound, "no turn %q (unknown, or past its retention)", id)
	}
	if err != nil {
		// A terminal kept in the journal files is read with the record.
		return rpcerr.JournalRead(id, err)
	}
	return nil
}

// ListTurns lists turns, newest first.
func (g *turnReads) ListTurns(ctx context.Context, req *acpgatev1.ListTurnsRequest) (*acpgatev1.ListTurnsResponse, error) {
	size := int(req.GetPageSize())
	switch {
	case size < 0:
		return nil, status.Error(codes.InvalidArgument, "page_size must not be negative")
	case size == 0:
		size = 50
	case size > 500:
		size = 500
	}
	from, err := decodePageToken(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	recs, err := g.store.List(ctx, store.Filter{SessionID: req.GetSessionId(), Agent: req.GetAgent(), Owner: g.authz.OwnerFilter(ctx)}, size+1, from)
	if err != nil {
		return nil, status.Errorf(rpcerr.StoreCode(err), "listing turns: %v", err)
	}
	resp := &acpgatev1.ListTurnsResponse{}
	more := len(recs) > size
	if more {
		recs = recs[:size]
	}
	bytes := 0
	for i, rec := range recs {
		t, err := g.turnProto(rec)
		if err != nil {
			return nil, err
		}
		// A turn's terminal carries its whole answer: a page stops short
		// of maxListBytes, so that a client with gRPC's default receive
		// limit can read it, and says where the next one starts.
		if bytes += proto.Size(t); i > 0 && bytes > maxListBytes {
			recs, more = recs[:i], true
			break
		}
		resp.Turns = append(resp.Turns, t)
	}
	if more {
		resp.NextPageToken = encodePageToken(store.PositionOf(recs[len(recs)-1]))
	}
	return resp, nil
}

// maxListBytes bounds one ListTurns page, under the 4 MiB that gRPC
// clients accept by default (a single larger turn still fills a page).
const maxListBytes = 3 << 20

func encodePageToken(p store.Position) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(p.StartedAt.UnixNano(), 10) + ":" + p.ID))
}

func decodePageToken(token string) (*store.Position, error) {
	if token == "" {
		return nil, nil
	}
	bad := status.Error(codes.InvalidArgument, "page_token is not one ListTurns returned")
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, bad
	}
	nanos, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(nanos, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, bad
	}
	return &store.Position{StartedAt: time.Unix(0, n), ID: id}, nil
}

// turnProto is a turn's record as the API shows it.
func (g *turnReads) turnProto(rec store.Turn) (*acpgatev1.Turn, error) {
	rec = g.turns.Recorded(rec)
	t := &acpgatev1.Turn{
		TurnId:    rec.ID,
		RequestId: requestIDOf(rec.RequestID),
		Attempt:   rec.Attempt,
		Agent:     rec.Agent,
		SessionId: rec.SessionID,
		State:     acpgatev1.TurnState_TURN_STATE_RUNNING,
		StartedAt: timestamppb.New(rec.StartedAt),
		LastSeq:   rec.LastSeq,
		Replica:   rec.Replica,
	}
	if live := g.turns.Get(rec.ID); live != nil {
		t.LastSeq = max(t.LastSeq, live.Journal.LastVisible())
	}
	if !rec.Running() {
		t.State = acpgatev1.TurnState_TURN_STATE_ENDED
		t.EndedAt = timestamppb.New(rec.EndedAt)
		t.Terminal = &acpgatev1.PromptEvent{}
		if err := proto.Unmarshal(rec.Terminal, t.Terminal); err != nil {
			return nil, status.Errorf(codes.Internal, "turn %q's terminal does not decode: %v", rec.ID, err)
		}
	}
	return t, nil
}
