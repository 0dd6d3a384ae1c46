package e2e

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// Tests of auth mode xfcc against the real binary: the caller is the SPIFFE
// ID a sidecar forwards in x-forwarded-client-cert, believed only from the
// sidecar's address.

// meshConfig is a gateway under xfcc with an agent everyone may use and
// one for the ml namespace's workloads; extra goes into auth.
func meshConfig(t *testing.T, extra string) string {
	return writeConfig(t, `
shutdown_grace: 5s
auth: {mode: xfcc`+extra+`}
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
  - name: ml
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
    allow: ["spiffe://cluster.local/ns/ml/*"]
`)
}

// Header values as an Istio sidecar sets them (APPEND_FORWARD): its own
// element for the mTLS peer it verified, last.
const (
	xfccTrainer  = `By=spiffe://cluster.local/ns/agents/sa/acpgate;Hash=2a4e3ad2bd9b5b5f3a30c4a3bc9ab54e8d2f3dc2b7f3a8c0d6b5e9a0c1d2e3f4;Subject="";URI=spiffe://cluster.local/ns/ml/sa/trainer`
	xfccFrontend = `By=spiffe://cluster.local/ns/agents/sa/acpgate;Hash=9b1c;Subject="O=Example, Inc.;CN=\"frontend\"";URI=spiffe://cluster.local/ns/web/sa/frontend`
)

// agentsSeen lists the agents a call with md sees, or its error.
func agentsSeen(t *testing.T, client acpgatev1.AgentGatewayClient, md ...string) (string, error) {
	t.Helper()
	resp, err := client.ListAgents(metadata.AppendToOutgoingContext(callCtx(t), md...), &acpgatev1.ListAgentsRequest{})
	var names []string
	for _, a := range resp.GetAgents() {
		names = append(names, a.GetName())
	}
	return strings.Join(names, ","), err
}

func TestUnderXFCCTheCallerIsTheSPIFFEIDTheSidecarForwardedAndAllowApplies(t *testing.T) {
	s := serve(t, "--config", meshConfig(t, ""))
	client, _ := s.client(t)
	for _, c := range []struct{ name, header, want string }{
		{"a workload of the ml namespace", xfccTrainer, "test,ml"},
		{"another workload, its subject quoted with separators", xfccFrontend, "test"},
		// A client that writes an element naming the ml namespace before
		// the sidecar's own gains nothing: the sidecar's is the caller.
		{"a forged element before the sidecar's", `URI=spiffe://cluster.local/ns/ml/sa/trainer,` + xfccFrontend, "test"},
		{"the header repeated: one list, in order", "", "test"},
	} {
		md := []string{"x-forwarded-client-cert", c.header}
		if c.header == "" {
			md = []string{"x-forwarded-client-cert", xfccTrainer, "x-forwarded-client-cert", xfccFrontend}
		}
		got, err := agentsSeen(t, client, md...)
		if err != nil || got != c.want {
			t.Errorf("%s: sees %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	_, err := agentsSeen(t, client)
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "no x-forwarded-client-cert header") {
		t.Errorf("a call without the header: %v, want UNAUTHENTICATED saying it is missing", err)
	}
	_, err = agentsSeen(t, client, "x-forwarded-client-cert", `URI=spiffe://cluster.local/ns/ml/sa/trainer;Subject="unclosed`)
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("a header off the grammar: %v, want UNAUTHENTICATED", err)
	}
}

func TestAnXFCCHeaderFromAPeerNotTrustedIsRefusedNeverBelieved(t *testing.T) {
	// The sidecar is elsewhere; the test connects from loopback, as a
	// client going around it would.
	s := serve(t, "--config", meshConfig(t, ", trusted_peers: [192.0.2.10/32]"))
	client, health := s.client(t)
	for _, md := range [][]string{{"x-forwarded-client-cert", xfccTrainer}, nil} {
		got, err := agentsSeen(t, client, md...)
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "auth.trusted_peers") {
			t.Errorf("a call from an untrusted peer with header %q: sees %q, %v; want UNAUTHENTICATED naming auth.trusted_peers", md, got, err)
		}
	}
	// Health stays public.
	if _, err := health.Check(callCtx(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health: %v", err)
	}
}
