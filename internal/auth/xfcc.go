package auth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// XFCCHeader is the header in which Envoy (and so an Istio sidecar) tells
// the service behind it which client certificate the connection it
// terminated presented.
const XFCCHeader = "x-forwarded-client-cert"

// XFCCElement is one element of an x-forwarded-client-cert header: what one
// proxy recorded of the client certificate it verified.
type XFCCElement struct {
	// By is the URI SAN of the proxy's own certificate.
	By string
	// Hash is the SHA-256 of the client certificate, hex.
	Hash string
	// Cert and Chain are the URL-encoded PEM of the certificate and its
	// chain, when the proxy is set to forward them.
	Cert, Chain string
	// Subject is the certificate's subject.
	Subject string
	// URI and DNS are its URI and DNS SANs.
	URI, DNS []string
}

// ParseXFCC parses an x-forwarded-client-cert value as Envoy writes it:
// elements separated by commas, each key=value pairs separated by
// semicolons, a value in double quotes when it holds a comma, semicolon or
// equals sign (Subject always is), with \" for a quote inside it. Keys are
// By, Hash, Cert, Chain, Subject, URI and DNS, case-insensitive; URI and
// DNS may repeat; other keys are skipped, as a later Envoy may add some.
// A value that does not follow the grammar is an error, never half-read:
// which element is whose depends on the commas being where they seem.
func ParseXFCC(header string) ([]XFCCElement, error) {
	var (
		elems []XFCCElement
		cur   XFCCElement
	)
	s := header
	for {
		s = strings.TrimLeft(s, " \t")
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || strings.ContainsAny(s[:eq], ",;\"") {
			return nil, fmt.Errorf("x-forwarded-client-cert: expected key=value at %q", clipXFCC(s))
		}
		key := strings.TrimSpace(s[:eq])
		s = s[eq+1:]
		var value string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i, closed := 1, false
			for ; i < len(s); i++ {
				c := s[i]
				if c == '\\' && i+1 < len(s) {
					i++
					b.WriteByte(s[i])
					continue
				}
				if c == '"' {
					closed = true
					break
				}
				b.WriteByte(c)
			}
			if !closed {
				return nil, fmt.Errorf("x-forwarded-client-cert: the quoted value of %s is not closed", key)
			}
			value, s = b.String(), s[i+1:]
		} else {
			end := strings.IndexAny(s, ",;")
			if end < 0 {
				end = len(s)
			}
			value, s = strings.TrimSpace(s[:end]), s[end:]
			if strings.Contains(value, `"`) {
				return nil, fmt.Errorf("x-forwarded-client-cert: the value of %s has a quote but does not start with one", key)
			}
		}
		switch strings.ToLower(key) {
		case "by":
			cur.By = value
		case "hash":
			cur.Hash = value
		case "cert":
			cur.Cert = value
		case "chain":
			cur.Chain = value
		case "subject":
			cur.Subject = value
		case "uri":
			cur.URI = append(cur.URI, value)
		case "dns":
			cur.DNS = append(cur.DNS, value)
		}
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return append(elems, cur), nil
		}
		switch s[0] {
		case ';':
		case ',':
			elems, cur = append(elems, cur), XFCCElement{}
		default:
			return nil, fmt.Errorf("x-forwarded-client-cert: expected ; or , after the value of %s at %q", key, clipXFCC(s))
		}
		s = s[1:]
	}
}

// clipXFCC is a part of a header, short enough to quote in an error.
func clipXFCC(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// PrincipalFromXFCC names the caller an x-forwarded-client-cert value
// identifies: the SPIFFE ID (the spiffe:// URI) of its last element.
//
// The last, because that is the one the sidecar in front of the gateway
// added for the client that connected to it: Envoy appends its own
// element to whatever the request already carried (Istio's sidecars
// forward with APPEND_FORWARD), so the elements before it were written by
// proxies further away, or by the client itself, and vouch for nothing.
// A proxy set to SANITIZE_SET writes only its own, which is then the last.
// The caller must therefore be reached only through that sidecar: the
// gateway trusts the header only from configured peers.
func PrincipalFromXFCC(header string) (Principal, error) {
	elems, err := ParseXFCC(header)
	if err != nil {
		return Principal{}, err
	}
	last := elems[len(elems)-1]
	var ids []spiffeid.ID
	for _, u := range last.URI {
		if !strings.HasPrefix(strings.ToLower(u), "spiffe://") {
			continue
		}
		id, err := spiffeid.FromString(u)
		if err != nil {
			return Principal{}, fmt.Errorf("x-forwarded-client-cert: the client certificate's URI %q is not a valid SPIFFE ID: %v", u, err)
		}
		ids = append(ids, id)
	}
	switch len(ids) {
	case 0:
		return Principal{}, errors.New("x-forwarded-client-cert: the sidecar's element names no SPIFFE ID (no spiffe:// URI): the client's certificate is not an SVID, or the sidecar does not forward its URI")
	case 1:
		return spiffePrincipal(ids[0]), nil
	}
	return Principal{}, fmt.Errorf("x-forwarded-client-cert: the client certificate has %d SPIFFE IDs; an SVID has exactly one", len(ids))
}
