package gemini

import (
	"maps"
	"strconv"
	"strings"

	"github.com/agentd/agentd/providers"
)

// takesOutput is Capabilities.Output. Every Gemini model since 2.0 takes
// a JSON Schema for its answer (responseJsonSchema); only Gemini 3 and
// later take one in a request that also declares functions, which Gemini
// 2.x refuses with a 400 ("Function calling with a response mime type:
// 'application/json' is unsupported"). A name without a version
// (gemini-flash-latest, a tuned model) says no, so that the model gets
// the loop's final_answer tool, which works on every model.
func takesOutput(model string, withTools bool) bool {
	major, ok := majorVersion(model)
	return ok && (major >= 3 || major == 2 && !withTools)
}

// majorVersion reads the 3 of gemini-3-pro-preview and the 2 of
// gemini-2.5-flash, with or without the "models/" prefix.
func majorVersion(model string) (int, bool) {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(model, "models/"), "gemini-")
	if !ok {
		return 0, false
	}
	version, _, _ := strings.Cut(rest, "-")
	major, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(major)
	return n, err == nil
}

// schemaKeys are the generationConfig members that say what the answer
// is made of, in both spellings the API reads. An output replaces them
// all: responseSchema given in the options beside responseJsonSchema
// would be refused, the two being exclusive.
var schemaKeys = []string{
	"responseMimeType", "response_mime_type",
	"responseSchema", "response_schema",
	"responseJsonSchema", "response_json_schema",
}

// setOutput asks for the answer as JSON that fits out's schema, in
// generationConfig beside the rest of the options' generationConfig
// (copied: the body shares it with the agent's options). Gemini has no
// field for the schema's name or description, nor a strict flag.
func setOutput(body map[string]any, out *providers.Output) {
	if out == nil {
		return
	}
	cfg := map[string]any{}
	if given, ok := body["generationConfig"].(map[string]any); ok {
		maps.Copy(cfg, given)
	}
	for _, k := range schemaKeys {
		delete(cfg, k)
	}
	cfg["responseMimeType"] = "application/json"
	cfg["responseJsonSchema"] = out.Schema
	body["generationConfig"] = cfg
}
