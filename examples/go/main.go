// Command prompt streams one prompt turn from acpgate and prints the agent's
// answer as it arrives, then branches on how the turn ended.
//
//	go run ./cmd/acpgate serve &                     # the gateway, on the demo agent
//	go run ./examples/go "tell me about acpgate"     # this example
//	go run ./examples/go --agent demo refuse         # try: refuse, truncate, loop, fail, tools, slow
//
// Ctrl-C during a turn asks the gateway to cancel it (the Cancel call) and
// waits for the cancellation to arrive as the turn's terminal event; a second
// Ctrl-C gives up at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

func main() {
	os.Exit(run())
}

func run() int {
	defaultAddr := "127.0.0.1:7070"
	if env := os.Getenv("ACPGATE_ADDR"); env != "" {
		defaultAddr = env
	}
	addr := flag.String("addr", defaultAddr, "gateway address (default $ACPGATE_ADDR or 127.0.0.1:7070)")
	agent := flag.String("agent", "demo", "the configured agent to run the prompt on")
	flag.Parse()
	text := strings.Join(flag.Args(), " ")
	if text == "" {
		text = "Hello from the Go example"
	}

	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "prompt:", err)
		return 2
	}
	defer func() { _ = conn.Close() }()
	client := acpgatev1.NewAgentGatewayClient(conn)

	// The call gets its own context: Ctrl-C cancels the turn through the
	// Cancel call, so that its terminal event can still be read.
	ctx, abandon := context.WithCancel(context.Background())
	defer abandon()
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: *agent, Text: text})
	if err != nil {
		return rejected(err)
	}

	var mu sync.Mutex
	sessionID := ""
	interrupts := make(chan os.Signal, 2)
	signal.Notify(interrupts, os.Interrupt)
	go func() {
		<-interrupts
		mu.Lock()
		id := sessionID
		mu.Unlock()
		if id != "" {
			fmt.Fprintln(os.Stderr, "\n[cancelling the turn]")
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = client.Cancel(cctx, &acpgatev1.CancelRequest{SessionId: id})
			cancel()
			<-interrupts
		}
		abandon() // a second Ctrl-C, or no turn yet: give up
	}()

	lastMessage := ""
	printed := false
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			fmt.Fprintln(os.Stderr, "prompt: the stream ended without a terminal event")
			return 1
		}
		if err != nil {
			return rejected(err)
		}
		switch e := ev.GetEvent().(type) {
		case *acpgatev1.PromptEvent_Started:
			mu.Lock()
			sessionID = e.Started.GetSessionId()
			mu.Unlock()
			fmt.Fprintf(os.Stderr, "[%s: turn %s on session %s]\n", e.Started.GetAgent(), e.Started.GetTurnId(), e.Started.GetSessionId())
		case *acpgatev1.PromptEvent_AgentMessageChunk:
			// A new message id starts a new message: separate them as the
			// outcome's text does, with a blank line.
			if id := e.AgentMessageChunk.GetMessageId(); id != lastMessage && printed {
				fmt.Print("\n\n")
			}
			lastMessage = e.AgentMessageChunk.GetMessageId()
			fmt.Print(e.AgentMessageChunk.GetText())
			printed = printed || e.AgentMessageChunk.GetText() != ""
		case *acpgatev1.PromptEvent_ToolCall:
			fmt.Fprintf(os.Stderr, "[tool: %s]\n", e.ToolCall.GetTitle())
		case *acpgatev1.PromptEvent_Outcome:
			if printed {
				fmt.Println()
			}
			if e.Outcome.GetText() == "" {
				fmt.Fprintln(os.Stderr, "[completed without text: a turn of tool calls only]")
			}
			return 0
		case *acpgatev1.PromptEvent_Error:
			if printed {
				fmt.Println()
			}
			return failed(e.Error)
		}
	}
}

// failed reports a turn that did not complete and returns the exit status:
// the same codes as `acpgate prompt`.
func failed(e *acpgatev1.HarnessError) int {
	fmt.Fprintln(os.Stderr, "error:", e.GetMessage())
	if p := e.GetPartial(); p != nil {
		fmt.Fprintf(os.Stderr, "(the agent had said %d bytes before the turn ended; truncated: %v)\n", p.GetTotalBytes(), p.GetTruncated())
	}
	switch k := e.GetKind().(type) {
	case *acpgatev1.HarnessError_Transport:
		t := k.Transport
		fmt.Fprintf(os.Stderr, "the channel to the agent broke: %s\n", t.GetReason())
		if t.ExitCode != nil {
			fmt.Fprintf(os.Stderr, "the agent exited with status %d\n", t.GetExitCode())
		}
		if tail := t.GetStderrTail(); tail != "" {
			fmt.Fprintf(os.Stderr, "the agent's stderr ended with:\n%s\n", tail)
		}
		return 3
	case *acpgatev1.HarnessError_Protocol:
		fmt.Fprintln(os.Stderr, "the agent broke the ACP wire contract")
		return 4
	case *acpgatev1.HarnessError_Harness:
		h := k.Harness
		switch {
		case h.GetCancelled():
			fmt.Fprintln(os.Stderr, "the turn was cancelled")
			return 7
		case h.GetAuthRequired():
			fmt.Fprintln(os.Stderr, "the agent needs credentials configured for the gateway")
			return 8
		case h.RpcCode != nil:
			fmt.Fprintf(os.Stderr, "the agent failed with JSON-RPC error %d\n", h.GetRpcCode())
		default:
			fmt.Fprintf(os.Stderr, "the agent stopped short: %s\n", h.GetStopKind())
		}
		return 5
	case *acpgatev1.HarnessError_PolicyRefused:
		fmt.Fprintln(os.Stderr, "the agent refused the prompt")
		return 6
	case *acpgatev1.HarnessError_CapabilityNotSupported:
		fmt.Fprintf(os.Stderr, "the agent does not support %s\n", k.CapabilityNotSupported.GetPrimitive())
		return 9
	case *acpgatev1.HarnessError_StaleTarget:
		return 10
	case *acpgatev1.HarnessError_Gateway:
		fmt.Fprintln(os.Stderr, "the gateway itself failed the turn; running it again may succeed")
		return 11
	}
	return 5 // a class this example does not know yet
}

// rejected reports a call the gateway rejected (no turn ran).
func rejected(err error) int {
	st := status.Convert(err)
	fmt.Fprintf(os.Stderr, "prompt: the gateway rejected the call: %s: %s\n", st.Code(), st.Message())
	for _, d := range st.Details() {
		if he, ok := d.(*acpgatev1.HarnessError); ok {
			failed(he)
		}
	}
	return 1
}
