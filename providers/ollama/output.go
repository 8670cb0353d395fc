package ollama

import (
	"net/url"
	"strings"
)

// takesOutput is Capabilities.Output for a server at baseURL: an output
// schema goes in "format" only in a request without tools, because
// Ollama turns the schema into a grammar that holds the whole answer, so
// that a model given both never calls a tool. Ollama's cloud models,
// reached through a local server (a tag of "cloud" or ending "-cloud")
// or at ollama.com, take no schema at all (Ollama's structured-outputs
// page); they, and every turn with tools, get the loop's final_answer
// tool instead.
func takesOutput(baseURL string) func(model string, withTools bool) bool {
	cloudHost := isCloudHost(baseURL)
	return func(model string, withTools bool) bool {
		return !withTools && !cloudHost && !isCloudModel(model)
	}
}

// isCloudModel reports a model tag Ollama serves from its cloud:
// gpt-oss:120b-cloud, glm-5:cloud.
func isCloudModel(model string) bool {
	i := strings.LastIndexByte(model, ':')
	if i < 0 {
		return false
	}
	tag := model[i+1:]
	return tag == "cloud" || strings.HasSuffix(tag, "-cloud")
}

// isCloudHost reports a base URL at ollama.com, Ollama's hosted API.
func isCloudHost(baseURL string) bool {
	u, err := url.Parse(baseURL)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	return host == "ollama.com" || strings.HasSuffix(host, ".ollama.com")
}
