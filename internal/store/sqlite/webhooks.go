package sqlite

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

// queueWebhookEvent stores, in the transaction storing an event, its
// delivery to each of the tenant's webhooks that subscribes to it: the
// outbox. A nil event stores nothing.
func queueWebhookEvent(ctx context.Context, tx dbtx, ev *webhook.Event) error {
	if ev == nil {
		return nil
	}
	at := sqlrow.FormatTime(ev.At)
	_, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, tenant, webhook_id, event_type,
			order_key, body, status, attempts, next_attempt_at, last_status, last_error, lease_owner, lease_until, created_at)
		SELECT 'msg_' || ? || substr(w.id, 5), w.tenant, w.id, ?, ?, ?, 'pending', 0, ?, 0, '', '', ?, ?
		FROM webhooks w WHERE w.tenant = ? AND EXISTS (SELECT 1 FROM json_each(w.events) e WHERE e.value = ?)
			AND (w.agent = '' OR w.agent = ?) AND (w.workflow_id = '' OR w.workflow_id = ?)
		ORDER BY w.id`,
		ev.ID, ev.Type, ev.OrderKey, string(ev.Body), at, noLease, at, ev.Tenant, ev.Type, ev.Agent, ev.OrderKey)
	if err != nil {
		return fmt.Errorf("queue webhook deliveries: %w", err)
	}
	return nil
}

// CreateWebhook stores a new webhook.
func (db *DB) CreateWebhook(ctx context.Context, w *webhook.Webhook, rec *audit.Record) error {
	events, err := json.Marshal(w.Events)
	if err != nil {
		return err
	}
	w.CreatedAt = micro(w.CreatedAt)
	db.prepareAudit(rec)
	return db.write(ctx, func(tx dbtx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhooks (`+sqlrow.WebhookColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			w.ID, w.Tenant, w.URL, string(events), w.Agent, w.Description, w.Secret, w.PreviousSecret,
			sqlrow.FormatTime(w.PreviousUntil), sqlrow.FormatTime(w.CreatedAt), w.WorkflowID); err != nil {
			return fmt.Errorf("insert webhook: %w", err)
		}
		return appendAudit(ctx, tx, rec)
	})
}

// Webhook returns a webhook of the tenant, or problem.NotFound.
func (db *DB) Webhook(ctx context.Context, tenant, id string) (*webhook.Webhook, error) {
	var w *webhook.Webhook
	err := db.query(ctx, func(q dbtx) error {
		var err error
		w, err = sqlrow.ScanWebhook(q.QueryRowContext(ctx, `SELECT `+sqlrow.WebhookColumns+` FROM webhooks WHERE tenant = ? AND id = ?`, tenant, id))
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
	err := db.read(ctx, func(q dbtx) error {
		rows, err := q.QueryContext(ctx, `SELECT `+sqlrow.WebhookColumns+` FROM webhooks WHERE tenant = ? ORDER BY id`, tenant)
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
	return db.write(ctx, func(tx dbtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE webhooks SET previous_secret = secret, previous_until = ?, secret = ?
			WHERE tenant = ? AND id = ?`, sqlrow.FormatTime(previousUntil), secret, tenant, id)
		if err != nil {
			return fmt.Errorf("rotate secret: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return webhook.NotFound(id)
		}
		return appendAudit(ctx, tx, rec)
	})
}

// Deliveries lists a webhook's deliveries, newest first.
func (db *DB) Deliveries(ctx context.Context, tenant, webhookID, status string, limit int) ([]*webhook.Delivery, error) {
	var out []*webhook.Delivery
	err := db.read(ctx, func(q dbtx) error {
		rows, err := q.QueryContext(ctx, `SELECT `+sqlrow.DeliveryColumns+` FROM webhook_deliveries
			WHERE tenant = ? AND webhook_id = ? AND (? = '' OR status = ?) ORDER BY seq DESC LIMIT ?`,
			tenant, webhookID, status, status, limit)
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
	err := db.write(ctx, func(tx dbtx) error {
		var err error
		at := sqlrow.FormatTime(now)
		d, err = sqlrow.ScanDelivery(tx.QueryRowContext(ctx, `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = ?,
				created_at = CASE WHEN status = 'failed' THEN ? ELSE created_at END
			WHERE tenant = ? AND webhook_id = ? AND id = ? RETURNING `+sqlrow.DeliveryColumns, at, at, tenant, webhookID, id))
		if sqlrow.IsNoRows(err) {
			return problem.New(problem.NotFound, "delivery %s of webhook %s not found", id, webhookID)
		}
		if err != nil {
			return err
		}
		return appendAudit(ctx, tx, rec)
	})
	return d, err
}

// ClaimDeliveries leases due deliveries, each the first pending one of its
// webhook and order key.
func (db *DB) ClaimDeliveries(ctx context.Context, owner string, now, until time.Time, limit int) ([]*webhook.Delivery, error) {
	// Every workflow's end wakes the deliverer, most with nothing to send:
	// a read finds out without a turn of the writer.
	var due bool
	if err := db.query(ctx, func(q dbtx) error {
		return q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_deliveries
			WHERE status = 'pending' AND next_attempt_at <= ? AND lease_until < ?)`, sqlrow.FormatTime(now), sqlrow.FormatTime(now)).Scan(&due)
	}); err != nil || !due {
		return nil, err
	}
	var out []*webhook.Delivery
	err := db.write(ctx, func(tx dbtx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE webhook_deliveries SET lease_owner = ?, lease_until = ?
			WHERE seq IN (SELECT d.seq FROM webhook_deliveries d
				WHERE d.status = 'pending' AND d.next_attempt_at <= ? AND d.lease_until < ?
					AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.webhook_id = d.webhook_id
						AND e.order_key = d.order_key AND e.status = 'pending' AND e.seq < d.seq)
				ORDER BY d.seq LIMIT ?)
			RETURNING `+sqlrow.DeliveryColumns, owner, sqlrow.FormatTime(until), sqlrow.FormatTime(now), sqlrow.FormatTime(now), limit)
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
	err := db.write(ctx, func(tx dbtx) error {
		var delivered any
		if o.Status == webhook.Delivered {
			delivered = sqlrow.FormatTime(o.At)
		}
		next := o.NextAttempt
		if o.Status != webhook.Pending {
			next = o.At
		}
		res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = ?, attempts = ?, next_attempt_at = ?,
				last_status = ?, last_error = ?, delivered_at = ?, lease_owner = '', lease_until = ?
			WHERE id = ? AND lease_owner = ? AND status = 'pending'`,
			o.Status, o.Attempts, sqlrow.FormatTime(next), o.HTTPStatus, o.Error, delivered, noLease, id, owner)
		if err != nil {
			return fmt.Errorf("record attempt: %w", err)
		}
		n, _ := res.RowsAffected()
		held = n == 1
		return nil
	})
	return held, err
}

// queueBatchEvent stores the deliveries of a replay batch's end.
func queueBatchEvent(ctx context.Context, tx dbtx, id, status, errMsg string, at time.Time) error {
	var tenant, target string
	if err := tx.QueryRowContext(ctx, `SELECT tenant, target FROM replay_batches WHERE id = ?`, id).Scan(&tenant, &target); err != nil {
		return fmt.Errorf("read replay batch %s: %w", id, err)
	}
	return queueWebhookEvent(ctx, tx, webhook.BatchDone(tenant, id, target, status, errMsg, at))
}
