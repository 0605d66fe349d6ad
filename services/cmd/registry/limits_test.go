package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/fpga-faas/faas/services/registry/server"
)

// notLimits are the numeric fields of server.Config that are not limits
// and so need no flag, with why.
var notLimits = map[string]string{
	"PasswordParams": "the argon2id costs of new hashes, a property of stored hashes rather than a limit; tests lower them",
}

// limitFields returns the paths ("PasswordLimits.Account.Free") of the
// numeric fields of t and of the structs within it: every limit, timeout
// and interval of the configuration.
func limitFields(t reflect.Type, prefix string) []string {
	var paths []string
	for i := range t.NumField() {
		f := t.Field(i)
		path := prefix + f.Name
		if _, ok := notLimits[path]; ok || !f.IsExported() {
			continue
		}
		switch f.Type.Kind() {
		case reflect.Struct:
			paths = append(paths, limitFields(f.Type, path+".")...)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
			paths = append(paths, path)
		}
	}
	return paths
}

// field returns the value at path of v.
func field(v reflect.Value, path string) reflect.Value {
	for _, name := range strings.Split(path, ".") {
		v = v.FieldByName(name)
	}
	return v
}

// TestEveryLimitHasAFlag: every limit of server.Config (every numeric
// field, but those of notLimits) is set by a flag of serve and by that
// flag's FAAS_* environment variable, with the flag winning over the
// variable; so a new limit cannot be added without both.
func TestEveryLimitHasAFlag(t *testing.T) {
	fields := limitFields(reflect.TypeOf(server.Config{}), "")
	if len(fields) < 30 {
		t.Fatalf("only %d limit fields found: %v", len(fields), fields)
	}
	flags := serveCommand().Flags()
	// A clean environment: none of the variables of the flags set.
	flags.VisitAll(func(fl *pflag.Flag) {
		if env := fl.Annotations[envAnnotation]; len(env) > 0 {
			t.Setenv(env[0], "")
		}
	})
	base := reflect.ValueOf(runConfig(t, nil))
	changed := func(cfg server.Config) []string {
		var diff []string
		v := reflect.ValueOf(cfg)
		for _, p := range fields {
			if !field(v, p).Equal(field(base, p)) {
				diff = append(diff, p)
			}
		}
		return diff
	}

	covered := map[string]string{} // field → flag
	flags.VisitAll(func(fl *pflag.Flag) {
		value := map[string]string{"int": "7", "int64": "7", "duration": "7s"}[fl.Value.Type()]
		if value == "" {
			return // not a number
		}
		byFlag := changed(runConfig(t, []string{"--" + fl.Name + "=" + value}))
		if len(byFlag) != 1 {
			t.Errorf("--%s=%s changes %v, want one limit", fl.Name, value, byFlag)
			return
		}
		env := fl.Annotations[envAnnotation]
		if len(env) == 0 {
			t.Errorf("--%s has no environment variable", fl.Name)
			return
		}
		t.Setenv(env[0], value)
		if byEnv := changed(runConfig(t, nil)); !slices.Equal(byEnv, byFlag) {
			t.Errorf("%s=%s changes %v, want %v as --%s does", env[0], value, byEnv, byFlag, fl.Name)
		}
		other := map[string]string{"7": "9", "7s": "9s"}[value]
		if got, want := runConfig(t, []string{"--" + fl.Name + "=" + other}), runConfig(t, nil); field(reflect.ValueOf(got), byFlag[0]).Equal(field(reflect.ValueOf(want), byFlag[0])) {
			t.Errorf("--%s=%s does not win over %s=%s", fl.Name, other, env[0], value)
		}
		t.Setenv(env[0], "")
		covered[byFlag[0]] = fl.Name
	})
	for _, p := range fields {
		if covered[p] == "" {
			t.Errorf("server.Config.%s has no flag of registry serve (with an environment variable); add one to limitFlags", p)
		}
	}
}

// runConfig is the configuration serve would run with for args in the
// current environment.
func runConfig(t *testing.T, args []string) server.Config {
	t.Helper()
	cmd, o := newServeCommand()
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := o.config(cmd.Flags())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestBadLimitFromEnv: a variable that does not parse as its flag's value
// is refused, naming the variable.
func TestBadLimitFromEnv(t *testing.T) {
	t.Setenv("FAAS_MAX_STAGED_BYTES", "lots")
	cmd, o := newServeCommand()
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.config(cmd.Flags()); err == nil || !strings.Contains(err.Error(), "FAAS_MAX_STAGED_BYTES") {
		t.Errorf("FAAS_MAX_STAGED_BYTES=lots: %v", err)
	}
	// The command line wins and is not troubled by the variable.
	cmd, o = newServeCommand()
	if err := cmd.ParseFlags([]string{"--max-staged-bytes=5"}); err != nil {
		t.Fatal(err)
	}
	if cfg, _, err := o.config(cmd.Flags()); err != nil || cfg.MaxStagedBytes != 5 {
		t.Errorf("--max-staged-bytes=5 with FAAS_MAX_STAGED_BYTES=lots: %d, %v", cfg.MaxStagedBytes, err)
	}
}
