package api

// The operator functions, for the registry command (registry attachments
// list|show|detach, registry months close): the same store, rules and audit as the
// HTTP API's, without HTTP. An operator at the command line is not an
// account: its audit rows carry its name (e.g. "cli:root") and no
// actor_id.

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// AttachmentFilter selects attachments; "" matches all.
type AttachmentFilter struct {
	// State is an attachment state, or "live" for pending, loading and
	// ready.
	State string
	// Node is a node's id or host name; Tenant an account's id or name.
	Node, Tenant string
	// Limit bounds the list (newest first); 0 or more than MaxLimit is
	// MaxLimit.
	Limit int
}

// attachmentStates are the states a filter may name.
var attachmentStates = []poolapi.State{poolapi.Pending, poolapi.Loading, poolapi.Ready, poolapi.Failed, poolapi.Detached,
	poolapi.Expired, poolapi.Lost}

// AttachmentHistory is an attachment with its audit log, oldest first:
// who created it, where it was placed, what its node reported, how it
// ended and whether the node released (and scrubbed) it.
type AttachmentHistory struct {
	poolapi.Attachment
	History []registryapi.AuditEntry `json:"history"`
}

// Attachments lists every tenant's attachments that f selects, newest
// first, ended ones of any age included.
func (a *API) Attachments(ctx context.Context, f AttachmentFilter) ([]poolapi.Attachment, error) {
	if f.State != "" && f.State != "live" && !slices.Contains(attachmentStates, poolapi.State(f.State)) {
		return nil, fieldErr("state", "want live, pending, loading, ready, failed, detached, expired or lost")
	}
	states := []string{f.State}
	if f.State == "live" {
		states = liveStates
	}
	if f.Limit <= 0 || f.Limit > MaxLimit {
		f.Limit = MaxLimit
	}
	rows, err := a.st.db.Query(ctx, `select `+attachmentCols+attachmentFrom+`where ($1 = '' or a.state = any($2))
		and ($3 = '' or n.id::text = $3 or n.name = $3) and ($4 = '' or t.id::text = $4 or t.name = $4)
		order by a.created_at desc, a.id limit $5`, f.State, states, f.Node, f.Tenant, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("api: attachments: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (poolapi.Attachment, error) { return scanAttachment(r) })
}

// AttachmentHistory returns attachment id with its audit log.
func (a *API) AttachmentHistory(ctx context.Context, id string) (AttachmentHistory, error) {
	var h AttachmentHistory
	var err error
	if h.Attachment, err = a.st.getAttachment(ctx, operatorPrincipal(""), id); err != nil {
		return h, err
	}
	rows, err := a.st.db.Query(ctx, `select id, at, actor_id::text, actor_name, action, target_type, target_id, outcome,
		request_id, remote_addr, details from audit_log where target_type = 'attachment' and target_id = $1 order by id`, h.ID)
	if err != nil {
		return h, fmt.Errorf("api: attachment history: %w", err)
	}
	h.History, err = pgx.CollectRows(rows, scanAuditEntry)
	if h.History == nil {
		h.History = []registryapi.AuditEntry{}
	}
	return h, err
}

// DetachAttachment ends attachment id as operator (a name for the audit
// log), as DELETE /api/v1/attachments/{id} by an admin does: the node is
// told to release the slot, and the action is audited as
// attachment.detach. Detaching an ended attachment changes nothing; ended
// reports whether this call ended it.
func (a *API) DetachAttachment(ctx context.Context, operator, id string) (att poolapi.Attachment, ended bool, err error) {
	before, err := a.st.getAttachment(ctx, operatorPrincipal(operator), id)
	if err != nil {
		return before, false, err
	}
	att, err = a.st.detachAttachment(ctx, operatorPrincipal(operator), id)
	return att, err == nil && before.State.Live() && !att.State.Live(), err
}

// CloseMonth closes month ("YYYY-MM") as operator, as POST
// /api/v1/months/{month}/close by an admin does, at the configured
// platform fee; audited as statement.close.
func (a *API) CloseMonth(ctx context.Context, operator, month string) (registryapi.MonthClosed, error) {
	m, err := parseMonth(month)
	if err != nil || month == "" {
		return registryapi.MonthClosed{}, fieldErr("month", "want a month as YYYY-MM")
	}
	return a.st.closeMonth(ctx, operatorPrincipal(operator), m, a.cfg.PlatformFeeBasisPoints)
}

// operatorPrincipal is an operator at the command line: an admin with no
// account.
func operatorPrincipal(name string) *principal {
	return &principal{Account: auth.Account{Name: name, Role: auth.RoleAdmin}}
}
