// Command conformance is the Go runner of acpgate's cross-language
// conformance suite. It runs every scenario of conformance/scenarios.json
// against one running gateway and prints one canonical JSON line per
// scenario, exactly as the Python and Node runners do; conformance/run.sh
// checks that the three outputs are byte-identical to each other and to
// conformance/expected.jsonl. The output format and its normalisation are
// defined in conformance/README.md.
//
//	go run ./conformance/go --addr HOST:PORT [--scenarios FILE] [--only NAME]
//
// The address defaults to $ACPGATE_ADDR. The runner exits 0 when it could run
// every scenario (whatever the scenarios' outcomes: comparing them is
// run.sh's job), 1 when it could not, 2 on a usage error.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// scenarioTimeout bounds one scenario, so that a gateway that never ends a
// stream fails the suite instead of hanging it.
const scenarioTimeout = 60 * time.Second

// scenario is one entry of scenarios.json; see conformance/README.md.
type scenario struct {
	Name                  string                  `json:"name"`
	Kind                  string                  `json:"kind"`
	Agent                 string                  `json:"agent"`
	Session               bool                    `json:"session"`
	CancelAfterFirstChunk bool                    `json:"cancel_after_first_chunk"`
	OmitOutcomeText       bool                    `json:"omit_outcome_text"`
	ChunkDelivery         string                  `json:"chunk_delivery"`
	delivery              acpgatev1.ChunkDelivery // ChunkDelivery, parsed by loadScenarios
	PromptImage           *image                  `json:"prompt_image"`
	CreateSession         *create                 `json:"create_session"`
	Script                []string                `json:"script"`
	Steps                 []step                  `json:"steps"`
}

// create is a session scenario's create_session: the CreateSession
// fields set besides the agent.
type create struct {
	ModeID        string            `json:"mode_id"`
	ConfigOptions map[string]string `json:"config_options"`
}

// image is a scenario's prompt_image: an image block sent before the script.
type image struct {
	Data     string `json:"data"`
	MimeType string `json:"mime_type"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", os.Getenv("ACPGATE_ADDR"), "gateway address HOST:PORT (default $ACPGATE_ADDR)")
	file := fs.String("scenarios", "conformance/scenarios.json", "the scenarios file")
	only := fs.String("only", "", "run only the scenario with this name")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *addr == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: conformance --addr HOST:PORT [--scenarios FILE] [--only NAME]")
		return 2
	}
	scenarios, err := loadScenarios(*file)
	if err != nil {
		fmt.Fprintln(stderr, "conformance:", err)
		return 1
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(stderr, "conformance:", err)
		return 1
	}
	defer func() { _ = conn.Close() }()
	client := acpgatev1.NewAgentGatewayClient(conn)

	ran := 0
	for _, sc := range scenarios {
		if *only != "" && sc.Name != *only {
			continue
		}
		ran++
		var line []byte
		switch sc.Kind {
		case "", "prompt":
			line, err = runScenario(client, sc)
		case "steps":
			line, err = runSteps(client, sc)
		default:
			err = fmt.Errorf("unknown kind %q", sc.Kind)
		}
		if err != nil {
			fmt.Fprintf(stderr, "conformance: scenario %s: %v\n", sc.Name, err)
			return 1
		}
		if _, err := stdout.Write(append(line, '\n')); err != nil {
			return 1
		}
	}
	if ran == 0 {
		fmt.Fprintln(stderr, "conformance: no scenario to run")
		return 1
	}
	return 0
}

func loadScenarios(path string) ([]scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Scenarios []scenario `json:"scenarios"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i := range doc.Scenarios {
		sc := &doc.Scenarios[i]
		if sc.delivery, err = chunkDelivery(sc.ChunkDelivery); err != nil {
			return nil, fmt.Errorf("%s: scenario %s: %w", path, sc.Name, err)
		}
	}
	return doc.Scenarios, nil
}

// chunkDelivery is a scenario's chunk_delivery, by its enum name, for
// every Prompt of the scenario; absent, the gateway's default. Scenarios
// that expect one event per agent chunk name CHUNK_DELIVERY_EACH: by
// default the gateway merges the chunks it has read together, and where
// it cuts them depends on timing.
func chunkDelivery(name string) (acpgatev1.ChunkDelivery, error) {
	if name == "" {
		return acpgatev1.ChunkDelivery_CHUNK_DELIVERY_UNSPECIFIED, nil
	}
	v, ok := acpgatev1.ChunkDelivery_value[name]
	if !ok {
		return 0, fmt.Errorf("chunk_delivery %q is not a ChunkDelivery name", name)
	}
	return acpgatev1.ChunkDelivery(v), nil
}

// runScenario runs one scenario and returns its canonical output line.
func runScenario(client acpgatev1.AgentGatewayClient, sc scenario) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()

	out := map[string]any{"name": sc.Name, "arms": []any{}}
	req := &acpgatev1.PromptRequest{
		Text:            strings.Join(sc.Script, "\n"),
		OmitOutcomeText: sc.OmitOutcomeText,
		ChunkDelivery:   sc.delivery,
	}
	if im := sc.PromptImage; im != nil {
		req.Prompt = []*acpgatev1.ContentBlock{{Block: &acpgatev1.ContentBlock_Image{Image: &acpgatev1.ImageContent{Data: im.Data, MimeType: im.MimeType}}}}
	}
	if sc.Session {
		create := &acpgatev1.CreateSessionRequest{Agent: sc.Agent}
		if c := sc.CreateSession; c != nil {
			create.ModeId, create.ConfigOptions = c.ModeID, c.ConfigOptions
		}
		sess, err := client.CreateSession(ctx, create)
		if err != nil {
			st, err := statusObject("CreateSession", err)
			if err != nil {
				return nil, err
			}
			out["status"] = st
			return finish(out, nil)
		}
		req.SessionId = sess.GetId()
		defer func() {
			// The gateway has already dropped a session whose agent is
			// gone; NOT_FOUND is fine then.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: sess.GetId()})
		}()
	} else {
		req.Agent = sc.Agent
	}

	stream, err := client.Prompt(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("starting Prompt: %w", err)
	}
	var (
		arms       []any
		events     []*acpgatev1.PromptEvent
		sessionID  string
		cancelSent bool
	)
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			st, serr := statusObject("Prompt", err)
			if serr != nil {
				return nil, serr
			}
			out["status"] = st
			break
		}
		events = append(events, ev)
		arm := armName(ev)
		arms = append(arms, arm)
		if arm == "started" {
			sessionID = ev.GetStarted().GetSessionId()
		}
		if sc.CancelAfterFirstChunk && !cancelSent && arm == "agent_message_chunk" {
			cancelSent = true
			resp, err := client.Cancel(ctx, &acpgatev1.CancelRequest{SessionId: sessionID})
			if err != nil {
				st, serr := statusObject("Cancel", err)
				if serr != nil {
					return nil, serr
				}
				out["cancel"] = st
			} else {
				out["cancel"] = map[string]any{"cancelled": resp.GetCancelled()}
			}
		}
	}
	if arms != nil {
		out["arms"] = arms
	}
	if v := violations(events, sc.Agent, req.GetSessionId()); len(v) > 0 {
		out["violations"] = v
	}
	if n := len(events); n > 0 && isTerminal(armName(events[n-1])) {
		term := proto.Clone(events[n-1]).(*acpgatev1.PromptEvent)
		term.Seq = 0 // volatile
		term.Time = nil
		obj, err := protoJSONObject(term)
		if err != nil {
			return nil, err
		}
		out["terminal"] = obj
	}
	return finish(out, nil)
}

// armName is the proto field name of the event's oneof arm, or "" for an
// event with none set.
func armName(ev *acpgatev1.PromptEvent) string {
	m := ev.ProtoReflect()
	fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("event"))
	if fd == nil {
		return ""
	}
	return string(fd.Name())
}

func isTerminal(arm string) bool { return arm == "outcome" || arm == "error" }

// violations checks the stream invariants of PromptEvent (see
// conformance/README.md): seq counts from 1 without gaps, every event has a
// time and an arm, the first is started (naming the agent, and the session
// of a turn on an open session), exactly one terminal event is the last, and
// an outcome repeats the started event's turn and session ids. A stream that
// ended with a non-OK status before any event has nothing to check.
func violations(events []*acpgatev1.PromptEvent, agent, sessionID string) []any {
	var v []any
	if len(events) == 0 {
		return nil
	}
	for i, ev := range events {
		if ev.GetSeq() != uint64(i+1) {
			v = append(v, fmt.Sprintf("event %d has seq %d", i+1, ev.GetSeq()))
		}
		if ev.GetTime() == nil {
			v = append(v, fmt.Sprintf("event %d has no time", i+1))
		}
		if armName(ev) == "" {
			v = append(v, fmt.Sprintf("event %d has no arm", i+1))
		}
		if isTerminal(armName(ev)) && i != len(events)-1 {
			v = append(v, fmt.Sprintf("event %d is terminal but not last", i+1))
		}
	}
	started := events[0].GetStarted()
	if started == nil {
		v = append(v, "the first event is not started")
	} else {
		if started.GetAgent() != agent {
			v = append(v, "started.agent is not the agent prompted")
		}
		if sessionID != "" && started.GetSessionId() != sessionID {
			v = append(v, "started.session_id is not the session prompted")
		}
	}
	last := events[len(events)-1]
	if !isTerminal(armName(last)) {
		v = append(v, "the last event is not terminal")
	}
	if o := last.GetOutcome(); o != nil {
		if o.GetTurnId() != started.GetTurnId() {
			v = append(v, "outcome.turn_id is not started.turn_id")
		}
		if o.GetSessionId() != started.GetSessionId() {
			v = append(v, "outcome.session_id is not started.session_id")
		}
	}
	return v
}

// statusObject describes a call the gateway ended with a non-OK status: the
// call, the canonical code name, the message and the HarnessError detail
// when there is one.
func statusObject(call string, err error) (map[string]any, error) {
	st, ok := status.FromError(err)
	if !ok {
		return nil, fmt.Errorf("%s failed without a gRPC status: %w", call, err)
	}
	obj := map[string]any{"call": call, "code": code.Code(st.Code()).String(), "message": st.Message()}
	for _, d := range st.Details() {
		if he, ok := d.(*acpgatev1.HarnessError); ok {
			e, err := protoJSONObject(he)
			if err != nil {
				return nil, err
			}
			obj["error"] = e
			break
		}
	}
	return obj, nil
}

// protoJSONObject renders m as protojson and decodes it into plain values
// (numbers kept as their literal text), ready for normalisation.
func protoJSONObject(m proto.Message) (map[string]any, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// finish normalises the output line and renders it canonically; turns are
// the turn ids a steps scenario's streams announced, by step.
func finish(out map[string]any, turns []knownTurn) ([]byte, error) {
	for k, v := range out {
		if k != "name" {
			out[k] = normalise(k, v, turns)
		}
	}
	var b bytes.Buffer
	if err := canonical(&b, out); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// sessionIDPattern matches the session ids the test agent mints with
// --unique-sessions ("sess-<pid>-<n>").
var sessionIDPattern = regexp.MustCompile(`sess-[0-9]+-[0-9]+`)

// placeholders replace the values of volatile keys when they are non-empty
// strings.
var placeholders = map[string]string{
	"sessionId":  "<session>",
	"turnId":     "<turn>",
	"stderrTail": "<stderr-tail>",
	"time":       "<time>",
	"startedAt":  "<time>",
	"endedAt":    "<time>",
}

// knownTurn is a turn id a steps scenario's stream announced, and the
// placeholder it becomes: "<turn:N>", N the index of the step.
type knownTurn struct{ id, placeholder string }

// normalise applies the rules of conformance/README.md to v, found under
// key.
func normalise(key string, v any, turns []knownTurn) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalise(k, e, turns)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalise(key, e, turns)
		}
		return x
	case string:
		for _, t := range turns {
			if key == "turnId" && x == t.id {
				return t.placeholder
			}
		}
		if p, ok := placeholders[key]; ok && x != "" {
			return p
		}
		for _, t := range turns {
			x = strings.ReplaceAll(x, t.id, t.placeholder)
		}
		x = strings.ReplaceAll(x, runSuffix, "")
		return sessionIDPattern.ReplaceAllString(x, "<session>")
	}
	return v
}

// canonical writes v as canonical JSON: object keys sorted (by code point),
// no insignificant whitespace, strings escaped as Python's json.dumps with
// ensure_ascii=False does (", \ and control characters only; everything
// else as raw UTF-8).
func canonical(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		b.WriteString(x.String())
	case string:
		writeString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := canonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys) // byte order of UTF-8 is code-point order
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := canonical(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("canonical JSON: unexpected %T", v)
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				var enc [utf8.UTFMax]byte
				b.Write(enc[:utf8.EncodeRune(enc[:], r)])
			}
		}
	}
	b.WriteByte('"')
}
