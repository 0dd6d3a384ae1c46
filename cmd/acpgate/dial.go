package main

// Reaching the gateway, and what a call it rejected means for the exit code.

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/acpgate/acpgate/internal/exitcode"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// dial returns a client for the gateway at addr.
func dial(addr string, stderr io.Writer) (acpgatev1.AgentGatewayClient, func(), int) {
	// A completed turn's outcome carries the whole answer: the client
	// accepts messages of any size the gateway sends.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))
	if err != nil {
		fmt.Fprintf(stderr, "acpgate: invalid --addr %q: %v\n", addr, err)
		return nil, nil, exitcode.Usage
	}
	return acpgatev1.NewAgentGatewayClient(conn), func() { _ = conn.Close() }, exitcode.OK
}

// statusExit reports a failed call and returns its exit code. interrupted
// says whether the command's context was cancelled, which explains a
// CANCELLED status.
func statusExit(err error, interrupted bool, stderr io.Writer) int {
	st := status.Convert(err)
	if interrupted && (st.Code() == codes.Canceled || st.Code() == codes.DeadlineExceeded) {
		fmt.Fprintln(stderr, "acpgate: cancelled: interrupted")
		return exitcode.Cancelled
	}
	fmt.Fprintf(stderr, "acpgate: %s: %s\n", codeName(st.Code()), st.Message())
	if st.Code() == codes.Unavailable && strings.Contains(st.Message(), "connection refused") {
		fmt.Fprintln(stderr, "· nothing listens there: is `acpgate serve` running at that address? --addr (or ACPGATE_ADDR) names another")
	}
	for _, d := range st.Details() {
		if he, ok := d.(*acpgatev1.HarnessError); ok {
			label, _ := exitcode.Classify(he)
			fmt.Fprintf(stderr, "acpgate: %s: %s\n", label, he.GetMessage())
			printHarnessExtras(he, stderr)
		}
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded:
		return exitcode.GatewayUnavailable
	case codes.InvalidArgument:
		return exitcode.InvalidArgument
	default:
		return exitcode.Rejected
	}
}

// codeName is the name of a gRPC status code in the google.rpc.Code enum,
// for example "FAILED_PRECONDITION" or "CANCELLED"; a code the enum lacks
// reads as grpc-go spells it, for example "Code(42)".
func codeName(c codes.Code) string {
	if _, known := code.Code_name[int32(c)]; known {
		return code.Code(c).String()
	}
	return c.String()
}
