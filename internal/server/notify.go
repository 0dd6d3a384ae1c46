package server

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/mcpoffer"
	"github.com/acpgate/acpgate/internal/notify"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/webhook"
)

// Turn-ending notifications: a turn started with a notify_url (the
// Prompt's, or its agent's) has its notification written by the store in
// the step that ends it (see store.Outbox); the notifier (package notify) delivers what the
// outbox holds, whichever run of whichever replica wrote it. Nothing here
// is on a turn's path: the turn only carries its target into Begin.

// checkNotifyURL refuses a notify_url that is not an http(s) URL
// (INVALID_ARGUMENT) or is outside webhooks.allowed_url_prefixes
// (PERMISSION_DENIED), naming the key an operator would change.
func checkNotifyURL(w config.Webhooks, url string) error {
	if url == "" {
		return nil
	}
	if err := mcpoffer.CheckURL(url); err != nil {
		return status.Errorf(codes.InvalidArgument, "notify_url %q: %v", url, err)
	}
	if !w.Enabled() {
		return status.Errorf(codes.PermissionDenied, "notify_url %q is not allowed: the operator has configured no webhooks.allowed_url_prefixes", url)
	}
	if !w.Allows(url) {
		return status.Errorf(codes.PermissionDenied, "notify_url %q is not allowed: it must start with one of the operator's webhooks.allowed_url_prefixes %q", url, w.AllowedURLPrefixes)
	}
	return nil
}

// notifyTarget is where the ending of a turn of agent, asked for by req,
// is announced: the request's notify_url, else the agent's.
func (g *Gateway) notifyTarget(req *acpgatev1.PromptRequest, agent string) string {
	if u := req.GetNotifyUrl(); u != "" {
		return u
	}
	a, _ := g.sessions.Agent(agent)
	return a.NotifyURL
}

// startNotifier starts delivering notifications when webhooks are
// configured; without them no turn has a target, and nothing runs.
func (g *Gateway) startNotifier() error {
	w := g.cfg.Webhooks
	if !w.Enabled() {
		return nil
	}
	secret, err := webhook.ReadSecretFile(w.SecretFile)
	if err != nil {
		return fmt.Errorf("webhooks.secret_file: %w", err)
	}
	claimer := notify.DefaultClaimer
	if g.replicas != nil {
		claimer = g.replicas.ID()
	}
	g.notifier = notify.Start(notify.Options{
		Store: g.store, Sender: &webhook.Sender{Secret: secret}, Horizon: w.Horizon(), Claimer: claimer,
		Body: func(rec store.Turn) ([]byte, error) {
			t, err := g.turnProto(rec)
			if err != nil {
				return nil, err
			}
			return protojson.Marshal(t)
		},
		Log: g.log, Metrics: g.metrics.Webhooks(),
	})
	return nil
}
