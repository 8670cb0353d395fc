package anthropic

import (
	"strconv"
	"strings"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/httpc"
)

// outputFrom is the first version of each model family that takes an
// output schema in output_config.format, the generally available form of
// Anthropic's JSON outputs, with tools or without. As of Anthropic's
// structured-outputs page in August 2026: Claude 4.5 and later. Opus 4.1
// had them only in the beta (a top-level output_format), which this
// adapter does not send; it and older models get the loop's final_answer
// tool instead.
var outputFrom = map[string]modelVersion{
	"haiku":  {4, 5},
	"sonnet": {4, 5},
	"opus":   {4, 5},
}

// modelVersion is a Claude model's version, 4.5 in claude-sonnet-4-5.
type modelVersion struct{ major, minor int }

func (v modelVersion) atLeast(w modelVersion) bool {
	return v.major > w.major || v.major == w.major && v.minor >= w.minor
}

// takesOutput is Capabilities.Output: whether model is of a family and
// version in outputFrom. A name it cannot read ("claude-3-5-sonnet", an
// alias of a gateway) does not, so that an unknown model gets the tool
// that works on every model rather than a field it may refuse.
func takesOutput(model string, _ bool) bool {
	family, v, ok := parseModel(model)
	from, known := outputFrom[family]
	return ok && known && v.atLeast(from)
}

// parseModel reads "claude-<family>-<major>[-<minor>][-<date>]": the
// minor version is one or two digits, so that the date of
// claude-sonnet-4-20250514 reads as no minor version.
func parseModel(model string) (family string, v modelVersion, ok bool) {
	rest, found := strings.CutPrefix(model, "claude-")
	if !found {
		return "", v, false
	}
	fields := strings.Split(rest, "-")
	if len(fields) < 2 {
		return "", v, false
	}
	major, err := strconv.Atoi(fields[1])
	if err != nil {
		return "", v, false
	}
	v.major = major
	if len(fields) > 2 && len(fields[2]) <= 2 {
		v.minor, _ = strconv.Atoi(fields[2])
	}
	return fields[0], v, true
}

// setOutput asks for the answer as JSON that fits req's schema, in
// output_config.format, beside whatever else the options set in
// output_config (effort). The API has no field for the schema's name or
// description, nor a strict flag: an output schema always constrains the
// answer.
func setOutput(body map[string]any, out *providers.Output) {
	if out != nil {
		httpc.SetNested(body, "output_config", "format", block{"type": "json_schema", "schema": out.Schema})
	}
}
