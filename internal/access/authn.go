package access

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/internal/auth"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/tlsreload"
)

// Security is the listener's transport security and how callers are
// identified, built from the configuration's tls and auth.
type Security struct {
	mode     config.AuthMode
	reloader *tlsreload.Reloader // nil: plaintext
	jwt      *auth.JWTVerifier
	public   map[string]bool // full service names reachable without credentials
	trusted  []netip.Prefix  // peers whose x-forwarded-client-cert is believed (xfcc)
}

// publicServices are the services each auth.public name stands for.
var publicServices = map[string][]string{
	config.PublicHealth:     {"grpc.health.v1.Health"},
	config.PublicReflection: {"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"},
}

// NewSecurity loads what cfg's tls and auth name: the certificates (checked
// now, reloaded when they change) and the JWKS. An error names the file
// that would not load.
func NewSecurity(cfg *config.Config, log *slog.Logger) (*Security, error) {
	s := &Security{mode: cfg.Auth.EffectiveMode(), public: map[string]bool{}}
	for _, name := range cfg.Auth.Public {
		for _, svc := range publicServices[name] {
			s.public[svc] = true
		}
	}
	if cfg.TLS.Enabled() {
		r, err := tlsreload.New(tlsreload.Files{
			CertFile:     cfg.TLS.CertFile,
			KeyFile:      cfg.TLS.KeyFile,
			ClientCAFile: cfg.TLS.ClientCAFile,
			ClientAuth:   handshakeClientAuth(cfg),
		}, log)
		if err != nil {
			return nil, err
		}
		s.reloader = r
	}
	for _, p := range cfg.Auth.TrustedPeers {
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			return nil, fmt.Errorf("auth.trusted_peers: %w", err)
		}
		s.trusted = append(s.trusted, prefix.Masked())
	}
	if s.mode == config.AuthJWT {
		keys, err := auth.LoadJWKS(cfg.Auth.JWKSFile)
		if err != nil {
			return nil, errors.New("auth.jwks_file: " + err.Error())
		}
		v, err := auth.NewJWTVerifier(auth.JWTOptions{
			Keys:       keys,
			Issuer:     cfg.Auth.Issuer,
			Audience:   cfg.Auth.Audience,
			Algorithms: cfg.Auth.Algorithms,
			Claims:     cfg.Auth.Claims,
			Leeway:     30 * time.Second,
		})
		if err != nil {
			return nil, errors.New("auth: " + err.Error())
		}
		s.jwt = v
	}
	return s, nil
}

// handshakeClientAuth is the TLS handshake's client certificate policy.
// Under auth mode mtls the handshake only asks for (or, with require,
// insists on) a certificate, and each call verifies it against the current
// client CAs: a failure is then UNAUTHENTICATED naming what was wrong
// (unknown CA, expired) rather than a bare TLS alert, and health stays
// reachable. Otherwise the handshake verifies it itself.
func handshakeClientAuth(cfg *config.Config) tls.ClientAuthType {
	mtls := cfg.Auth.Mode == config.AuthMTLS
	switch cfg.TLS.ClientAuth {
	case config.ClientAuthRequire:
		if mtls {
			return tls.RequireAnyClientCert
		}
		return tls.RequireAndVerifyClientCert
	case config.ClientAuthRequest:
		if mtls {
			return tls.RequestClientCert
		}
		return tls.VerifyClientCertIfGiven
	}
	return tls.NoClientCert
}

// ServerOptions are the transport credentials, when TLS is on.
func (s *Security) ServerOptions() []grpc.ServerOption {
	if s == nil || s.reloader == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(s.reloader.ServerConfig()))}
}

// Interceptors authenticate every call but those to public services; nil
// under auth mode none.
func (s *Security) Interceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	if s == nil || s.mode == config.AuthNone {
		return nil, nil
	}
	needsAuth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return !s.public[c.Service]
	})
	return selector.UnaryServerInterceptor(grpcauth.UnaryServerInterceptor(s.authenticate), needsAuth),
		selector.StreamServerInterceptor(grpcauth.StreamServerInterceptor(s.authenticate), needsAuth)
}

// authenticate establishes the caller's Principal, puts it in the context
// and in the call's log line (principal=), or fails UNAUTHENTICATED saying
// what was wrong.
func (s *Security) authenticate(ctx context.Context) (context.Context, error) {
	var (
		p   auth.Principal
		err error
	)
	switch s.mode {
	case config.AuthMTLS:
		p, err = s.fromClientCert(ctx)
	case config.AuthJWT:
		p, err = s.fromBearer(ctx)
	case config.AuthXFCC:
		p, err = s.fromXFCC(ctx)
	default:
		return ctx, nil
	}
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	logging.AddFields(ctx, logging.Fields{"principal", p.Name})
	return auth.NewContext(ctx, p), nil
}

func (s *Security) fromClientCert(ctx context.Context) (auth.Principal, error) {
	pr, ok := peer.FromContext(ctx)
	if !ok {
		return auth.Principal{}, auth.ErrNoClientCert
	}
	info, ok := pr.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return auth.Principal{}, errors.New("the connection is not TLS, so it carries no client certificate")
	}
	return auth.VerifyClientCert(info.State.PeerCertificates, s.reloader.ClientCAs(), time.Now())
}

func (s *Security) fromBearer(ctx context.Context) (auth.Principal, error) {
	vals := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(vals) == 0 {
		return auth.Principal{}, errors.New("no bearer token: send the header authorization: Bearer <token>")
	}
	if len(vals) > 1 {
		return auth.Principal{}, errors.New("more than one authorization header")
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return auth.Principal{}, errors.New("the authorization header is not of the form Bearer <token>")
	}
	return s.jwt.Verify(strings.TrimSpace(token))
}

// fromXFCC names the caller by the x-forwarded-client-cert header, which
// is believed only from a trusted peer (the sidecar): any client reaching
// the gateway around the sidecar could write the header itself. A call
// from elsewhere is refused whether or not it carries the header, since
// under xfcc there is no other way to name a caller.
func (s *Security) fromXFCC(ctx context.Context) (auth.Principal, error) {
	from, trusted := s.peerTrusted(ctx)
	vals := metadata.ValueFromIncomingContext(ctx, auth.XFCCHeader)
	switch {
	case !trusted && len(vals) > 0:
		return auth.Principal{}, fmt.Errorf("the x-forwarded-client-cert header came from %s, which is not in auth.trusted_peers: only the sidecar in front of acpgate may set it, and a header from anywhere else is refused", from)
	case !trusted:
		return auth.Principal{}, fmt.Errorf("the connection from %s did not come through the sidecar (auth.trusted_peers), which names callers under auth mode xfcc", from)
	case len(vals) == 0:
		return auth.Principal{}, errors.New("no x-forwarded-client-cert header: the sidecar must forward the client certificate (Istio does for mTLS peers; Envoy's forward_client_cert_details)")
	}
	// Repeated header fields are one comma-separated list, in order.
	return auth.PrincipalFromXFCC(strings.Join(vals, ","))
}

// peerTrusted is the call's peer address and whether it is in
// auth.trusted_peers.
func (s *Security) peerTrusted(ctx context.Context) (string, bool) {
	pr, ok := peer.FromContext(ctx)
	if !ok || pr.Addr == nil {
		return "an unknown peer", false
	}
	ap, err := netip.ParseAddrPort(pr.Addr.String())
	if err != nil {
		return pr.Addr.String(), false
	}
	addr := ap.Addr().Unmap()
	for _, p := range s.trusted {
		if p.Contains(addr) {
			return addr.String(), true
		}
	}
	return addr.String(), false
}
