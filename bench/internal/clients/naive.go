package clients

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The naive floor is what a client gets from the simplest honest agent: one
// that writes each stamped agent_message_chunk line with a write of its own
// as soon as it is due (unpaced: as fast as the pipe takes them), instead of
// the test agent's flood, which stamps a whole burst into one buffer before
// the first byte leaves it. The floor client reads it as it reads the test
// agent (bufio and one json.Unmarshal per line). The gateway runs the same
// agent (NaiveAgent in its configuration), so that a gateway client's
// figures divide by the floor's for the same agent: a ratio against the
// test agent's pre-built bursts flatters the floor, whose reader then finds
// a megabyte of lines waiting at every read.

// naiveMsg is one JSON-RPC message from the client.
type naiveMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// RunNaiveAgent serves ACP on stdin and stdout until stdin ends: initialize,
// session/new, session/prompt (a `flood_timed N SIZE [RATE]` script, as the
// test agent takes it) and session/cancel.
func RunNaiveAgent(_ []string) int {
	var mu sync.Mutex // one line at a time on stdout
	write := func(b []byte) {
		mu.Lock()
		_, _ = os.Stdout.Write(b)
		mu.Unlock()
	}
	reply := func(id json.RawMessage, result any) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		write(append(b, '\n'))
	}
	replyErr := func(id json.RawMessage, msg string) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32602, "message": msg}})
		write(append(b, '\n'))
	}
	var cancelled atomic.Bool
	var turns sync.WaitGroup
	sessions := 0
	r := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var m naiveMsg
			if json.Unmarshal(line, &m) != nil {
				continue
			}
			switch m.Method {
			case "initialize":
				reply(m.ID, map[string]any{"protocolVersion": 1, "authMethods": []any{},
					"agentCapabilities": map[string]any{"loadSession": false}})
			case "session/new":
				sessions++
				reply(m.ID, map[string]any{"sessionId": fmt.Sprintf("naive-%d-%d", os.Getpid(), sessions)})
			case "session/cancel":
				cancelled.Store(true)
			case "session/prompt":
				var p struct {
					SessionID string `json:"sessionId"`
					Prompt    []struct {
						Text string `json:"text"`
					} `json:"prompt"`
				}
				_ = json.Unmarshal(m.Params, &p)
				text := ""
				if len(p.Prompt) > 0 {
					text = p.Prompt[0].Text
				}
				n, size, rate, err := parseFloodScript(text)
				if err != nil {
					replyErr(m.ID, err.Error())
					continue
				}
				cancelled.Store(false)
				turns.Go(func() {
					naiveFlood(write, p.SessionID, n, size, rate, &cancelled)
					stop := "end_turn"
					if cancelled.Load() {
						stop = "cancelled"
					}
					reply(m.ID, map[string]any{"stopReason": stop})
				})
			default:
				if len(m.ID) > 0 {
					b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID,
						"error": map[string]any{"code": -32601, "message": "method not found: " + m.Method}})
					write(append(b, '\n'))
				}
			}
		}
		if err != nil {
			cancelled.Store(true)
			turns.Wait()
			return 0
		}
	}
}

// parseFloodScript reads `flood_timed N SIZE [RATE]`.
func parseFloodScript(text string) (n, size, rate int, err error) {
	f := strings.Fields(text)
	if len(f) < 3 || len(f) > 4 || f[0] != "flood_timed" {
		return 0, 0, 0, fmt.Errorf("the naive agent runs only `flood_timed N SIZE [RATE]`, not %.60q", text)
	}
	v := make([]int, len(f)-1)
	for i, s := range f[1:] {
		if v[i], err = strconv.Atoi(s); err != nil || v[i] < 0 {
			return 0, 0, 0, fmt.Errorf("flood_timed: %q is not a count", s)
		}
	}
	if v[1] < naiveStampLen {
		return 0, 0, 0, fmt.Errorf("flood_timed: SIZE %d is shorter than the %d-byte stamp", v[1], naiveStampLen)
	}
	if len(v) == 3 {
		rate = v[2]
	}
	return v[0], v[1], rate, nil
}

// naiveStampLen is the stamp that starts every chunk's text, as the test
// agent writes it (and verifier reads it): the index as 9 digits, a space,
// the send time as 19 digits of Unix nanoseconds, a space.
const naiveStampLen = 9 + 1 + 19 + 1

// naiveLine is the session/update line of one chunk of size bytes, and the
// offset of its text in it.
func naiveLine(sessionID string, size int) (line []byte, at int) {
	head, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{
		"sessionId": sessionID,
		"update": map[string]any{"sessionUpdate": "agent_message_chunk", "messageId": "flood",
			"content": map[string]any{"type": "text", "text": "\x01"}}}})
	at = strings.Index(string(head), `\u0001`)
	line = append(append([]byte{}, head[:at]...), strings.Repeat("x", size)...)
	line = append(append(line, head[at+len(`\u0001`):]...), '\n')
	copy(line[at:], "000000000 0000000000000000000 ")
	return line, at
}

// stampLine writes chunk i's index and the time now into line's text at at.
func stampLine(line []byte, at, i int) {
	putDecimal(line[at:at+9], uint64(i))
	putDecimal(line[at+10:at+29], uint64(time.Now().UnixNano()))
}

func putDecimal(b []byte, v uint64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
}

// naiveFlood writes n chunks, each stamped just before its own write: at
// once one after the other (rate 0), or chunk i when start + i/rate has
// come (a late wake-up writes every chunk then due, still one write each).
func naiveFlood(write func([]byte), sessionID string, n, size, rate int, cancelled *atomic.Bool) {
	line, at := naiveLine(sessionID, size)
	start := time.Now()
	for i := 0; i < n; i++ {
		if cancelled.Load() {
			return
		}
		if rate > 0 {
			if wait := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); wait > 0 {
				time.Sleep(wait)
			}
		}
		stampLine(line, at, i)
		write(line)
	}
}
