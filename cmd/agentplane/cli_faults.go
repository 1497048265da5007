package main

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// faultFlags are replay's fault flags, for one workflow and --batch: the
// faults the replays inject (docs/change-safety.md).
type faultFlags struct {
	faults []string
	file   string
}

func (f *faultFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.faults, "fault", nil, "inject a fault into the calls it matches instead of their answer: TOOL[.OPERATION]=STATUS|timeout|transport[@RATE] (for example payments.getTransaction=503@0.5), or one fault as JSON (repeatable)")
	fs.StringVar(&f.file, "faults-file", "", "a YAML or JSON file (- for standard input) listing faults [{tool, operation, when, rate, result}], injected before those of --fault")
}

// apply adds the faults to a replay or batch request.
func (f *faultFlags) apply(body map[string]any, stdin io.Reader) error {
	var faults []any
	if f.file != "" {
		raw, err := readDocument(f.file, stdin)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &faults); err != nil {
			return usagef("--faults-file %s must hold a list of faults, each {tool, operation?, when?, rate?, result}", f.file)
		}
	}
	for _, s := range f.faults {
		fault, err := parseFault(s)
		if err != nil {
			return err
		}
		faults = append(faults, fault)
	}
	if len(faults) > 0 {
		body["faults"] = faults
	}
	return nil
}

// parseFault reads one --fault: a JSON object, or the short form
// TOOL[.OPERATION]=STATUS|timeout|transport[@RATE].
func parseFault(s string) (map[string]any, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "{") {
		var fault map[string]any
		if err := json.Unmarshal([]byte(s), &fault); err != nil {
			return nil, usagef("--fault %s is not a JSON object: %v", s, err)
		}
		return fault, nil
	}
	bad := usagef("--fault %q: give TOOL[.OPERATION]=STATUS|timeout|transport[@RATE], for example payments.getTransaction=503@0.5, or a fault as JSON", s)
	target, answer, ok := strings.Cut(s, "=")
	toolName, op, _ := strings.Cut(strings.TrimSpace(target), ".")
	if !ok || toolName == "" {
		return nil, bad
	}
	fault := map[string]any{"tool": toolName}
	if op != "" {
		fault["operation"] = op
	}
	answer, rate, hasRate := strings.Cut(strings.TrimSpace(answer), "@")
	switch status, err := strconv.Atoi(answer); {
	case answer == "timeout" || answer == "transport":
		fault["result"] = map[string]any{"error": answer}
	case err == nil:
		fault["result"] = map[string]any{"status": status}
	default:
		return nil, bad
	}
	if hasRate {
		r, err := strconv.ParseFloat(rate, 64)
		if err != nil {
			return nil, bad
		}
		fault["rate"] = r
	}
	return fault, nil
}
