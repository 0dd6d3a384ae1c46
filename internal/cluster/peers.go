package cluster

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Peers keeps one client connection per other replica, made on first use
// and kept until Close: a forwarded call must not pay a connection's
// set-up, and gRPC reconnects a broken one by itself.
type Peers struct {
	dial []grpc.DialOption

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

// NewPeers returns Peers that connect with opts; without any, in
// plaintext: replica-to-replica traffic is then for a private network or a
// mesh that encrypts it, and the shared secret is what authenticates it.
func NewPeers(opts ...grpc.DialOption) *Peers {
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	return &Peers{dial: opts, conns: make(map[string]*grpc.ClientConn)}
}

// Conn is the connection to the replica at addr.
func (p *Peers) Conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("replica %s: the gateway is stopping", addr)
	}
	if c := p.conns[addr]; c != nil {
		return c, nil
	}
	c, err := grpc.NewClient(addr, p.dial...)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", addr, err)
	}
	p.conns[addr] = c
	return c, nil
}

// Close closes every connection.
func (p *Peers) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Frame is a message received as its encoding, not decoded: a forwarded
// stream relays the owner's events byte for byte, so a watcher on any
// replica sees exactly what one on the owner sees.
type Frame []byte

// RawCodec marshals requests as protobuf and receives Frames undecoded.
// Pass it with grpc.ForceCodecV2 on a forwarded stream.
type RawCodec struct{}

var protoCodec = encoding.GetCodecV2(proto.Name)

// Marshal encodes a request.
func (RawCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

// Unmarshal keeps a received message's bytes in a *Frame.
func (RawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*Frame)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	*f = data.Materialize()
	return nil
}

// Name is the codec's content subtype: the owner decodes what it gets as
// the protobuf it is.
func (RawCodec) Name() string { return proto.Name }

// Stream opens a server-streaming call of method on conn that sends req
// and receives Frames.
func Stream(ctx context.Context, conn *grpc.ClientConn, method string, req any) (grpc.ClientStream, error) {
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodecV2(RawCodec{}))
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(req); err != nil {
		return nil, err
	}
	if err := cs.CloseSend(); err != nil {
		return nil, err
	}
	return cs, nil
}
