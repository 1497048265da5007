package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/internal/audit"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/store/sqlrow"
	"github.com/agentplane/agentplane/internal/webhook"
)

var _ webhook.Store = (*DB)(nil)

// queueWebhookEvent queues, in the transaction storing an event, its
// delivery to each of the tenant's webhooks that subscribes to it: the
// outbox. A nil event queues nothing.
func queueWebhookEvent(tx *wtx, ev *webhook.Event) {
	if ev == nil {
		return
	}
	tx.Queue(wrapErr("queue webhook deliveries"), `INSERT INTO webhook_deliveries (id, tenant, webhook_id, event_type,
			order_key, body, status, attempts, next_attempt_at, last_status, last_error, lease_owner, lease_until, created_at)
		SELECT 'msg_' || $1 || substr(w.id, 5), w.tenant, w.id, $2, $3, $4, 'pending', 0, $5, 0, '', '', $6, $5
		FROM webhooks w WHERE w.tenant = $7 AND w.events @> jsonb_build_array($2::text) AND (w.agent = '' OR w.agent = $8)
			AND (w.workflow_id = '' OR w.workflow_id = $3)
		ORDER BY w.id`,
		ev.ID, ev.Type, ev.OrderKey, string(ev.Body), micro(ev.At), time.Time{}, ev.Tenant, ev.Agent)
}

// CreateWebhook stores a new webhook.
func (db *DB) CreateWebhook(ctx context.Context, w *webhook.Webhook, rec *audit.Record) error {
	events, err := json.Marshal(w.Events)
	if err != nil {
		return err
	}
	w.CreatedAt = micro(w.CreatedAt)
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		tx.Queue(wrapErr("insert webhook"), `INSERT INTO webhooks (`+sqlrow.WebhookColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			w.ID, w.Tenant, w.URL, string(events), w.Agent, w.Description, w.Secret, w.PreviousSecret, micro(w.PreviousUntil), w.CreatedAt, w.WorkflowID)
		tx.Audit(rec)
		return nil
	})
}

// Webhook returns a webhook of the tenant, or problem.NotFound.
func (db *DB) Webhook(ctx context.Context, tenant, id string) (*webhook.Webhook, error) {
	var w *webhook.Webhook
	err := db.read(ctx, func(q querier) error {
		var err error
		w, err = sqlrow.ScanWebhook(q.QueryRow(ctx, `SELECT `+sqlrow.WebhookColumns+` FROM webhooks WHERE tenant = $1 AND id = $2`, tenant, id))
		if sqlrow.IsNoRows(err) {
			return webhook.NotFound(id)
		}
		return err
	})
	return w, err
}

// ListWebhooks returns the tenant's webhooks, oldest first.
func (db *DB) ListWebhooks(ctx context.Context, tenant string) ([]*webhook.Webhook, error) {
	var out []*webhook.Webhook
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+sqlrow.WebhookColumns+` FROM webhooks WHERE tenant = $1 ORDER BY id`, tenant)
		if err != nil {
			return fmt.Errorf("list webhooks: %w", err)
		}
		out, err = collect(rows, sqlrow.ScanWebhook)
		return err
	})
	return out, err
}

// DeleteWebhook deletes a webhook and its deliveries.
func (db *DB) DeleteWebhook(ctx context.Context, tenant, id string, rec *audit.Record) error {
	return db.deleteWithChildren(ctx, "webhooks", "webhook_deliveries", "webhook_id", tenant, id, rec, webhook.NotFound(id))
}

// RotateSecret makes secret the webhook's; the current one signs too until previousUntil.
func (db *DB) RotateSecret(ctx context.Context, tenant, id, secret string, previousUntil time.Time, rec *audit.Record) error {
	db.prepareAudit(rec)
	return db.write(ctx, func(tx *wtx) error {
		tag, err := tx.Exec(ctx, `UPDATE webhooks SET previous_secret = secret, previous_until = $3, secret = $4
			WHERE tenant = $1 AND id = $2`, tenant, id, micro(previousUntil), secret)
		if err != nil {
			return fmt.Errorf("rotate secret: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return webhook.NotFound(id)
		}
		tx.Audit(rec)
		return nil
	})
}

// Deliveries lists a webhook's deliveries, newest first.
func (db *DB) Deliveries(ctx context.Context, tenant, webhookID, status string, limit int) ([]*webhook.Delivery, error) {
	var out []*webhook.Delivery
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+sqlrow.DeliveryColumns+` FROM webhook_deliveries
			WHERE tenant = $1 AND webhook_id = $2 AND ($3 = '' OR status = $3) ORDER BY seq DESC LIMIT $4`,
			tenant, webhookID, status, limit)
		if err != nil {
			return fmt.Errorf("list deliveries: %w", err)
		}
		out, err = collect(rows, sqlrow.ScanDelivery)
		return err
	})
	return out, err
}

// RetryDelivery makes a delivery pending again, due at now.
func (db *DB) RetryDelivery(ctx context.Context, tenant, webhookID, id string, now time.Time, rec *audit.Record) (*webhook.Delivery, error) {
	db.prepareAudit(rec)
	var d *webhook.Delivery
	err := db.write(ctx, func(tx *wtx) error {
		var err error
		d, err = sqlrow.ScanDelivery(tx.QueryRow(ctx, `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $4,
				created_at = CASE WHEN status = 'failed' THEN $4 ELSE created_at END
			WHERE tenant = $1 AND webhook_id = $2 AND id = $3 RETURNING `+sqlrow.DeliveryColumns, tenant, webhookID, id, micro(now)))
		if sqlrow.IsNoRows(err) {
			return problem.New(problem.NotFound, "delivery %s of webhook %s not found", id, webhookID)
		}
		if err != nil {
			return err
		}
		tx.Audit(rec)
		return nil
	})
	return d, err
}

// ClaimDeliveries leases due deliveries, each the first pending one of its
// webhook and order key.
func (db *DB) ClaimDeliveries(ctx context.Context, owner string, now, until time.Time, limit int) ([]*webhook.Delivery, error) {
	// Every workflow's end wakes the deliverer, most with nothing to send:
	// a read finds out without a turn of a writer.
	var due bool
	if err := db.read(ctx, func(q querier) error {
		return q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_deliveries
			WHERE status = 'pending' AND next_attempt_at <= $1 AND lease_until < $1)`, micro(now)).Scan(&due)
	}); err != nil || !due {
		return nil, err
	}
	var out []*webhook.Delivery
	err := db.write(ctx, func(tx *wtx) error {
		rows, err := tx.Query(ctx, `WITH due AS (
				SELECT d.seq FROM webhook_deliveries d
				WHERE d.status = 'pending' AND d.next_attempt_at <= $2 AND d.lease_until < $2
					AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.webhook_id = d.webhook_id
						AND e.order_key = d.order_key AND e.status = 'pending' AND e.seq < d.seq)
				ORDER BY d.seq LIMIT $4 FOR UPDATE SKIP LOCKED)
			UPDATE webhook_deliveries w SET lease_owner = $1, lease_until = $3 FROM due WHERE w.seq = due.seq
			RETURNING `+prefixed("w.", sqlrow.DeliveryColumns), owner, micro(now), micro(until), limit)
		if err != nil {
			return fmt.Errorf("claim deliveries: %w", err)
		}
		out, err = collect(rows, sqlrow.ScanDelivery)
		return err
	})
	return out, err
}

// FinishAttempt records an attempt and drops owner's lease.
func (db *DB) FinishAttempt(ctx context.Context, owner, id string, o webhook.Outcome) (bool, error) {
	var held bool
	err := db.write(ctx, func(tx *wtx) error {
		var delivered *time.Time
		if o.Status == webhook.Delivered {
			at := micro(o.At)
			delivered = &at
		}
		next := micro(o.NextAttempt)
		if o.Status != webhook.Pending {
			next = micro(o.At)
		}
		tag, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET status = $3, attempts = $4, next_attempt_at = $5,
				last_status = $6, last_error = $7, delivered_at = $8, lease_owner = '', lease_until = $9
			WHERE id = $1 AND lease_owner = $2 AND status = 'pending'`,
			id, owner, o.Status, o.Attempts, next, o.HTTPStatus, o.Error, delivered, time.Time{})
		if err != nil {
			return fmt.Errorf("record attempt: %w", err)
		}
		held = tag.RowsAffected() == 1
		return nil
	})
	return held, err
}

// prefixed qualifies each column of a list with p.
func prefixed(p, cols string) string {
	var out []byte
	start := true
	for i := 0; i < len(cols); i++ {
		c := cols[i]
		if start && c != ' ' && c != '\t' && c != '\n' {
			out = append(out, p...)
			start = false
		}
		out = append(out, c)
		if c == ',' {
			start = true
		}
	}
	return string(out)
}

// queueBatchEvent queues the deliveries of a replay batch's end.
func queueBatchEvent(ctx context.Context, tx *wtx, id, status, errMsg string, at time.Time) error {
	var tenant, target string
	if err := tx.QueryRow(ctx, `SELECT tenant, target FROM replay_batches WHERE id = $1`, id).Scan(&tenant, &target); err != nil {
		return fmt.Errorf("read replay batch %s: %w", id, err)
	}
	queueWebhookEvent(tx, webhook.BatchDone(tenant, id, target, status, errMsg, at))
	return nil
}
