package api

import "regexp"

// The syntax of the request fields handlers check, shared by resources.
var (
	nameRE     = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*$`) // account names
	repoRE     = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
	currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)
	versionRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$`)
	digestRE   = regexp.MustCompile(`^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$`)
)
