package acp

import (
	"context"
	"encoding/json"
)

// MethodList lists the sessions an agent keeps (ACP session/list, when it
// advertised sessionCapabilities.list).
const MethodList = "session/list"

// AgentSession is a session as the agent lists it (ACP SessionInfo).
type AgentSession struct {
	ID        string
	Cwd       string
	Title     string
	UpdatedAt string
}

type listParams struct {
	Meta   map[string]any `json:"_meta,omitempty"`
	Cwd    string         `json:"cwd,omitempty"`
	Cursor string         `json:"cursor,omitempty"`
}

type listResult struct {
	Sessions []struct {
		SessionID string `json:"sessionId"`
		Cwd       string `json:"cwd"`
		Title     string `json:"title"`
		UpdatedAt string `json:"updatedAt"`
	} `json:"sessions"`
	NextCursor string `json:"nextCursor"`
}

// ListSessions asks the agent for one page of its sessions, in dir when it
// is not empty (absolute), from cursor (empty for the first page). It
// returns the page and the cursor of the next one ("" after the last).
func (s *Session) ListSessions(ctx context.Context, dir, cursor string) ([]AgentSession, string, error) {
	if s.info.Capabilities.SessionCapabilities.List == nil {
		return nil, "", &Error{Proto: s.interp.CapabilityNotSupported(MethodList)}
	}
	var out listResult
	if err := s.call(ctx, MethodList, func(meta map[string]any) any {
		return listParams{Meta: meta, Cwd: dir, Cursor: cursor}
	}, &out); err != nil {
		return nil, "", err
	}
	page := make([]AgentSession, len(out.Sessions))
	for i, x := range out.Sessions {
		page[i] = AgentSession{ID: x.SessionID, Cwd: x.Cwd, Title: x.Title, UpdatedAt: x.UpdatedAt}
	}
	return page, out.NextCursor, nil
}

// MethodDelete deletes one of the sessions an agent lists (ACP
// session/delete, when it advertised sessionCapabilities.delete).
const MethodDelete = "session/delete"

type deleteParams struct {
	Meta      map[string]any `json:"_meta,omitempty"`
	SessionID string         `json:"sessionId"`
}

// DeleteSession asks the agent to delete one of the sessions it lists.
func (s *Session) DeleteSession(ctx context.Context, id string) error {
	if !s.info.DeleteSessions {
		return &Error{Proto: s.interp.CapabilityNotSupported(MethodDelete)}
	}
	var out json.RawMessage
	return s.call(ctx, MethodDelete, func(meta map[string]any) any {
		return deleteParams{Meta: meta, SessionID: id}
	}, &out)
}
