// Command fakegemini serves a stand-in for the Gemini API (package
// bench/internal/fakegemini), so that Gemini CLI completes turns without a
// network:
//
//	go -C bench run ./cmd/fakegemini -listen 127.0.0.1:8089
//	GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8089 GEMINI_API_KEY=dummy gemini --acp
//
// It prints the URL it listens on, then one line per request with -v.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/acpgate/acpgate/bench/internal/fakegemini"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	answer := flag.String("answer", fakegemini.DefaultAnswer, "the text of every answer")
	chunks := flag.Int("chunks", 1, "how many events the streamed answer is split into")
	verbose := flag.Bool("v", false, "log every request on standard error")
	flag.Parse()
	opts := fakegemini.Options{Answer: *answer, Chunks: *chunks}
	if *verbose {
		opts.Log = os.Stderr
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakegemini:", err)
		os.Exit(1)
	}
	fmt.Printf("fakegemini listening on http://%s\n", ln.Addr())
	if err := http.Serve(ln, fakegemini.New(opts)); err != nil {
		fmt.Fprintln(os.Stderr, "fakegemini:", err)
		os.Exit(1)
	}
}
