package clients

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
)

// The floor is the least a client can do with ACP: write the three requests
// by hand, split the agent's stdout into lines and decode each one with one
// json.Unmarshal into a struct shaped after ACP's schema (minNotification),
// counting chunks. No queue, no dispatch, no second goroutine. floor-sdk is
// the same reader decoding each update as the SDK's SessionNotification,
// whose union types decode in several passes.

// agentProc is a test agent started on pipes.
type agentProc struct {
	stdin  io.WriteCloser
	stdout io.Reader
	dir    string
	kill   func()
	wait   func(time.Duration) bool // whether the agent exited within the time
}

// startAgent starts bin on pipes in a fresh directory: as a child of this
// process, or, when contained is set, as acpgate starts an agent (through
// its launcher, in the namespaces it probed, or in a process group, from
// its starter when it has one).
func startAgent(contained *containment, bin string, args ...string) (*agentProc, error) {
	dir, err := os.MkdirTemp("", "acpbench-session-")
	if err != nil {
		return nil, err
	}
	if contained != nil {
		p, err := agentproc.Start(agentproc.Spec{Command: bin, Args: args, Env: os.Environ(), Dir: dir,
			Launcher: contained.launcher, Containment: contained.kind, HostProc: contained.hostProc, Starter: contained.starter})
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		return &agentProc{stdin: p.Stdin().(io.WriteCloser), stdout: p.Stdout(), dir: dir, kill: p.Kill, wait: p.WaitExit}, nil
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	wait := func(d time.Duration) bool {
		select {
		case <-exited:
			return true
		case <-time.After(d):
			return false
		}
	}
	kill := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	return &agentProc{stdin: stdin, stdout: stdout, dir: dir, kill: kill, wait: wait}, nil
}

// stop closes the agent's stdin (it exits at EOF) and kills it if it has
// not exited within a second.
func (a *agentProc) stop() {
	_ = a.stdin.Close()
	if !a.wait(time.Second) {
		a.kill()
	}
	_ = os.RemoveAll(a.dir)
}

// containment is how acpgate holds its agents on this machine, probed as
// acpgate probes it at start: the floor-contained client starts its agent
// the same way, so that the time to first chunk separates what the
// containment costs from what the gateway adds.
type containment struct {
	launcher string
	kind     agentproc.Containment
	hostProc bool
	starter  *agentproc.Starter // nil: the agent starts at this process's priority
}

// RunFloor runs the job with the floor client (floor-sdk when j.Client
// says so): each of its turns on an agent of its own, spawned on pipes.
func RunFloor(ctx context.Context, j job.Job) job.Result {
	var contained *containment
	if j.Client == job.FloorContained {
		if j.Launcher == "" {
			return job.Result{Client: j.Client, Err: "the floor-contained client needs the job's launcher"}
		}
		kind, hostProc, _ := agentproc.ProbeContainment(j.Launcher)
		contained = &containment{launcher: j.Launcher, kind: kind, hostProc: hostProc}
	}
	return runStreams(ctx, j, func(ctx context.Context, j job.Job, s *Stream) { floorTurn(ctx, contained, j, s) })
}

// floorMessage is one line from the agent, decoded in one pass: Params
// points to a *minNotification (floor) or an *acp.SessionNotification
// (floor-sdk).
type floorMessage struct {
	ID     *int64          `json:"id"`
	Method string          `json:"method"`
	Params any             `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func floorTurn(ctx context.Context, contained *containment, j job.Job, s *Stream) {
	waitStart(j)
	s.Start = time.Now()
	bin, args := j.Agent, []string(nil)
	if j.Naive {
		self, err := os.Executable()
		if err != nil {
			s.err = err
			return
		}
		bin, args = self, []string{"agent"}
	}
	a, err := startAgent(contained, bin, args...)
	if err != nil {
		s.err = err
		return
	}
	defer a.stop()
	stop := context.AfterFunc(ctx, a.kill)
	defer stop()

	r := bufio.NewReaderSize(a.stdout, 1<<20)
	var long []byte
	readLine := func() ([]byte, error) {
		line, err := r.ReadSlice('\n')
		if err == nil {
			return line, nil
		}
		long = append(long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.ReadSlice('\n')
			long = append(long, line...)
		}
		return long, err
	}
	send := func(id int64, method string, params any) error { return writeRequest(a.stdin, id, method, params) }
	sdk := j.Client == "floor-sdk"
	var sdkParams acp.SessionNotification
	var minParams minNotification
	// await reads until the response to id, handing each update to s.
	await := func(id int64) (json.RawMessage, error) {
		for {
			line, err := readLine()
			if err != nil {
				return nil, fmt.Errorf("reading the agent's stdout: %w", err)
			}
			var m floorMessage
			if sdk {
				m.Params = &sdkParams
			} else {
				m.Params = &minParams
			}
			if err := json.Unmarshal(line, &m); err != nil {
				return nil, fmt.Errorf("decoding %.80q: %w", line, err)
			}
			switch {
			case m.Method == "session/update" && sdk:
				if c := sdkParams.Update.AgentMessageChunk; c != nil && c.Content.Text != nil {
					s.chunk(c.Content.Text.Text)
				}
				sdkParams = acp.SessionNotification{}
			case m.Method == "session/update":
				if u := minParams.Update; u.SessionUpdate == "agent_message_chunk" && u.Content.Type == "text" {
					s.chunk(u.Content.Text)
				}
				minParams = minNotification{}
			case m.Method == "" && m.ID != nil && *m.ID == id:
				if m.Error != nil {
					return nil, fmt.Errorf("JSON-RPC error %d: %s", m.Error.Code, m.Error.Message)
				}
				return m.Result, nil
			}
		}
	}

	if err := send(1, "initialize", initializeParams()); err != nil {
		s.err = err
		return
	}
	if _, err := await(1); err != nil {
		s.err = fmt.Errorf("initialize: %w", err)
		return
	}
	s.startup = time.Now()
	if err := send(2, "session/new", newSessionParams(a.dir)); err != nil {
		s.err = err
		return
	}
	res, err := await(2)
	if err != nil {
		s.err = fmt.Errorf("session/new: %w", err)
		return
	}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(res, &sess)
	s.prompt()
	if err := send(3, "session/prompt", promptParams(sess.SessionID, j.Script())); err != nil {
		s.err = err
		return
	}
	res, err = await(3)
	s.ended()
	if err != nil {
		s.err = fmt.Errorf("session/prompt: %w", err)
		return
	}
	var pr struct {
		StopReason string `json:"stopReason"`
	}
	if _ = json.Unmarshal(res, &pr); pr.StopReason != "end_turn" {
		s.err = fmt.Errorf("session/prompt answered %s", res)
	}
}

// writeRequest writes one JSON-RPC request to an agent's stdin.
func writeRequest(w io.Writer, id int64, method string, params any) error {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// The params of the three requests a one-shot turn makes.
func initializeParams() any {
	return map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}
}

func newSessionParams(dir string) any { return map[string]any{"cwd": dir, "mcpServers": []any{}} }

func promptParams(sessionID, text string) any {
	return map[string]any{"sessionId": sessionID, "prompt": []any{map[string]any{"type": "text", "text": text}}}
}

// minNotification is session/update's params as ACP's schema types them, for
// a text chunk: every field the gateway needs, nothing more.
type minNotification struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		SessionUpdate string `json:"sessionUpdate"`
		MessageID     string `json:"messageId"`
		Content       struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"update"`
}
