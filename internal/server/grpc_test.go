package server_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/emptypb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/server"
)

type panicker interface{ Boom() }

// panickingService is registered beside the gateway to prove the server's
// interceptors turn a handler panic into INTERNAL and keep serving.
var panickingService = grpc.ServiceDesc{
	ServiceName: "test.Panicker",
	HandlerType: (*panicker)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Boom",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Panicker/Boom"}
			return interceptor(ctx, in, info, func(context.Context, any) (any, error) { panic("boom") })
		},
	}},
}

type boom struct{}

func (boom) Boom() {}

func TestAPanicBecomesInternalAndTheServerLives(t *testing.T) {
	cfg := config.Default("/bin/false")
	gw, err := server.New(server.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewGRPCServer(gw, nil)
	srv.RegisterService(&panickingService, boom{})
	lis := bufconn.Listen(1 << 16)
	go func() { _ = srv.Serve(lis) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx, gw)
	}()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = conn.Invoke(context.Background(), "/test.Panicker/Boom", &emptypb.Empty{}, &emptypb.Empty{})
	if status.Code(err) != codes.Internal {
		t.Fatalf("a panic should be INTERNAL, got %v", err)
	}
	if _, err := acpgatev1.NewAgentGatewayClient(conn).ListAgents(context.Background(), &acpgatev1.ListAgentsRequest{}); err != nil {
		t.Errorf("the server died with the panic: %v", err)
	}
}

func TestUnaryRequestsMissingRequiredFieldsAreInvalid(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	calls := map[string]error{}
	_, calls["GetSession"] = h.client.GetSession(ctx, &acpgatev1.GetSessionRequest{})
	_, calls["CloseSession"] = h.client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{})
	_, calls["Cancel"] = h.client.Cancel(ctx, &acpgatev1.CancelRequest{})
	_, calls["ResolvePermission"] = h.client.ResolvePermission(ctx, &acpgatev1.ResolvePermissionRequest{SessionId: "s"})
	_, calls["ResolveElicitation"] = h.client.ResolveElicitation(ctx, &acpgatev1.ResolveElicitationRequest{SessionId: "s"})
	_, calls["ResolveElicitation without action"] = h.client.ResolveElicitation(ctx, &acpgatev1.ResolveElicitationRequest{SessionId: "s", RequestId: "r"})
	_, calls["SetSessionMode"] = h.client.SetSessionMode(ctx, &acpgatev1.SetSessionModeRequest{SessionId: "s"})
	_, calls["SetSessionConfigOption"] = h.client.SetSessionConfigOption(ctx, &acpgatev1.SetSessionConfigOptionRequest{SessionId: "s", OptionId: "model"})
	for name, err := range calls {
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v", name, err)
		}
	}
}
