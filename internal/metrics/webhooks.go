package metrics

import "github.com/prometheus/client_golang/prometheus"

// Webhooks instruments the delivery of turn-ending notifications: what an
// operator watches to see a receiver that refuses them, or a queue that
// grows because none can be delivered. Registered on every gateway, at
// zero on one without webhooks.
type Webhooks struct {
	deliveries *prometheus.CounterVec
	failures   prometheus.Counter
	oldest     prometheus.Gauge
}

// Delivery results (the result label of acpgate_webhook_deliveries_total).
const (
	// WebhookDelivered: the receiver answered 2xx.
	WebhookDelivered = "delivered"
	// WebhookGivenUp: the retry horizon passed without a 2xx answer.
	WebhookGivenUp = "given_up"
	// WebhookTurnGone: the turn was deleted (turn_retention) before its
	// notification could be delivered.
	WebhookTurnGone = "turn_gone"
)

func newWebhooks() *Webhooks {
	w := &Webhooks{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acpgate_webhook_deliveries_total", Help: "Turn-ending notifications this replica finished, by result: delivered, given_up (the retry horizon passed), turn_gone (the turn was deleted first).",
		}, []string{"result"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "acpgate_webhook_delivery_failures_total", Help: "Delivery attempts of turn-ending notifications that failed (no answer, or not 2xx); each is retried until the horizon.",
		}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "acpgate_webhook_oldest_pending_seconds", Help: "Age of the oldest turn-ending notification not yet delivered, in the store all replicas share; 0 when none is pending.",
		}),
	}
	for _, r := range []string{WebhookDelivered, WebhookGivenUp, WebhookTurnGone} {
		w.deliveries.WithLabelValues(r)
	}
	return w
}

func (w *Webhooks) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.deliveries, w.failures, w.oldest}
}

// Webhooks is the notifications' instruments; nil (recording nothing)
// for a nil Metrics.
func (m *Metrics) Webhooks() *Webhooks {
	if m == nil {
		return nil
	}
	return m.webhooks
}

// Finished counts a notification finished with result (one of the
// Webhook* results).
func (w *Webhooks) Finished(result string) {
	if w != nil {
		w.deliveries.WithLabelValues(result).Inc()
	}
}

// Failed counts a failed delivery attempt.
func (w *Webhooks) Failed() {
	if w != nil {
		w.failures.Inc()
	}
}

// OldestPending records the oldest pending notification's age in
// seconds.
func (w *Webhooks) OldestPending(seconds float64) {
	if w != nil {
		w.oldest.Set(seconds)
	}
}
