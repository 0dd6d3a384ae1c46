package main

import "encoding/json"

// recordMeta appends what a request or notification from the client
// carried in params._meta to the --record-meta file, as one JSON line
// {"method":M,"meta":{...}} ("meta" is null when the message had none), so
// that tests can see what a client propagates (a traceparent) and that it
// sends nothing when it should not. It runs on the reader, before the
// message is handled: by the time its answer is read, the line is written.
func (a *agent) recordMeta(m *message) {
	if a.cfg.recordMeta == "" {
		return
	}
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(m.Params, &p)
	if len(p.Meta) == 0 {
		p.Meta = json.RawMessage("null")
	}
	line, err := json.Marshal(struct {
		Method string          `json:"method"`
		Meta   json.RawMessage `json:"meta"`
	}{m.Method, p.Meta})
	if err == nil {
		appendLine(a.cfg.recordMeta, string(line))
	}
}
