package main

import "encoding/json"

// recordParams appends every request and notification from the client to
// the --record-params file as one JSON line {"method":M,"id":ID,"params":P}
// (no id for a notification), on
// the reader, before the message is handled: tests see exactly what a
// client sent (the mcpServers of session/new, the requestId of a
// $/cancel_request), and by the time the answer is read the line is
// written.
func (a *agent) recordParams(m *message) {
	if a.cfg.recordParams == "" {
		return
	}
	params := m.Params
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	line, err := json.Marshal(struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id,omitempty"`
		Params json.RawMessage `json:"params"`
	}{m.Method, m.ID, params})
	if err == nil {
		appendLine(a.cfg.recordParams, string(line))
	}
}

// withdrawn serves $/cancel_request: a request held by --hang-on that the
// client withdraws is answered with error -32800, as ACP asks of an agent
// that supports cancellation. Any other id is ignored.
func (a *agent) withdrawn(m *message) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return
	}
	a.mu.Lock()
	id, ok := a.hung[string(p.RequestID)]
	delete(a.hung, string(p.RequestID))
	a.mu.Unlock()
	if ok {
		a.replyError(id, codeRequestCancelled, "request cancelled")
	}
}
