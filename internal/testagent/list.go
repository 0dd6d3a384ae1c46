package main

import "encoding/json"

// listSessions answers session/list with two pages of one session each
// ("listed-1", then "listed-2"), in the cwd the request filters by (else
// "/"), so that a test sees the filter and the cursor go through.
func (a *agent) listSessions(m *message) {
	var p struct {
		Cwd    string `json:"cwd"`
		Cursor string `json:"cursor"`
	}
	_ = json.Unmarshal(m.Params, &p)
	cwd := p.Cwd
	if cwd == "" {
		cwd = "/"
	}
	if p.Cursor == "" {
		a.reply(m.ID, obj{"sessions": []obj{{"sessionId": "listed-1", "cwd": cwd, "title": "first", "updatedAt": "2026-12-01T10:00:00Z"}}, "nextCursor": "page-2"})
		return
	}
	a.reply(m.ID, obj{"sessions": []obj{{"sessionId": "listed-2", "cwd": cwd}}})
}
