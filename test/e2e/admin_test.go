package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	channelzpb "google.golang.org/grpc/channelz/grpc_channelz_v1"
	"google.golang.org/grpc/credentials/insecure"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

const adminConfig = `
shutdown_grace: 5s
admin: {listen: "127.0.0.1:0"}
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
`

// channelz is a channelz client of the gateway's admin listener.
func (s *served) channelz(t *testing.T) channelzpb.ChannelzClient {
	t.Helper()
	conn, err := grpc.NewClient(s.announced(t, "acpgate admin on "), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return channelzpb.NewChannelzClient(conn)
}

// gatewayServer is the channelz server whose listen socket is on port,
// with its call counts; nil when there is none.
func gatewayServer(ctx context.Context, t *testing.T, cz channelzpb.ChannelzClient, port int) *channelzpb.Server {
	t.Helper()
	servers, err := cz.GetServers(ctx, &channelzpb.GetServersRequest{})
	if err != nil {
		t.Fatalf("channelz GetServers: %v", err)
	}
	for _, srv := range servers.GetServer() {
		for _, ref := range srv.GetListenSocket() {
			sock, err := cz.GetSocket(ctx, &channelzpb.GetSocketRequest{SocketId: ref.GetSocketId()})
			if err != nil {
				t.Fatalf("channelz GetSocket %d: %v", ref.GetSocketId(), err)
			}
			if int(sock.GetSocket().GetLocal().GetTcpipAddress().GetPort()) == port {
				return srv
			}
		}
	}
	return nil
}

func TestChannelzOnTheAdminListenerShowsTheGatewaysServerAndItsCalls(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, adminConfig))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.log())
		}
	})
	_, portText, err := net.SplitHostPort(s.addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portText)
	cz := s.channelz(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	client, _ := s.client(t)
	if _, err := client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{}); err != nil {
		t.Fatal(err)
	}
	srv := gatewayServer(ctx, t, cz, port)
	if srv == nil {
		t.Fatalf("channelz lists no server listening on the gateway's port %d", port)
	}
	if srv.GetData().GetCallsStarted() < 1 || srv.GetData().GetCallsSucceeded() < 1 {
		t.Errorf("channelz counts %d calls started, %d succeeded on the gateway's server; want the ListAgents call",
			srv.GetData().GetCallsStarted(), srv.GetData().GetCallsSucceeded())
	}
	// The gateway dials nothing itself, so it may have no channels; the
	// call must still answer.
	if _, err := cz.GetTopChannels(ctx, &channelzpb.GetTopChannelsRequest{}); err != nil {
		t.Errorf("channelz GetTopChannels: %v", err)
	}

	s.terminate(t, 8*time.Second)
	dialer := net.Dialer{Timeout: 2 * time.Second}
	if conn, err := dialer.Dial("tcp", s.announced(t, "acpgate admin on ")); err == nil {
		conn.Close()
		t.Error("the admin listener still accepts connections after the gateway exited")
	}
}

func TestTheAdminListenerIsOffByDefaultAndRefusedBeyondLoopback(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, e2eConfig))
	if strings.Contains(s.log(), "acpgate admin on") {
		t.Errorf("a gateway without admin.listen serves the admin services:\n%s", s.log())
	}
	bin, _ := binaries(t)
	remote := strings.Replace(adminConfig, `"127.0.0.1:0"`, `"0.0.0.0:0"`, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--config", writeConfig(t, remote))
	cmd.Env = append(os.Environ(), "ACPGATE_E2E_AGENT=/bin/true", "XDG_STATE_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("serve with admin.listen 0.0.0.0 was still running after 20s, want a refusal at start:\n%s", out)
	}
	if err == nil || !strings.Contains(string(out), "admin.allow_remote") {
		t.Errorf("serve with admin.listen 0.0.0.0 ended with %v, want a refusal naming admin.allow_remote:\n%s", err, out)
	}
}
