package portal

import (
	"errors"
	"strings"
)

// formRefusal is a form's refusal as its page shows it: Error sums it up
// at the top; a refusal of one field (Field, the form's name of it) also
// marks that input, with FieldMsg beside it and the focus on it.
type formRefusal struct {
	Error, Field, FieldMsg string
}

// Invalid reports whether the refusal names the form field field.
func (f formRefusal) Invalid(field string) bool { return f.Field != "" && f.Field == field }

// fieldError is the portal's own refusal of one form field.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return fieldLabels[e.field] + ": " + e.msg }

// fieldLabels are the forms' fields as their labels name them.
var fieldLabels = map[string]string{"name": "Name", "repository": "Repository", "summary": "Summary",
	"description": "Description", "category": "Category", "board_model": "Board model", "currency": "Currency",
	"price_per_hour": "Price per hour", "price_per_load": "Price per load",
	"price_per_attached_hour": "Price per hour attached from the pool", "visibility": "Visibility",
	"days": "Expires after", "pem": "Public key", "pattern": "Pattern", "account": "Tenant account",
	"version": "Version", "digest": "Manifest digest", "role": "Role", "password": "Password",
	"logo": "Logo", "markdown": "Documentation", "trial_hours": "Free trial", "alert": "Alert at", "limit": "Hard limit"}

// apiFields are the API's names of the forms' fields where they differ.
var apiFields = map[string]string{"price_per_hour_micros": "price_per_hour", "price_per_load_micros": "price_per_load",
	"price_per_attached_hour_micros": "price_per_attached_hour", "expires_at": "days", "public_key": "pem",
	"alert_micros": "alert", "limit_micros": "limit"}

// refused returns err, a refusal by the API or a fieldError, as the form
// shows it: on its field when it names one, in the form's words.
func refused(err error) formRefusal {
	var fe *fieldError
	if errors.As(err, &fe) {
		return formRefusal{Error: fe.Error(), Field: fe.field, FieldMsg: fe.msg}
	}
	ae, ok := apiRefusal(err)
	switch {
	case !ok:
		return formRefusal{Error: err.Error()}
	case ae.Field == "":
		return formRefusal{Error: ae.Message}
	}
	f := formRefusal{Error: ae.Message, Field: ae.Field, FieldMsg: strings.TrimPrefix(ae.Message, ae.Field+": ")}
	if ff, ok := apiFields[ae.Field]; ok {
		f.Field = ff
	}
	if label, ok := fieldLabels[f.Field]; ok {
		f.Error = label + ": " + f.FieldMsg
	}
	return f
}
