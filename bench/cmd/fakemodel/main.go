// Command fakemodel serves the stand-in for OpenAI's chat completions and
// Responses API and Anthropic's Messages API (package
// bench/internal/fakemodel), so that Qwen Code, OpenCode, codex-acp and
// claude-agent-acp complete turns without a network or a key:
//
//	go -C bench run ./cmd/fakemodel -listen 127.0.0.1:8090
//	OPENAI_BASE_URL=http://127.0.0.1:8090/v1 OPENAI_API_KEY=x qwen --acp
//	ANTHROPIC_BASE_URL=http://127.0.0.1:8090 ANTHROPIC_API_KEY=x claude-agent-acp
//
// A prompt with [permission], [slow], [refuse] or [error] chooses a
// scenario (docs/agents.md). It prints the URL it listens on, then one line
// per request with -v.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/acpgate/acpgate/bench/internal/fakemodel"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	verbose := flag.Bool("v", false, "log every request on standard error")
	flag.Parse()
	var opts fakemodel.Options
	if *verbose {
		opts.Log = os.Stderr
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakemodel:", err)
		os.Exit(1)
	}
	fmt.Printf("fakemodel listening on http://%s\n", ln.Addr())
	if err := http.Serve(ln, fakemodel.New(opts)); err != nil {
		fmt.Fprintln(os.Stderr, "fakemodel:", err)
		os.Exit(1)
	}
}
