package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Sessions that outlive the agent process (--sessions-dir), as real
// agents keep theirs on disk: each session's history (the text of every
// prompt it received, in order) is a JSON array in DIR/<session id>.json,
// so that a later process can re-open the session with session/load
// (which replays the history) or session/resume (which does not), and the
// history directive can show a test what the agent remembers.

// sessionFile is where a session's history is kept.
func (a *agent) sessionFile(sessionID string) string {
	return filepath.Join(a.cfg.sessionsDir, safeName(sessionID)+".json")
}

// safeName keeps a session id from naming a file outside the directory.
func safeName(id string) string {
	return strings.NewReplacer("/", "_", "\\", "_", "..", "__").Replace(id)
}

// persisted reports whether sessions are kept on disk.
func (a *agent) persisted() bool { return a.cfg.sessionsDir != "" }

// readHistory reads a kept session's history.
func (a *agent) readHistory(sessionID string) ([]string, error) {
	b, err := os.ReadFile(a.sessionFile(sessionID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("unknown session %q: %s has no such session", sessionID, a.cfg.sessionsDir)
	}
	if err != nil {
		return nil, err
	}
	var history []string
	if err := json.Unmarshal(b, &history); err != nil {
		return nil, fmt.Errorf("session %q: its history does not decode: %w", sessionID, err)
	}
	return history, nil
}

// writeHistory replaces a kept session's history.
func (a *agent) writeHistory(sessionID string, history []string) {
	if history == nil {
		history = []string{}
	}
	b, _ := json.Marshal(history)
	if err := os.WriteFile(a.sessionFile(sessionID), b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "testagent: keeping session", sessionID+":", err)
	}
}

// remember appends a prompt to a kept session's history and returns the
// history before it. It runs on the reader goroutine, so prompts are kept
// in the order they arrived.
func (a *agent) remember(sessionID, prompt string) []string {
	if !a.persisted() {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	before, err := a.readHistory(sessionID)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testagent:", err)
	}
	a.writeHistory(sessionID, append(before[:len(before):len(before)], prompt))
	return before
}

// reopen re-opens a kept session for session/load or session/resume: it
// records how the session was opened in this process and returns its
// history.
func (a *agent) reopen(sessionID, method string) ([]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	history, err := a.readHistory(sessionID)
	if err != nil {
		return nil, err
	}
	a.sessions[sessionID] = true
	a.openedBy[sessionID] = method
	return history, nil
}

// historyReport is the history directive's chunk: how this process opened
// the session and the prompts it received before the current one, each
// quoted: `history via session/load: "chunk a","history"`.
func historyReport(openedBy string, history []string) string {
	quoted := make([]string, len(history))
	for i, p := range history {
		quoted[i] = strconv.Quote(p)
	}
	return fmt.Sprintf("history via %s: %s", openedBy, strings.Join(quoted, ","))
}
