package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	channelzservice "google.golang.org/grpc/channelz/service"
	"google.golang.org/grpc/reflection"
)

// adminServer is the gRPC server of grpc-go's admin services on
// admin.listen; a nil one is not running.
//
// The one admin service is channelz (the gateway's servers, listen
// sockets, connections and call counts), registered directly rather than
// through google.golang.org/grpc/admin: admin.Register adds CSDS only
// when the xDS packages are linked in, which the gateway does not use,
// and the admin package's own tests import the xDS stack (envoy's
// control plane, cncf/xds), whose checksums go mod tidy would then add to
// go.sum for nothing. The server is plaintext and has none of the
// gateway's interceptors: no TLS, authentication, metrics or audit, which
// is why config keeps admin.listen on loopback unless admin.allow_remote.
type adminServer struct {
	srv    *grpc.Server
	served chan error
	log    *slog.Logger
}

// serveAdmin serves the admin services on addr; with no addr it serves
// nothing and returns a nil server.
func serveAdmin(addr string, log *slog.Logger, ready func(net.Addr)) (*adminServer, error) {
	if addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin.listen: %w", err)
	}
	lis = limitConnections(lis, sideMaxConnections, "admin.listen (fixed)", log, nil)
	srv := grpc.NewServer()
	channelzservice.RegisterChannelzServiceToServer(srv)
	// Reflection, so that grpcurl needs no proto files here either.
	reflection.Register(srv)
	s := &adminServer{srv: srv, served: make(chan error, 1), log: log}
	go func() { s.served <- srv.Serve(lis) }()
	log.Info("serving admin services", "addr", lis.Addr().String(), "services", "channelz")
	if ready != nil {
		ready(lis.Addr())
	}
	return s, nil
}

// stop lets calls in progress finish until ctx ends, then closes every
// connection, so it returns shortly after ctx's deadline at the latest.
func (s *adminServer) stop(ctx context.Context) {
	if s == nil {
		return
	}
	stopWithin(ctx, s.srv)
	if err := <-s.served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		s.log.Warn("the admin server stopped", "err", err)
	}
}
