package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/acpgate/acpgate/internal/auth"
)

func secretFile(t *testing.T, value string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// received turns an outgoing context into the incoming one the other
// replica sees.
func received(t *testing.T, out context.Context) context.Context {
	t.Helper()
	md, _ := metadata.FromOutgoingContext(out)
	return metadata.NewIncomingContext(context.Background(), md)
}

func TestASecretShorterThanSixteenBytesIsRefused(t *testing.T) {
	if _, err := ReadSecret(secretFile(t, "  short\n")); err == nil {
		t.Fatal("a 5-byte secret was accepted")
	}
}

func TestAForwardedCallSpeaksForTheCallerOnlyWithTheSharedSecret(t *testing.T) {
	s, err := ReadSecret(secretFile(t, "0123456789abcdef-shared\n"))
	if err != nil {
		t.Fatal(err)
	}
	alice := auth.Principal{Name: "alice", Attributes: map[string][]string{"groups": {"dev"}}}
	out, err := s.Outgoing(context.Background(), alice, true)
	if err != nil {
		t.Fatal(err)
	}
	p, ok, forwarded, err := s.Incoming(received(t, out))
	if err != nil || !ok || !forwarded || p.Name != "alice" || p.Attributes["groups"][0] != "dev" {
		t.Fatalf("with the secret: %v %v %v %v", p, ok, forwarded, err)
	}

	other, err := ReadSecret(secretFile(t, "another secret of 16+ bytes"))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := other.Outgoing(context.Background(), alice, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, forwarded, err := s.Incoming(received(t, forged)); !forwarded || !errors.Is(err, ErrBadSecret) {
		t.Errorf("with a wrong secret: forwarded %v, err %v; want ErrBadSecret", forwarded, err)
	}
	if _, _, forwarded, err := s.Incoming(context.Background()); forwarded || err != nil {
		t.Errorf("a call without the secret: forwarded %v, err %v; want an ordinary call", forwarded, err)
	}
}
