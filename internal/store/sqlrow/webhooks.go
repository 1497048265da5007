package sqlrow

import (
	"encoding/json"
	"time"

	"github.com/agentplane/agentplane/internal/webhook"
)

// WebhookColumns are the webhooks table's columns, in the order of
// ScanWebhook.
const WebhookColumns = `id, tenant, url, events, agent, description, secret, previous_secret, previous_until, created_at, workflow_id`

// DeliveryColumns are the webhook_deliveries table's columns, in the order
// of ScanDelivery.
const DeliveryColumns = `id, seq, tenant, webhook_id, event_type, order_key, body, status, attempts, next_attempt_at,
	last_status, last_error, created_at, delivered_at`

// ScanWebhook scans a row of WebhookColumns; errors, a missing row's
// included, are returned as they are.
func ScanWebhook(row Scanner) (*webhook.Webhook, error) {
	var w webhook.Webhook
	err := row.Scan(&w.ID, &w.Tenant, &w.URL, JSON(&w.Events, "webhook events"), &w.Agent, &w.Description, &w.Secret,
		&w.PreviousSecret, Time(&w.PreviousUntil), Time(&w.CreatedAt), &w.WorkflowID)
	if err != nil {
		return nil, err
	}
	return &w, nil
}

// ScanDelivery scans a row of DeliveryColumns; errors, a missing row's
// included, are returned as they are. A delivery no longer pending has no
// next attempt.
func ScanDelivery(row Scanner) (*webhook.Delivery, error) {
	var (
		d    webhook.Delivery
		body string
	)
	err := row.Scan(&d.ID, &d.Seq, &d.Tenant, &d.WebhookID, &d.Type, &d.OrderKey, &body, &d.Status, &d.Attempts,
		Time(&d.NextAttempt), &d.LastStatus, &d.LastError, Time(&d.CreatedAt), TimeOrZero(&d.DeliveredAt))
	if err != nil {
		return nil, err
	}
	d.Body = json.RawMessage(body)
	if d.Status != webhook.Pending {
		d.NextAttempt = time.Time{}
	}
	return &d, nil
}
